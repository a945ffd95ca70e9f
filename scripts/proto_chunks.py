"""Prototype measurement behind the wiki sync's chunking rule (DECISIONS.md, "Chunks").

Two rules over the same pages, each synced by the Syncer `lakehouse sync` runs into an
in-process vectord and embedd (embedded PostgreSQL in a temp dir, the local model):

- packed: a page cut before each heading, whole sections packed into chunks of up to
  `chunk_chars` (2,000), a longer section cut at blank lines (the rule in force);
- sections: a chunk per heading's section (a heading with no text of its own joins the
  section after it), a longer section cut at blank lines as above.

Measured on a wiki with headings (this repository's README and docs/*.md: nothing in
tldr-pages has a second heading) with questions whose answer is a phrase of one passage:
hit@3 (a chunk among the first three holds the phrase), per mode, and the characters a
reader goes through in those three hits. Also printed: how many tldr pages the rules cut
differently, and the share of chunk text past the model's 256 word pieces.

    .venv/bin/python scripts/proto_chunks.py
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from internal.api.vectord import Hit as VHit  # noqa: E402
from internal.api.vectord import MultiSearchRequest  # noqa: E402
from internal.clients.embed import EmbedClient  # noqa: E402
from internal.clients.vectord import VectordClient  # noqa: E402
from internal.common import logs  # noqa: E402
from internal.config import Config  # noqa: E402
from internal.syncd import pages  # noqa: E402
from internal.syncd.runner import Syncer, SyncSettings  # noqa: E402
from scripts.bench_sync import start  # noqa: E402
from scripts.bench_wiki import archive_or_exit, extract  # noqa: E402
from tests.helpers import shared_dir, with_section  # noqa: E402

DOCS = ["README.md", "docs/API.md", "docs/ARCHITECTURE.md", "docs/PYTHON.md", "docs/SCALING.md"]
# question -> a phrase of the passage that answers it
QUESTIONS = {
    "give an agent a key that may only search two corpora": "keys create support-agent",
    "what happens to searches when PostgreSQL dies": "searches answer 503",
    "mark a search result as a wrong answer": "--wrong",
    "configure an MCP client for lakehouse": "mcpServers",
    "install the python client without the server": "pip install ./clients/python",
    "evaluate the search quality on my own data set": "lakehouse eval --dataset",
    "override a configuration key from an environment variable": "LAKEHOUSE_<SECTION>_<KEY>",
    "move a corpus to another embedding model": "lakehouse reembed",
    "use lakehouse as a LangChain retriever": "LakehouseRetriever",
    "make an incremental backup": "--incremental-from",
    "sign a token for one tenant of my application": "tenant_token(",
    "one search hit per wiki page": "group-by parent",
    "measure the feedback loop with relevance judgements": "feedback-qrels",
    "steps to add a new search mode": "Adding a search mode",
    "which modules may import psycopg": "only vectord and the programs above it import",
    "split a question with several parts into sub-queries": "lakehouse analyze",
    "how long does a failover of the primary take": "timeline of a failover",
    "search across several corpora at once from python": "corpora=[",
    "what does the gateway answer a client over its share": "429",
    "restore the database to a point in time": "--until",
}
MODES = ("vector", "lexical", "hybrid")


def sections_rule(body: str, max_chars: int) -> list[str]:
    """A chunk per heading's section; a heading alone joins the next section."""
    out: list[str] = []
    carry = ""
    for section in (s.strip("\n") for s in pages.split_sections(body)):
        lines = [ln for ln in section.splitlines() if ln.strip()]
        if len(lines) == 1 and pages._ATX.match(lines[0]):
            carry = f"{carry}\n\n{section}" if carry else section
            continue
        whole = f"{carry}\n\n{section}" if carry else section
        carry = ""
        out += [whole] if len(whole) <= max_chars else pages._split_long(whole, max_chars)
    if carry:
        out.append(carry)
    return [c.strip() for c in out if c.strip()]


