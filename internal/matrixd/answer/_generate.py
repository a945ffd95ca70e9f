"""The models that write answers: Ollama's /api/chat and an OpenAI-compatible
/v1/chat/completions, both streamed, spoken over matrixd's one aiohttp session.

Ollama streams NDJSON: one object a line, `message.content` the next piece, `done` true on
the last (an `error` line when it fails mid-way). An OpenAI-compatible server streams
server-sent events: `data: {chunk}` lines, `choices[0].delta.content` the next piece,
then `data: [DONE]`. A failure is UpstreamError (the upstream's words and status), a
refused connection too; the time limits are the caller's (`[answer]`'s, per piece).
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import Any

import aiohttp
import msgspec

from internal.common.errors import UpstreamError
from internal.common.openai_compat import endpoint, error_message
from internal.config.answer import AnswerConfig
from internal.matrixd.answer._prompt import Message


class Chat(ABC):
    """One configured model: its backend's name, the model, a stream of text pieces."""

    kind: str

    def __init__(self, cfg: AnswerConfig, session: aiohttp.ClientSession, key: str = "") -> None:
        self.model = cfg.model
        self.max_tokens = cfg.max_tokens
        self.temperature = cfg.temperature
        self._session = session
        self._headers = {"Content-Type": "application/json"}
        if key:
            self._headers["Authorization"] = f"Bearer {key}"

    @abstractmethod
    def stream(self, messages: Sequence[Message], max_tokens: int | None = None
               ) -> AsyncGenerator[str, None]: ...

    async def _post(self, url: str, body: dict[str, Any]) -> aiohttp.ClientResponse:
        """The streamed answer's response (its status checked), or UpstreamError."""
        try:
            resp = await self._session.post(url, data=msgspec.json.encode(body),
                                            headers=self._headers,
                                            timeout=aiohttp.ClientTimeout(total=None))
        except aiohttp.ClientError as exc:
            raise UpstreamError(f"{self.kind} at {url}: {exc}") from None
        if resp.status >= 400:
            raw = await resp.read()
            resp.release()
            try:
                payload: Any = msgspec.json.decode(raw)
            except msgspec.DecodeError:
                payload = None
            raise UpstreamError(f"{self.kind}: {error_message(payload, raw)} "
                                f"(HTTP {resp.status})")
        return resp


def _messages(messages: Sequence[Message]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in messages]


class OllamaChat(Chat):
    kind = "ollama"

    def __init__(self, cfg: AnswerConfig, session: aiohttp.ClientSession, key: str = "") -> None:
        super().__init__(cfg, session, key)
        self.url = f"{cfg.url.rstrip('/')}/api/chat"

    async def stream(self, messages: Sequence[Message], max_tokens: int | None = None
                     ) -> AsyncGenerator[str, None]:
        body = {"model": self.model, "messages": _messages(messages), "stream": True,
                "options": {"num_predict": max_tokens or self.max_tokens,
                            "temperature": self.temperature}}
        resp = await self._post(self.url, body)
        try:
            async for line in _lines(resp, self.kind):
                if not line.strip():
                    continue
                item = _decode(line, self.kind)
                if item.get("error"):
                    raise UpstreamError(f"ollama: {item['error']}")
                piece = (item.get("message") or {}).get("content") or ""
                if piece:
                    yield str(piece)
                if item.get("done"):
                    return
            raise UpstreamError("ollama: the answer ended before its last line (done)")
        finally:
            resp.release()


class OpenAIChat(Chat):
    kind = "openai"

    def __init__(self, cfg: AnswerConfig, session: aiohttp.ClientSession, key: str = "") -> None:
        super().__init__(cfg, session, key)
        self.url = endpoint(cfg.url, "chat/completions")

    async def stream(self, messages: Sequence[Message], max_tokens: int | None = None
                     ) -> AsyncGenerator[str, None]:
        body = {"model": self.model, "messages": _messages(messages), "stream": True,
                "max_tokens": max_tokens or self.max_tokens, "temperature": self.temperature}
        resp = await self._post(self.url, body)
        try:
            async for line in _lines(resp, self.kind):
                if not line.startswith("data:"):
                    continue  # blank lines between events, comments, `event:` lines
                data = line[5:].strip()
                if data == "[DONE]":
                    return
                item = _decode(data, self.kind)
                if item.get("error"):
                    raise UpstreamError(f"openai: {error_message(item, data.encode())}")
                for choice in item.get("choices") or []:
                    piece = (choice.get("delta") or {}).get("content") or ""
                    if piece:
                        yield str(piece)
            raise UpstreamError("openai: the stream ended without [DONE]")
        finally:
            resp.release()


async def _lines(resp: aiohttp.ClientResponse, kind: str) -> AsyncIterator[str]:
    """The answer's lines as they come; a connection lost mid-way is UpstreamError."""
    try:
        async for raw in resp.content:
            yield raw.decode("utf-8", "replace").rstrip("\r\n")
    except (aiohttp.ClientError, asyncio.IncompleteReadError) as exc:
        raise UpstreamError(f"{kind}: the answer broke off: {exc}") from None


def _decode(text: str, kind: str) -> dict[str, Any]:
    try:
        item = msgspec.json.decode(text)
    except msgspec.DecodeError:
        raise UpstreamError(f"{kind}: not JSON: {text[:200]!r}") from None
    if not isinstance(item, dict):
        raise UpstreamError(f"{kind}: not a JSON object: {text[:200]!r}")
    return item


CHATS: dict[str, type[Chat]] = {"ollama": OllamaChat, "openai": OpenAIChat}


def open_chat(cfg: AnswerConfig, session: aiohttp.ClientSession, key: str = "") -> Chat | None:
    """The configured model (None: no backend, every answer extractive)."""
    if not cfg.backend:
        return None
    return CHATS[cfg.backend](cfg, session, key)
