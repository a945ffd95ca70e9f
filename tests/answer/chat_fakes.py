"""Fakes of the two generative servers answers use, speaking their real wire formats.

Neither Ollama nor an OpenAI-compatible server can run here. `ChatFake` serves both:
Ollama's `POST /api/chat` (with `"stream": true`: NDJSON, one object a line, `message.content`
the next piece, `done: true` on the last; without it one object) and an OpenAI-compatible
`POST /v1/chat/completions` (with `"stream": true`: server-sent events, `data: {chunk}` lines
with `choices[0].delta.content`, then `data: [DONE]`; without it one completion), their
error bodies too. What it writes is `reply`, or in the `echo` mode every passage of the
prompt with its marker (so a test sees everything the model was given). `ChatThread` runs
one in a thread of its own, for a stack started as processes.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from typing import Any

from aiohttp import web

PASSAGE = re.compile(r"^\[(\d+)\] (.*)$", re.M)


def echo(prompt: str) -> str:
    """Every passage of the prompt, each with its marker: `text [n]`."""
    return " ".join(f"{text} [{n}]" for n, text in PASSAGE.findall(prompt))


class ChatFake:
    """One generative server; `mode`: ok | echo | error | slow_first | stall | broken."""

    def __init__(self, reply: str = "Green tea wants water at 80 degrees [1].") -> None:
        self.reply = reply
        self.mode = "ok"
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.delay = 0.0  # seconds before the first piece (slow_first) or between pieces

    def text_for(self, body: dict[str, Any]) -> str:
        if self.mode == "echo":
            return echo(body["messages"][-1]["content"])
        return self.reply

    def _pieces(self, text: str) -> list[str]:
        # Small pieces, so a marker is often cut in two ("[1" + "2]"), as tokens cut it.
        return [text[i:i + 3] for i in range(0, len(text), 3)] or [""]

    async def _record(self, request: web.Request) -> dict[str, Any]:
        body: dict[str, Any] = await request.json()
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        return body

    async def _wait(self, i: int) -> None:
        if self.mode == "slow_first" and i == 0:
            await asyncio.sleep(self.delay)
        elif self.mode == "stall" and i == 2:
            await asyncio.sleep(self.delay)

    async def ollama_chat(self, request: web.Request) -> web.StreamResponse:
        body = await self._record(request)
        if self.mode == "error":
            return web.json_response(
                {"error": f'model "{body["model"]}" not found, try pulling it first'}, status=404)
        text = self.text_for(body)
        created = "2026-11-29T10:00:00.000000Z"
        if not body.get("stream", True):
            return web.json_response({"model": body["model"], "created_at": created,
                                      "message": {"role": "assistant", "content": text},
                                      "done": True, "done_reason": "stop"})
        resp = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await resp.prepare(request)
        for i, piece in enumerate(self._pieces(text)):
            await self._wait(i)
            if self.mode == "broken" and i == 2:
                await resp.write(b'{"error":"an error was encountered while running the model"}\n')
                return resp
            await resp.write(json.dumps({"model": body["model"], "created_at": created,
                                         "message": {"role": "assistant", "content": piece},
                                         "done": False}).encode() + b"\n")
        await resp.write(json.dumps({
            "model": body["model"], "created_at": created,
            "message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop",
            "total_duration": 4883583458, "load_duration": 1334875, "prompt_eval_count": 26,
            "prompt_eval_duration": 342546000, "eval_count": 282,
            "eval_duration": 4535599000}).encode() + b"\n")
        await resp.write_eof()
        return resp

    async def openai_chat(self, request: web.Request) -> web.StreamResponse:
        body = await self._record(request)
        if self.mode == "error":
            return web.json_response({"error": {
                "message": "Incorrect API key provided: sk-wrong.", "type": "invalid_request_error",
                "param": None, "code": "invalid_api_key"}}, status=401)
        text = self.text_for(body)
        base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": body["model"]}
        if not body.get("stream"):
            return web.json_response({**base, "object": "chat.completion", "choices": [{
                "index": 0, "message": {"role": "assistant", "content": text},
                "finish_reason": "stop"}]})
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)

        async def send(obj: dict[str, Any]) -> None:
            await resp.write(b"data: " + json.dumps(obj).encode() + b"\n\n")

        await send({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                         "finish_reason": None}]})
        for i, piece in enumerate(self._pieces(text)):
            await self._wait(i)
            if self.mode == "broken" and i == 2:
                return resp  # the connection ends mid-answer, no [DONE]
            await send({**base, "choices": [{"index": 0, "delta": {"content": piece},
                                             "finish_reason": None}]})
        await send({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/api/chat", self.ollama_chat)
        app.router.add_post("/v1/chat/completions", self.openai_chat)
        return app


class ChatThread:
    """A ChatFake served on its own event loop in a thread (for a stack of processes)."""

    def __init__(self, fake: ChatFake) -> None:
        self.fake = fake
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="chat-fake")

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        runner = web.AppRunner(self.fake.app())
        self._loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        port = runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        self._ready.set()
        self._loop.run_forever()
        self._loop.run_until_complete(runner.cleanup())

    def start(self) -> ChatThread:
        self._thread.start()
        self._ready.wait(10)
        return self

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
