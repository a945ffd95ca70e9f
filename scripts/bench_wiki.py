"""A real wiki searched as a user would: tldr-pages synced, its languages, and hit@3.

Extracts ../shared/corpora/tldr-pages.tar.gz (or $LAKEHOUSE_DATA/corpora/...) to a temp
dir, starts the stack of a checkout (`lakehouse up`, its own data dir and ports), and
syncs with that checkout's `lakehouse sync`, as a new user would: `pages/common` into the
corpus `tldr`, and each translated folder into its own (`pages.de` -> `tldr_de`, ...),
their languages detected (no --lang). Then prints:

- the language table: per corpus, the share of its pages stored in the folder's
  language, and the other languages stored (read from the items tables);
- the sync's pages/s per corpus (informative: embedding dominates it);
- hit@3 per mode (default hybrid, vector, lexical) on the questions of
  tests/fixtures/wiki_questions (en over `tldr`, zh over `tldr_zh`, ja over `tldr_ja`):
  a question counts when a page that answers it is among the first three hits.

    flock -s /tmp/lakehouse-heavy.lock .venv/bin/python scripts/bench_wiki.py
    .venv/bin/python scripts/bench_wiki.py --root /work/base      # another checkout
    .venv/bin/python scripts/bench_wiki.py --folders common,zh,ja  # a part
    ... scripts/bench_wiki.py --variant 'prf off={"prf": {"docs": 0}}'  # a search to compare

A `--variant NAME=JSON` row asks every question set with the default search and the
given search fields (the client's `search` keywords), in the same run as the modes.

Without the archive it prints why and exits 0, or 1 under CI=true.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402

from lakehouse import AsyncClient  # noqa: E402
from scripts.bench_gateway import python_of, start_stack  # noqa: E402
from tests.helpers import FIXTURES, shared_dir  # noqa: E402

QUESTIONS = FIXTURES / "wiki_questions"
# folder key -> (folder in the archive, corpus, the folder's language as stored)
FOLDERS: dict[str, tuple[str, str, str]] = {
    "common": ("pages/common", "tldr", "english"),
    "de": ("pages.de", "tldr_de", "german"),
    "fr": ("pages.fr", "tldr_fr", "french"),
    "es": ("pages.es", "tldr_es", "spanish"),
    "it": ("pages.it", "tldr_it", "italian"),
    "ru": ("pages.ru", "tldr_ru", "russian"),
    "zh": ("pages.zh", "tldr_zh", "chinese"),
    "ja": ("pages.ja", "tldr_ja", "japanese"),
}
# question set -> the folder it asks
SETS = {"en": "common", "zh": "zh", "ja": "ja"}
MODES: dict[str, str | None] = {"default (hybrid)": None, "vector": "vector", "lexical": "lexical"}


@dataclass(frozen=True)
class Question:
    text: str
    pages: frozenset[str]


def questions(name: str) -> list[Question]:
    """A question set of tests/fixtures/wiki_questions (paths relative to the synced folder)."""
    out = []
    for line in (QUESTIONS / f"{name}.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            out.append(Question(row["question"], frozenset(row["pages"])))
    return out


def page_of(item_id: str, metadata: dict[str, object] | None) -> str:
    parent = (metadata or {}).get("parent_id")
    return str(parent) if parent else item_id.rpartition("#")[0]


def hit_at_3(found: list[list[str]], asked: list[Question]) -> float:
    """The share of questions with an answering page among their first three hits."""
    return sum(1 for pages, q in zip(found, asked, strict=True)
               if any(p in q.pages for p in pages[:3])) / len(asked)


def searches(variants: list[str]) -> dict[str, dict[str, object]]:
    """The rows of the hit@3 table: the modes, then each `NAME=JSON` variant."""
    out: dict[str, dict[str, object]] = {label: {"mode": mode} for label, mode in MODES.items()}
    for text in variants:
        name, sep, fields = text.partition("=")
        try:
            given = json.loads(fields) if sep else None
        except json.JSONDecodeError as exc:
            raise SystemExit(f"error: --variant {text!r}: {exc}") from None
        if not name.strip() or not isinstance(given, dict):
            raise SystemExit(f"error: --variant {text!r}: expected NAME={{search fields}}")
        out[name.strip()] = given
    return out


def archive_or_exit(path: Path) -> Path:
    if path.exists():
        return path
    message = f"tldr-pages archive absent: {path}"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        raise SystemExit(f"error: {message} (required under CI)")
    print(f"not run: {message}")
    raise SystemExit(0)


def extract(archive: Path, dest: Path) -> None:
    with tarfile.open(archive) as tar:
        tar.extractall(dest, members=[m for m in tar.getmembers() if m.isfile()],
                       filter="data")


def sync(root: Path, gateway: str, folder: Path, corpus: str) -> dict[str, object]:
    """`lakehouse sync` of the checkout at root: its JSON result."""
    out = subprocess.run(
        [python_of(root), "-m", "internal.cli.main", "sync", str(folder), "--corpus", corpus,
         "--json", "--quiet", "--url", gateway],
        cwd=root, capture_output=True, text=True, check=False)
    if not out.stdout.strip():
        raise SystemExit(f"sync of {folder} failed ({out.returncode}): {out.stderr[-2000:]}")
    result: dict[str, object] = json.loads(out.stdout)
    return result


def stored_languages(dsn: str, corpus: str) -> Counter[str]:
    """Pages of the corpus per stored language (read from its items table)."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT id FROM vectord_corpora WHERE name = %s", (corpus,)).fetchone()
        if row is None:
            return Counter()
        rows = conn.execute(
            f"SELECT language::text, count(DISTINCT coalesce(metadata->>'parent_id', id)) "
            f"FROM vectord_items_{int(row[0])} GROUP BY 1").fetchall()
    return Counter({str(lang): int(n) for lang, n in rows})


