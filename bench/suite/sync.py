"""Wiki sync on the tldr-pages corpus: a full sync, a rerun with no change, 1% edited.

The Syncer syncd uses, against vectord and embedd served in this process (an embedded
PostgreSQL of its own, the local model): a full sync, a rerun with no change (must make
zero embedding calls; target under 5% of the full run's time) and a rerun with 1% of the
pages edited. Pages/s, the share of time spent embedding, each rerun's time as a ratio of
the full run's. --pages N syncs a random sample of N files.
"""

from __future__ import annotations

import random
import tarfile
from typing import Any

import aiohttp
from aiohttp import web

from bench.data import wiki
from bench.harness import Run
from internal.clients.embed import EmbedClient
from internal.clients.vectord import VectordClient
from internal.common import logs
from internal.config import Config
from internal.embedd.server import make_app as embedd_app
from internal.pg import embedded
from internal.syncd.runner import RunResult, Syncer, SyncSettings
from internal.vectord.server import make_app as vectord_app
from tests.helpers import serve, url_of, with_section

OPTIONS = {"pages": (0, "a random sample of N files (0: all)"), "batch_size": 64, "seed": 7}
QUICK = {"pages": 1000}
LANGUAGES = {"pages": "en", "pages.de": "de", "pages.fr": "fr", "pages.es": "es",
             "pages.it": "it", "pages.ru": "ru", "pages.zh": "simple", "pages.ja": "simple"}


def row(name: str, r: RunResult, full: float) -> tuple[Any, ...]:
    return (name, r.seconds, r.pages / r.seconds if r.seconds else 0.0, r.embedded_pages,
            r.embedded_chunks, r.embed_calls, r.embed_seconds / r.seconds if r.seconds else 0.0,
            r.seconds / full, r.added, r.updated, r.unchanged, len(r.errors))


async def main(run: Run) -> None:
    a = run.args
    logs.configure("warning", "console")
    folder = run.folder / "wiki"
    with tarfile.open(wiki.archive(run.data)) as tar:
        members = [m for m in tar.getmembers() if m.isfile()]
        if a.pages and a.pages < len(members):
            members = random.Random(a.seed).sample(members, a.pages)
        tar.extractall(folder, members=members, filter="data")
    pg = embedded.start(run.folder / "pg")
    cfg = with_section(Config(), "vectord", dsn=pg.dsn, pool_min=1, pool_max=4)
    servers: list[web.Application] = [vectord_app(cfg), embedd_app(cfg)]
    v, e = [await serve(app) for app in servers]
    try:
        async with aiohttp.ClientSession() as session:
            settings = SyncSettings(wiki_dir=folder, corpus="bench_wiki", languages=LANGUAGES,
                                    batch_size=a.batch_size)
            syncer = Syncer(settings, VectordClient(session, url_of(v)), EmbedClient(session, url_of(e)))
            full = await syncer.request_run()
            nochange = await syncer.request_run()
            pages = sorted(folder.rglob("*.md"))
            edited = random.Random(a.seed).sample(pages, max(1, len(pages) // 100))
            for p in edited:
                with p.open("a", encoding="utf-8") as f:
                    f.write("\n- Edited by bench_sync:\n\n`true`\n")
            onepct = await syncer.request_run()
    finally:
        await e.close()
        await v.close()
        pg.stop()
    run.table(f"tldr-pages: {len(members)} files extracted, {full.pages} pages synced ({full.ignored} "
              f"ignored), {full.chunks} chunks, batch {a.batch_size}",
              ["run", "seconds:.2f", "pages/s:.1f", "emb.pages:d", "emb.chunks:d", "calls:d",
               "embed%:.1%", "vs full:.2%", "added:d", "updated:d", "unchanged:d", "errs:d"],
              [row("full sync", full, full.seconds), row("no change", nochange, full.seconds),
               row(f"1% changed ({len(edited)})", onepct, full.seconds)])
    ok = nochange.embed_calls == 0 and nochange.seconds < 0.05 * full.seconds
    run.say(f"no-change rerun: {nochange.embed_calls} embedding calls, {nochange.seconds / full.seconds:.2%} "
            f"of the full run (target: 0 calls, < 5%): {'PASS' if ok else 'FAIL'}")
    for err in (full.errors + onepct.errors)[:5]:
        run.say(f"error: {err.path}: {err.error}")
