"""Documents and pages made from the BEIR sets for the bulk jobs (ingest, sync, reembed):
each run's texts tagged so that embedd's cache answers none of another run's."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np

from bench.harness.http import CORPORA, post


def tagged_docs(data: Path, sets: tuple[str, ...], tag: str) -> list[dict[str, Any]]:
    """The sets' documents, ids prefixed by set, a run tag at the end of every text."""
    docs = []
    for name in sets:
        with (data / "data" / name / "corpus.jsonl").open() as f:
            for line in f:
                d = json.loads(line)
                docs.append({"_id": f"{name[:2]}-{d['_id']}", "title": d.get("title") or "",
                             "text": f"{d['text']} [{tag}]"})
    return docs


def write_jsonl(path: Path, docs: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path


def write_wiki(folder: Path, data: Path, tag: str, pages: int) -> Path:
    """pages markdown pages, two sections each, from SciFact's abstracts."""
    docs = tagged_docs(data, ("scifact",), tag)
    folder.mkdir(parents=True)
    for i in range(pages):
        a, b = docs[i], docs[i + pages]
        (folder / f"page-{i:03d}.md").write_text(
            f"# {a['title'] or a['_id']}\n\n{a['text']}\n\n## {b['title'] or b['_id']}\n\n{b['text']}\n")
    return folder


async def unembedded(http: aiohttp.ClientSession, gateway: str, corpus: str,
                     docs: list[dict[str, Any]]) -> None:
    """A corpus of random vectors and no model: what `reembed` then embeds."""
    await post(http, f"{gateway}{CORPORA}", {"name": corpus, "dim": 384})
    rng = np.random.default_rng(38)
    for s in range(0, len(docs), 500):
        part = docs[s:s + 500]
        vecs = rng.standard_normal((len(part), 384)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        await post(http, f"{gateway}{CORPORA}/{corpus}/items", {"items": [
            {"id": d["_id"], "title": d["title"], "text": d["text"], "vector": v.tolist()}
            for d, v in zip(part, vecs, strict=True)]})


def extract(archive: Path, dest: Path, prefix: str = "") -> Path:
    """The archive's files (those under prefix) extracted under dest; dest / prefix."""
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.isfile() and m.name.startswith(prefix)]
        tar.extractall(dest, members=members, filter="data")
    return dest / prefix
