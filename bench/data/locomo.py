"""LoCoMo's dev half as the benchmarks load it: each conversation a corpus, two indexes.

`spoken`: a turn an item ("Speaker: text", titled by its session and date; metadata
session, turn, date, speaker), as internal.evaluation.locomo makes it. `normalised`: the
turns as `lakehouse ingest --normalize` stores them: "I" and "yesterday" resolved by the
stack's own /v1/matrix/normalize (the turn's speaker and its session's time), each turn
indexed with the two turns before it and the one after it in its session (metadata
`original`, `keywords`, `dates`, `context_window`). Vectors are cached in var/eval-cache,
so a second run embeds nothing. The data (CC BY-NC 4.0) is read where it lies.

The questions are split by conversation into the part answers were tuned on and the part
held out (written before anything was measured): TUNE and HELD.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

import aiohttp

from bench.data.beir import CACHE, AnyVersion
from bench.harness.http import post
from internal.clients.embed import EmbedClient
from internal.evaluation import locomo
from internal.evaluation.beir import Doc
from internal.evaluation.ingest import ingest
from internal.understanding import context

Index = Literal["spoken", "normalised"]
INDEXES: tuple[Index, ...] = ("spoken", "normalised")
SUFFIX = {"spoken": "", "normalised": "_norm"}
TUNE = ("conv-26", "conv-41", "conv-42")
HELD = ("conv-30", "conv-43")
BATCH = 500  # observations a normalize request


def conversations(data: Path) -> list[locomo.Conversation]:
    return locomo.load(data / "data" / "locomo" / "locomo_dev.json")


def part_of(conv: locomo.Conversation) -> str:
    """"tune" or "held"."""
    return "tune" if conv.id in TUNE else "held"


def corpus(conv: locomo.Conversation, index: Index) -> str:
    return conv.corpus + SUFFIX[index]


async def normalised_docs(http: aiohttp.ClientSession, base: str,
                          conv: locomo.Conversation) -> list[Doc]:
    """The turns normalised by the stack and windowed as `ingest --normalize` does."""
    turns = conv.turns
    normed: list[dict[str, object]] = []
    for start in range(0, len(turns), BATCH):
        obs = [{"text": t.text, "speaker": t.speaker, "reference_time": t.when.isoformat()}
               for t in turns[start:start + BATCH]]
        normed += (await post(http, f"{base}/v1/matrix/normalize",
                              {"observations": obs}))["observations"]
    docs = [locomo.doc(t, str(n["text"]), {"original": t.text, "keywords": n["keywords"],
                                          **({"dates": n["dates"]} if n["dates"] else {})})
            for t, n in zip(turns, normed, strict=True)]
    window = (context.WINDOW_BEFORE, context.WINDOW_AFTER)
    texts = context.windows([d.text for d in docs], [t.session for t in turns], *window)
    mark = f"{window[0]}:{window[1]}"
    return [d if x == d.text else
            dataclasses.replace(d, text=x, metadata={**d.metadata, context.WINDOW_KEY: mark})
            for d, x in zip(docs, texts, strict=True)]


async def into(http: aiohttp.ClientSession, base: str, convs: list[locomo.Conversation],
               index: Index) -> dict[str, str]:
    """Each conversation as a corpus of the stack at base: conversation id -> corpus."""
    out = {}
    for conv in convs:
        docs = ([locomo.doc(t) for t in conv.turns] if index == "spoken"
                else await normalised_docs(http, base, conv))
        name = corpus(conv, index)
        await ingest(AnyVersion(http, base, timeout=1800.0),
                     EmbedClient(http, base, timeout=1800.0), name, docs, cache_dir=CACHE,
                     cache_name=f"bench_locomo_{name}")
        out[conv.id] = name
    return out
