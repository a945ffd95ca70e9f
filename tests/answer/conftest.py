"""Corpora answers are asked of (the tour's handbook and tickets, a conversation), loaded
once through the session's vectord and embedd, and matrixd apps with `[answer]` set."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from internal.clients.embed import EmbedClient
from internal.clients.vectord import VectordClient
from internal.config import Config
from internal.config.answer import AnswerConfig
from internal.matrixd.server import make_app
from tests.answer.chat_fakes import ChatFake
from tests.helpers import ROOT, serve, url_of, with_section

TURNS = [
    ("D1:1", "Caroline", "Hey Mel! How have you been?"),
    ("D1:2", "Melanie", "Swamped with the kids and work. What's new with you?"),
    ("D1:3", "Caroline", "I went to a LGBTQ support group yesterday and it was so powerful."),
    ("D1:4", "Melanie", "I ran a charity race for mental health last Saturday. It felt great."),
    ("D2:1", "Caroline", "I am researching adoption agencies; I want to give a kid a home."),
    ("D2:2", "Melanie", "My kids and I went camping at the national park last weekend."),
    ("D2:3", "Caroline", "I moved from Sweden four years ago with my mom."),
    ("D2:4", "Melanie", "Pottery is my favourite way to relax, besides painting sunsets."),
]


@dataclass
class Corpora:
    handbook: str
    tickets: str
    talk: str
    texts: dict[tuple[str, str], str]  # (corpus, id) -> the stored text


def _examples(name: str) -> list[dict[str, Any]]:
    lines = (ROOT / "docs" / "examples" / f"{name}.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in lines.splitlines() if line.strip()]


@pytest.fixture(scope="session")
async def corpora(vectord_url: str, embedd_url: str) -> AsyncIterator[Corpora]:
    tag = uuid.uuid4().hex[:8]
    out = Corpora(f"ans_handbook_{tag}", f"ans_tickets_{tag}", f"ans_talk_{tag}", {})
    docs = {out.handbook: [{"id": d["_id"], "title": d["title"], "text": d["text"],
                            "tags": d.get("tags", []), "metadata": d.get("metadata", {})}
                           for d in _examples("handbook")],
            out.tickets: [{"id": d["_id"], "title": d["title"], "text": d["text"],
                           "tags": d.get("tags", []), "metadata": d.get("metadata", {})}
                          for d in _examples("tickets")],
            out.talk: [{"id": i, "title": f"session {i[1]}", "text": f"{who}: {text}",
                        "metadata": {"speaker": who, "session": int(i[1]),
                                     "turn": int(i.split(":")[1])}}
                       for i, who, text in TURNS]}
    async with aiohttp.ClientSession() as s:
        vec, emb = VectordClient(s, vectord_url), EmbedClient(s, embedd_url)
        for name, items in docs.items():
            e = await emb.embed([f"{d['title']}\n{d['text']}" for d in items])
            await vec.create_corpus(name, e.dim, model=e.model)
            await vec.upsert(name, [{**d, "vector": v} for d, v in zip(items, e.vectors,
                                                                       strict=True)],
                             model=e.model)
            out.texts.update({(name, d["id"]): d["text"] for d in items})
        yield out
        for name in docs:
            await vec.delete_corpus(name)


MatrixFor = Callable[..., Awaitable[str]]


@pytest.fixture
async def matrix_for(base_cfg: Config, vectord_url: str, embedd_url: str
                     ) -> AsyncIterator[MatrixFor]:
    """A matrixd whose `[answer]` is given (by default none: extractive only)."""
    servers: list[TestServer] = []

    async def start(**answer: Any) -> str:
        cfg = with_section(base_cfg, "matrixd", vectord_url=vectord_url, embedd_url=embedd_url,
                           playbook_corpus=f"pb_{uuid.uuid4().hex[:8]}")
        cfg = with_section(cfg, "answer", **answer) if answer else cfg
        AnswerConfig(**answer).validate()
        server = await serve(make_app(cfg))
        servers.append(server)
        return url_of(server)

    yield start
    for server in servers:
        await server.close()


@pytest.fixture
async def chat() -> AsyncIterator[tuple[ChatFake, str]]:
    """A fake generative server (both wire formats) and its address."""
    fake = ChatFake()
    server = await serve(fake.app())
    yield fake, url_of(server)
    await server.close()
