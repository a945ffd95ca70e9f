"""LoCoMo's dev half (CC BY-NC 4.0: read from the shared data, never copied here), each
conversation's turns indexed as spoken and as `lakehouse ingest --normalize` stores them."""

from __future__ import annotations

import asyncio
import sys
import time
from dataclasses import replace
from pathlib import Path

from bench.data.beir import CACHE
from internal.clients.embed import EmbedClient
from internal.clients.vectord import VectordClient
from internal.evaluation import locomo
from internal.evaluation.ingest import ingest
from internal.understanding import context, nlp
from internal.understanding.normalize import Observation, normalize

FILE = ("data", "locomo", "locomo_dev.json")
DEFAULT_WINDOW = (context.WINDOW_BEFORE, context.WINDOW_AFTER)


def suffix(window: tuple[int, int]) -> str:
    """The normalised index's corpus suffix: "_norm" for the default window."""
    return "_norm" if window == DEFAULT_WINDOW else f"_norm_w{window[0]}{window[1]}"


def conversations(data: Path) -> list[locomo.Conversation]:
    return locomo.load(data.joinpath(*FILE))


async def index(vc: VectordClient, ec: EmbedClient, convs: list[locomo.Conversation],
                windows: tuple[tuple[int, int], ...] = (DEFAULT_WINDOW,)) -> None:
    """Each conversation as spoken (corpus `conv.corpus`) and normalised with each window
    (each turn with the turns around it in its session, as `--context B:A` stores it)."""
    pipeline = await asyncio.to_thread(nlp.load)
    for conv in convs:
        docs = [locomo.doc(t) for t in conv.turns]
        await ingest(vc, ec, conv.corpus, docs, cache_dir=CACHE)
        t0 = time.perf_counter()
        normed = await asyncio.to_thread(normalize, pipeline,
                                         [Observation(t.text, t.when, t.speaker) for t in conv.turns])
        print(f"{conv.corpus}: normalised in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        ndocs = [locomo.doc(t, n.text, {"original": t.text, "keywords": n.keywords,
                                        **({"dates": n.dates} if n.dates else {})})
                 for t, n in zip(conv.turns, normed, strict=True)]
        for window in windows:
            texts = context.windows([d.text for d in ndocs], [t.session for t in conv.turns], *window)
            mark = f"{window[0]}:{window[1]}"
            wdocs = [d if x == d.text else replace(d, text=x, metadata={**d.metadata, context.WINDOW_KEY: mark})
                     for d, x in zip(ndocs, texts, strict=True)]
            await ingest(vc, ec, conv.corpus + suffix(window), wdocs, cache_dir=CACHE)


# The conversations answers were tuned on and those held out (written before anything
# was measured): bench/suite/answers.py reports both.
TUNE = ("conv-26", "conv-41", "conv-42")
HELD = ("conv-30", "conv-43")


def part_of(conv: locomo.Conversation) -> str:
    """"tune" or "held"."""
    return "tune" if conv.id in TUNE else "held"