async def ask(gateway: str, corpus: str, asked: list[Question], search: dict[str, object]
              ) -> list[list[str]]:
    """Each question's first three hits, as pages (search: the client's search keywords)."""
    out = []
    async with AsyncClient(gateway, timeout=120.0) as client:
        for q in asked:
            found = await client.search(q.text, corpora=[corpus], k=3, **search)  # type: ignore[arg-type]
            out.append([page_of(h.id, h.metadata) for h in found.hits])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archive", type=Path,
                        default=shared_dir() / "corpora" / "tldr-pages.tar.gz")
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="the checkout whose stack and `lakehouse sync` run (default: this)")
    parser.add_argument("--folders", default=",".join(FOLDERS),
                        help=f"folders to sync, of {','.join(FOLDERS)}")
    parser.add_argument("--misses", action="store_true", help="list the questions missed")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME=JSON",
                        help="also ask with the default search and these search fields")
    args = parser.parse_args()
    args.searches = searches(args.variant)
    archive = archive_or_exit(args.archive)
    keys = [k.strip() for k in args.folders.split(",") if k.strip()]
    unknown = [k for k in keys if k not in FOLDERS]
    if unknown:
        raise SystemExit(f"error: --folders: unknown {unknown}; expected of {list(FOLDERS)}")
    # SIGTERM unwinds like Ctrl-C, so the stack is stopped on the way out.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    tmp = Path(tempfile.mkdtemp(prefix="lakehouse-bench-wiki-"))
    proc = None
    try:
        wiki = tmp / "tldr"
        extract(archive, wiki)
        proc, urls = start_stack(tmp, args.root.resolve())
        gateway = urls["gateway"]
        dsn = f"postgresql://postgres:@/postgres?host={tmp / 'pg'}"
        synced: dict[str, dict[str, object]] = {}
        for key in keys:
            folder, corpus, _ = FOLDERS[key]
            t0 = time.perf_counter()
            synced[key] = sync(args.root.resolve(), gateway, wiki / folder, corpus)
            synced[key]["wall"] = time.perf_counter() - t0
        report(args, keys, synced, dsn, gateway)
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def report(args: argparse.Namespace, keys: list[str], synced: dict[str, dict[str, object]],
           dsn: str, gateway: str) -> None:
    print(f"\ntldr-pages wiki, checkout {args.root.resolve()}, "
          f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPUs\n")
    print("| folder | corpus | pages | stored in its language | other languages stored "
          "| sync s | pages/s | errors |")
    print("|---|---|---:|---:|---|---:|---:|---:|")
    total_pages = 0
    total_s = 0.0
    for key in keys:
        folder, corpus, want = FOLDERS[key]
        langs = stored_languages(dsn, corpus)
        n = sum(langs.values())
        others = ", ".join(f"{lang} {c}" for lang, c in langs.most_common() if lang != want)
        r = synced[key]
        pages = int(str(r.get("pages", n)))
        seconds = float(str(r.get("seconds", 0.0)))
        total_pages += pages
        total_s += seconds
        errors = r.get("errors") or []
        share = langs[want] / n if n else 0.0
        print(f"| {folder} | {corpus} | {n} | {share:.2%} ({langs[want]}) | {others or '-'} "
              f"| {seconds:.1f} | {pages / seconds if seconds else 0:.1f} "
              f"| {len(errors) if isinstance(errors, list) else errors} |")
    print(f"\nsync: {total_pages} pages in {total_s:.1f} s, "
          f"{total_pages / total_s if total_s else 0:.1f} pages/s\n")
    sets = [s for s, k in SETS.items() if k in keys]
    print("| questions | corpus | n | " + " | ".join(f"{m} hit@3" for m in args.searches)
          + " |")
    print("|---|---|---:|" + "---:|" * len(args.searches))
    misses: list[str] = []
    for name in sets:
        asked = questions(name)
        corpus = FOLDERS[SETS[name]][1]
        cells = []
        for label, search in args.searches.items():
            found = asyncio.run(ask(gateway, corpus, asked, search))
            score = hit_at_3(found, asked)
            hits = round(score * len(asked))
            cells.append(f"{score:.3f} ({hits}/{len(asked)})")
            misses += [f"{name} {label}: {q.text!r} -> {pages}" for pages, q in
                       zip(found, asked, strict=True) if not any(p in q.pages for p in pages)]
        print(f"| {name} | {corpus} | {len(asked)} | " + " | ".join(cells) + " |")
    if args.misses:
        print()
        for line in misses:
            print(line)


if __name__ == "__main__":
    main()
