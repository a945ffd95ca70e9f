"""What guarding PostgreSQL's 1 MB tsvector limit costs a 1,000-item upsert.

vectord lets PostgreSQL decide (the generated tsvector column raises 54000) and only
then finds the oversized item by computing each item's tsvector alone. This measures,
in one run on the same embedded PostgreSQL and vectord (in-process, over HTTP):
  - a 1,000-item batch of SciFact passages (the ordinary path: nothing extra runs);
  - the same batch with one item of 1.2 MB of distinct words (the 400 and its search);
  - the alternative we did not build: a Python pre-check of every item that counts its
    distinct words' bytes (a conservative bound), on the same 1,000 texts.

    python scripts/bench_upsert_limits.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from internal.config import Config
from internal.pg import embedded
from internal.vectord.server import make_app
from tests.helpers import serve, shared_dir, url_of, with_section

DIM = 384
_WORD = re.compile(r"\w+")


def words(nbytes: int) -> str:
    """Distinct six-letter words adding up to about nbytes."""
    out, i = [], 0
    while 7 * len(out) < nbytes:
        n, w = i, "q"
        for _ in range(5):
            n, r = divmod(n, 26)
            w += chr(97 + r)
        out.append(w)
        i += 1
    return " ".join(out)


def precheck(texts: list[str]) -> int:
    """The alternative: a conservative tsvector size per text (distinct words' bytes,
    doubled for the parts of hyphenated words, plus 4 bytes of positions each)."""
    worst = 0
    for t in texts:
        distinct = set(_WORD.findall(t.lower()))
        worst = max(worst, sum(2 * len(w.encode()) + 4 for w in distinct))
    return worst


async def main(rounds: int) -> None:
    texts = []
    with (shared_dir() / "data" / "scifact" / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            texts.append(json.loads(line)["text"])
            if len(texts) == 1000:
                break
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(1000, DIM)).astype(np.float32).tolist()
    huge = words(1_200_000)
    tmp = Path(tempfile.mkdtemp(prefix="bench-upsert-limits-"))
    pg = embedded.start(tmp / "pg")
    try:
        cfg = with_section(Config(), "vectord", dsn=pg.dsn)
        server = await serve(make_app(cfg))
        base = url_of(server) + "/v1/vectors/corpora"
        async with aiohttp.ClientSession() as http:
            async with http.post(base, json={"name": "bench", "dim": DIM, "language": "english"}) as r:
                assert r.status == 201, await r.text()

            async def upsert(items: list[dict[str, Any]]) -> tuple[int, float]:
                t0 = time.perf_counter()
                async with http.post(f"{base}/bench/items", json={"items": items}) as r:
                    await r.read()
                    return r.status, time.perf_counter() - t0

            ok_s, bad_s, pre_s = [], [], []
            for n in range(rounds):  # alternated in one run: the box is shared and noisy
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
    print(f"1,000-item upsert (SciFact passages), median of {rounds}:")
    print(f"  ordinary batch               {ok * 1000:8.1f} ms  (1.00x)")
    print(f"  with one 1.2 MB item (400)   {bad * 1000:8.1f} ms  ({bad / ok:.2f}x)")
    print(f"  Python pre-check alone       {pre * 1000:8.1f} ms  ({pre / ok:.3f}x of an ordinary batch)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=3)
    asyncio.run(main(ap.parse_args().rounds))
