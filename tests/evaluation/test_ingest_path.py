"""The default path scores like the harness.

Part of CISI is ingested twice: through `lakehouse ingest` (the real CLI in a subprocess,
through a real gateway and the stack's document pipeline; corpus language auto, as a user
gets by default) and through the eval harness (language english). Every judged query must
rank alike in both, lexical and default hybrid. The subset holds the documents of one
chunk (at most 2,000 characters): a longer one is cut into sections by the pipeline and
not by the harness; CLI hits are compared by their document's id.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import aiohttp

from internal.api.vectord import SearchRequest
from internal.clients.embed import EmbedClient
from internal.clients.vectord import VectordClient
from internal.config import Config
from internal.evaluation import beir
from internal.evaluation.ingest import ingest
from internal.evaluation.metrics import evaluate
from internal.evaluation.runner import embed_queries
from internal.gateway.server import make_app as gateway_app
from tests.helpers import ROOT, require_shared, serve, url_of, with_section
from tests.vectord.vdata import unique

QUERIES = 8
EXTRA_DOCS = 120


def _subset(folder: Path, out: Path) -> beir.Dataset:
    """The first QUERIES judged dev queries, their judged documents and EXTRA_DOCS more."""
    full = beir.load(folder, "dev")
    qids = sorted(full.qrels)[:QUERIES]
    wanted = {d for q in qids for d in full.qrels[q]}
    short = [d for d in full.docs if len(d.text) <= 2000]
    docs = [d for d in short if d.id in wanted]
    docs += [d for d in short if d.id not in wanted][:EXTRA_DOCS]
    (out / "qrels").mkdir(parents=True)
    with (out / "corpus.jsonl").open("w", encoding="utf-8") as fh:
        for d in docs:
            fh.write(json.dumps({"_id": d.id, "title": d.title, "text": d.text}) + "\n")
    with (out / "queries.jsonl").open("w", encoding="utf-8") as fh:
        for q in qids:
            fh.write(json.dumps({"_id": q, "text": full.queries[q]}) + "\n")
    with (out / "qrels" / "dev.tsv").open("w", encoding="utf-8") as fh:
        fh.write("query-id\tcorpus-id\tscore\n")
        for q in qids:
            for d, rel in full.qrels[q].items():
                if any(doc.id == d for doc in docs):
                    fh.write(f"{q}\t{d}\t{rel}\n")
    return beir.load(out, "dev")


async def test_cli_ingest_ranks_like_the_harness(base_cfg: Config, documents_url: str,
                                                 embedd_url: str, tmp_path: Path) -> None:
    ds = _subset(require_shared("data", "cisi"), tmp_path / "cisi")
    cfg = with_section(Config(), "gateway", embedd=(embedd_url,), vectord=(documents_url,),
                       matrixd=(documents_url,), syncd=(documents_url,))
    gateway = await serve(gateway_app(cfg))
    cli, harness = unique("cli"), unique("harness")
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "internal.cli.main", "ingest", str(tmp_path / "cisi" / "corpus.jsonl"),
            "--corpus", cli, "--url", url_of(gateway), "--quiet", cwd=ROOT,
            env={**os.environ, "LAKEHOUSE_TOKEN": ""},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate()
        assert proc.returncode == 0, (out.decode(), err.decode())
        async with aiohttp.ClientSession() as http:
            vc = VectordClient(http, documents_url, timeout=600)
            ec = EmbedClient(http, embedd_url, timeout=600)
            assert (await vc.get_corpus(cli)).language == "auto"
            report = await ingest(vc, ec, harness, ds.docs)
            vectors = await embed_queries(ec, ds.queries, report.model)
            for mode in ("lexical", "hybrid"):
                runs: dict[str, dict[str, list[str]]] = {cli: {}, harness: {}}
                for corpus, run in runs.items():
                    for q, text in ds.queries.items():
                        req = SearchRequest(mode=mode, query_text=text, k=10,
                                            query_vector=vectors[q] if mode == "hybrid" else None)
                        res = await vc.search(corpus, req)
                        run[q] = [h.document_id or h.id for h in res.hits]
                assert runs[cli] == runs[harness], mode
                ndcg = evaluate(runs[cli], ds.qrels)["ndcg@10"]
                assert ndcg > 0, mode
    finally:
        await gateway.close()
