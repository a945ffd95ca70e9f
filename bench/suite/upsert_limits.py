"""What guarding PostgreSQL's 1 MB tsvector limit costs a 1,000-item upsert.

vectord lets PostgreSQL decide (the generated tsvector column raises 54000) and only then
finds the oversized item by computing each item's tsvector alone. Measured in one run on
one embedded PostgreSQL and vectord (in-process, over HTTP): a 1,000-item batch of
SciFact passages (the ordinary path); the same batch with one item of 1.2 MB of distinct
words (the 400 and its search); and the alternative not built: a Python pre-check of
every item counting its distinct words' bytes (a conservative bound).
"""

from __future__ import annotations

import json
import re
import statistics
import time
from typing import Any

import aiohttp
import numpy as np

from bench.harness import Run
from bench.harness.http import CORPORA, post
from internal.config import Config
from internal.pg import embedded
from internal.vectord.server import make_app
from tests.helpers import serve, url_of, with_section

OPTIONS = {"rounds": 3}
QUICK = {"rounds": 1}
WORD = re.compile(r"\w+")


def words(nbytes: int) -> str:
    """Distinct six-letter words adding up to about nbytes."""
    out: list[str] = []
    while 7 * len(out) < nbytes:
        n, w = len(out), "q"
        for _ in range(5):
            n, r = divmod(n, 26)
            w += chr(97 + r)
        out.append(w)
    return " ".join(out)


def precheck(texts: list[str]) -> int:
    """A conservative tsvector size per text: distinct words' bytes, doubled for the parts
    of hyphenated words, plus 4 bytes of positions each."""
    return max(sum(2 * len(w.encode()) + 4 for w in set(WORD.findall(t.lower()))) for t in texts)


async def main(run: Run) -> None:
    with run.need("data", "scifact", "corpus.jsonl").open(encoding="utf-8") as fh:
        texts = [json.loads(line)["text"] for _, line in zip(range(1000), fh, strict=False)]
    vectors = np.random.default_rng(0).normal(size=(1000, 384)).astype(np.float32).tolist()
    huge = words(1_200_000)
    pg = embedded.start(run.folder / "pg")
    try:
        server = await serve(make_app(with_section(Config(), "vectord", dsn=pg.dsn)))
        base = url_of(server) + CORPORA
        async with aiohttp.ClientSession() as http:
            await post(http, base, {"name": "bench", "dim": 384, "language": "english"})

            async def upsert(items: list[dict[str, Any]]) -> tuple[int, float]:
                t0 = time.perf_counter()
                async with http.post(f"{base}/bench/items", json={"items": items}) as r:
                    await r.read()
                    return r.status, time.perf_counter() - t0

            ok_s, bad_s, pre_s = [], [], []
            for n in range(run.args.rounds):  # alternated in one run
                items = [{"id": f"r{n}-{i}", "vector": v, "text": t}
                         for i, (v, t) in enumerate(zip(vectors, texts, strict=True))]
                status, s = await upsert(items)
                assert status == 200
                ok_s.append(s)
                bad = [dict(it, id=f"b{n}-{i}") for i, it in enumerate(items)]
                bad[500]["text"] = huge
                status, s = await upsert(bad)
                assert status == 400
                bad_s.append(s)
                t0 = time.perf_counter()
                precheck(texts)
                pre_s.append(time.perf_counter() - t0)
        await server.close()
    finally:
        pg.stop()
    ok, bad, pre = (statistics.median(x) for x in (ok_s, bad_s, pre_s))
    run.table(f"1,000-item upsert (SciFact passages), median of {run.args.rounds}",
              ["batch", "ms:.1f", "x ordinary:.3f"],
              [("ordinary batch", ok * 1000, 1.0), ("with one 1.2 MB item (400)", bad * 1000, bad / ok),
               ("Python pre-check alone", pre * 1000, pre / ok)])