def tldr_differences(archive: Path, tmp: Path) -> tuple[int, int, float, float]:
    """Pages of tldr-pages the two rules cut differently, pages, and the share of chunk
    characters past about 256 word pieces (1,000 characters) under each."""
    root = tmp / "tldr"
    extract(archive_or_exit(archive), root)
    differ = n = 0
    past = {"packed": 0, "sections": 0}
    total = 0
    for p in root.rglob("*.md"):
        _, body = pages.split_front_matter(p.read_text(encoding="utf-8"))
        a, b = pages.chunk_body(body, 2000), sections_rule(body, 2000)
        n += 1
        differ += a != b
        total += sum(len(c) for c in a)
        past["packed"] += sum(max(0, len(c) - 1000) for c in a)
        past["sections"] += sum(max(0, len(c) - 1000) for c in b)
    shutil.rmtree(root, ignore_errors=True)
    return differ, n, past["packed"] / total, past["sections"] / total


async def run(args: argparse.Namespace) -> None:
    from internal.embedd.server import make_app as embedd_app
    from internal.pg import embedded
    from internal.vectord.server import make_app as vectord_app

    tmp = Path(tempfile.mkdtemp(prefix="lakehouse-proto-chunks-"))
    differ, n, past_packed, past_sections = tldr_differences(args.archive, tmp)
    wiki = tmp / "docs"
    for rel in DOCS:
        (wiki / Path(rel).parent).mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, wiki / rel)
    pg = embedded.start(tmp / "pg")
    rows = []
    try:
        cfg = with_section(Config(), "vectord", dsn=pg.dsn, pool_min=1, pool_max=4)
        v_runner, v_url = await start(vectord_app(cfg))
        e_runner, e_url = await start(embedd_app(cfg))
        try:
            async with aiohttp.ClientSession() as session:
                vectord, embed = VectordClient(session, v_url), EmbedClient(session, e_url)
                original = pages.chunk_body
                rules: dict[str, Callable[[str, int], list[str]]] = {
                    "packed": original, "sections": sections_rule}
                for name, rule in rules.items():
                    pages.chunk_body = rule  # type: ignore[assignment]
                    try:
                        r = await Syncer(SyncSettings(wiki_dir=wiki, corpus=f"docs_{name}"),
                                         vectord, embed).request_run()
                    finally:
                        pages.chunk_body = original  # type: ignore[assignment]
                    assert not r.errors, r.errors
                    for mode in MODES:
                        hits = chars = 0
                        for q, needle in QUESTIONS.items():
                            vec = None
                            if mode != "lexical":
                                e = await embed.embed([q], input_type="query")
                                vec = e.vectors[0]
                            req = MultiSearchRequest(corpora=[f"docs_{name}"], mode=mode,
                                                     query_text=q, query_vector=vec, k=3)
                            found = (await vectord.search_many(req, VHit)).hits
                            hits += any(needle in (h.text or "") for h in found)
                            chars += sum(len(h.text or "") for h in found)
                        rows.append((name, r.chunks, mode, hits, chars / len(QUESTIONS)))
        finally:
            await e_runner.cleanup()
            await v_runner.cleanup()
    finally:
        pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\ntldr-pages: the rules cut {differ} of {n} pages differently; chunk text past "
          f"1,000 characters: packed {past_packed:.1%}, sections {past_sections:.1%}\n")
    print(f"docs wiki ({len(DOCS)} pages), {len(QUESTIONS)} questions\n")
    print("| rule | chunks | mode | hit@3 | characters in the top 3 |")
    print("|---|---:|---|---:|---:|")
    for name, chunks, mode, hits, chars in rows:
        print(f"| {name} | {chunks} | {mode} | {hits / len(QUESTIONS):.2f} ({hits}/{len(QUESTIONS)}) "
              f"| {chars:.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archive", type=Path,
                        default=shared_dir() / "corpora" / "tldr-pages.tar.gz")
    args = parser.parse_args()
    logs.configure("warning", "console")
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
