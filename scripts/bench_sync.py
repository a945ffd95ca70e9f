"""Wiki sync benchmark on the tldr-pages corpus (../shared/corpora/tldr-pages.tar.gz).

Three runs of the same Syncer syncd uses, against vectord and embedd served in this
process (embedded PostgreSQL in a temp dir, the local model): a full sync, a rerun with
no change (must make zero embedding calls; target under 5% of the full run's time) and
a rerun with 1% of the pages edited. Prints pages/s, the share of time spent embedding,
and each rerun's time as a ratio of the full run's.

    .venv/bin/python scripts/bench_sync.py              # all 16,001 files
    .venv/bin/python scripts/bench_sync.py --pages 2000 # a sample, for a quick look
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import signal
import sys
import tarfile
import tempfile
from pathlib import Path

import aiohttp
from aiohttp import web

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from internal.clients.embed import EmbedClient  # noqa: E402
from internal.clients.vectord import VectordClient  # noqa: E402
from internal.common import logs  # noqa: E402
from internal.config import Config  # noqa: E402
from internal.syncd.runner import RunResult, Syncer, SyncSettings  # noqa: E402
from tests.helpers import shared_dir, with_section  # noqa: E402

LANGUAGES = {"pages": "en", "pages.de": "de", "pages.fr": "fr", "pages.es": "es",
             "pages.it": "it", "pages.ru": "ru", "pages.zh": "simple", "pages.ja": "simple"}


def extract(archive: Path, dest: Path, limit: int, seed: int) -> int:
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.isfile()]
        if limit and limit < len(members):
            members = random.Random(seed).sample(members, limit)
        tar.extractall(dest, members=members, filter="data")
    return len(members)


async def start(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}"


def row(name: str, r: RunResult, base: float) -> str:
    pps = r.pages / r.seconds if r.seconds else 0.0
    share = r.embed_seconds / r.seconds if r.seconds else 0.0
    return (f"| {name:<18} | {r.seconds:>9.2f} | {pps:>8.1f} | {r.embedded_pages:>9} | "
            f"{r.embedded_chunks:>10} | {r.embed_calls:>5} | {share:>6.1%} | {r.seconds / base:>8.2%} | "
            f"{r.added:>6} | {r.updated:>7} | {r.unchanged:>9} | {len(r.errors):>4} |")


async def bench(args: argparse.Namespace) -> None:
    from internal.embedd.server import make_app as embedd_app
    from internal.pg import embedded
    from internal.vectord.server import make_app as vectord_app

    tmp = Path(tempfile.mkdtemp(prefix="lakehouse-bench-sync-"))
    wiki = tmp / "wiki"
    files = extract(args.archive, wiki, args.pages, args.seed)
    dsn = args.dsn
    pg = None
    if not dsn:
        pg = embedded.start(tmp / "pg")
        dsn = pg.dsn
    cfg = with_section(Config(), "vectord", dsn=dsn, pool_min=1, pool_max=4)
    v_runner, v_url = await start(vectord_app(cfg))
    e_runner, e_url = await start(embedd_app(cfg))
    try:
        async with aiohttp.ClientSession() as session:
            settings = SyncSettings(wiki_dir=wiki, corpus="bench_wiki", languages=LANGUAGES,
                                    batch_size=args.batch_size)
            syncer = Syncer(settings, VectordClient(session, v_url), EmbedClient(session, e_url))
            full = await syncer.request_run()
            nochange = await syncer.request_run()
            pages = sorted(p for p in wiki.rglob("*.md"))
            edited = random.Random(args.seed).sample(pages, max(1, len(pages) // 100))
            for p in edited:
                with p.open("a", encoding="utf-8") as f:
                    f.write("\n- Edited by bench_sync:\n\n`true`\n")
            onepct = await syncer.request_run()
    finally:
        await e_runner.cleanup()
        await v_runner.cleanup()
        if pg is not None:
            pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"\ntldr-pages: {files} files extracted, {full.pages} pages synced "
          f"({full.ignored} ignored by {list(settings.ignore)}), {full.chunks} chunks, "
          f"batch {args.batch_size}, {os.cpu_count()} CPUs\n")
    print("| run                |   seconds |  pages/s | emb.pages | emb.chunks | calls | embed% | vs full  |  added | updated | unchanged | errs |")
    print("|--------------------|-----------|----------|-----------|------------|-------|--------|----------|--------|---------|-----------|------|")
    print(row("full sync", full, full.seconds))
    print(row("no change", nochange, full.seconds))
    print(row(f"1% changed ({len(edited)})", onepct, full.seconds))
    ok = nochange.embed_calls == 0 and nochange.seconds < 0.05 * full.seconds
    print(f"\nno-change rerun: {nochange.embed_calls} embedding calls, "
          f"{nochange.seconds / full.seconds:.2%} of the full run (target: 0 calls, < 5%): "
          f"{'PASS' if ok else 'FAIL'}")
    for err in (full.errors + onepct.errors)[:5]:
        print(f"error: {err.path}: {err.error}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archive", type=Path,
                        default=shared_dir() / "corpora" / "tldr-pages.tar.gz")
    parser.add_argument("--pages", type=int, default=0, help="random sample of N files (0: all)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--dsn", default=os.environ.get("LAKEHOUSE_TEST_DSN", ""),
                        help="PostgreSQL to use (default: an embedded one in a temp dir)")
    args = parser.parse_args()
    logs.configure("warning", "console")
    # SIGTERM unwinds like Ctrl-C, so the embedded PostgreSQL is stopped on the way out.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    asyncio.run(bench(args))


if __name__ == "__main__":
    main()
