"""A real wiki searched as a user would: tldr-pages synced, its languages, and hit@3.

The shared tldr-pages archive extracted; a stack of a checkout (this one, or --root's),
synced with that checkout's `lakehouse sync` as a new user would: `pages/common` into the
corpus `tldr`, each translated folder into its own (`pages.de` -> `tldr_de`, ...), their
languages detected. Then: per corpus, the share of its pages stored in the folder's
language and the other languages stored; the sync's pages/s; hit@3 per mode (default
hybrid, vector, lexical) of each question set of tests/fixtures/wiki_questions over its
folder (bench/data/wiki.py): a question counts when an answering page is among the first
three hits. --variant NAME=JSON adds a row asking with the default search and those
search fields (the client's `search` keywords).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import Counter
from pathlib import Path

import psycopg

from bench.data import texts, wiki
from bench.harness import Run
from bench.harness.stacks import Stack, python_of, running
from lakehouse import AsyncClient

OPTIONS = {"folders": (",".join(wiki.FOLDERS), "folders to sync"), "misses": False,
           "root": ("", "the checkout whose stack and `lakehouse sync` run (default: this)"),
           "variant": ([], "NAME=JSON: also ask with the default search and these fields")}
QUICK = {"folders": "common,zh"}
MODES: dict[str, dict[str, object]] = {"default (hybrid)": {"mode": None}, "vector": {"mode": "vector"},
                                       "lexical": {"mode": "lexical"}}


def variants(given: list[str]) -> dict[str, dict[str, object]]:
    out = dict(MODES)
    for text in given:
        name, _, fields = text.partition("=")
        try:
            out[name.strip()] = dict(json.loads(fields))
        except (ValueError, TypeError) as exc:
            raise SystemExit(f"--variant {text!r}: expected NAME={{search fields}} ({exc})") from None
    return out


def stored_languages(dsn: str, corpus: str) -> Counter[str]:
    """Pages of the corpus per stored language (read from its items table)."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT id FROM vectord_corpora WHERE name = %s", (corpus,)).fetchone()
        if row is None:
            return Counter()
        rows = conn.execute(f"SELECT language::text, count(DISTINCT coalesce(metadata->>'parent_id', "
                            f"id)) FROM vectord_items_{int(row[0])} GROUP BY 1").fetchall()
    return Counter({str(lang): int(n) for lang, n in rows})


async def ask(gateway: str, corpus: str, asked: list[wiki.Question], search: dict[str, object]
              ) -> list[list[str]]:
    """Each question's first three hits, as pages."""
    out = []
    async with AsyncClient(gateway, timeout=120.0) as client:
        for q in asked:
            found = await client.search(q.text, corpora=[corpus], k=3, **search)  # type: ignore[arg-type]
            out.append([wiki.page_of(h.id, h.metadata) for h in found.hits])
    return out


async def sync(stack: Stack, folder: Path, corpus: str) -> dict[str, object]:
    proc = await asyncio.create_subprocess_exec(
        python_of(stack.root), "-m", "internal.cli.main", "sync", str(folder), "--corpus", corpus,
        "--json", "--quiet", "--url", stack.gateway, cwd=stack.root,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    if not out.strip():
        raise SystemExit(f"sync of {folder} failed ({proc.returncode}): {err.decode()[-2000:]}")
    return dict(json.loads(out))


async def main(run: Run) -> None:
    a = run.args
    keys = [k.strip() for k in a.folders.split(",") if k.strip()]
    if unknown := [k for k in keys if k not in wiki.FOLDERS]:
        raise SystemExit(f"--folders: unknown {unknown}; expected of {list(wiki.FOLDERS)}")
    root = Path(os.path.abspath(a.root)) if a.root else run.root  # noqa: ASYNC240
    folder = texts.extract(wiki.archive(run.data), run.folder / "tldr")
    searches = variants(a.variant)
    with running(root, run.folder / "stack") as stack:
        synced = {k: await sync(stack, folder / wiki.FOLDERS[k][0], wiki.FOLDERS[k][1]) for k in keys}
        rows, total = [], [0, 0.0]
        for k in keys:
            path, corpus, want = wiki.FOLDERS[k]
            langs = stored_languages(stack.dsn, corpus)
            n, r = sum(langs.values()), synced[k]
            pages, seconds = int(str(r.get("pages", n))), float(str(r.get("seconds", 0.0)))
            total[0] += pages
            total[1] += seconds
            errors = r.get("errors") or []
            rows.append((path, corpus, n, f"{langs[want] / n if n else 0:.2%} ({langs[want]})",
                         ", ".join(f"{x} {c}" for x, c in langs.most_common() if x != want) or "-",
                         seconds, pages / seconds if seconds else 0.0,
                         len(errors) if isinstance(errors, list) else errors))
        run.table(f"tldr-pages wiki, checkout {root}, {time.strftime('%Y-%m-%d')}",
                  ["folder", "corpus", "pages:d", "stored in its language", "other languages stored",
                   "sync s:.1f", "pages/s:.1f", "errors"], rows)
        run.say(f"sync: {total[0]} pages in {total[1]:.1f} s, "
                f"{total[0] / total[1] if total[1] else 0:.1f} pages/s")
        hits, misses = [], []
        for name, key in wiki.sets(keys).items():
            asked, corpus = wiki.questions(name), wiki.FOLDERS[key][1]
            cells = []
            for label, search in searches.items():
                found = await ask(stack.gateway, corpus, asked, search)
                cells.append(wiki.hit_at_3(found, asked))
                misses += [f"{name} {label}: {q.text!r} -> {p}" for p, q in zip(found, asked, strict=True)
                           if not any(x in q.pages for x in p)]
            hits.append((name, corpus, len(asked), *cells))
            run.figure(**{f"{name} {label} hit@3": c for label, c in zip(searches, cells, strict=True)})
    run.table("hit@3: a question counts when a page that answers it is among the first three hits",
              ["questions", "corpus", "n:d", *(f"{m} hit@3:.3f" for m in searches)], hits)
    if a.misses:
        for line in misses:
            print(line)
