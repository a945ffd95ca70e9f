"""A real wiki searched as a user would: tldr-pages synced, its languages, and hit@3.

The shared tldr-pages archive extracted; a stack of a checkout (this one, or --root's),
synced with that checkout's `lakehouse sync` as a new user would: `pages/common` into the
corpus `tldr`, each translated folder into its own (`pages.de` -> `tldr_de`, ...), their
languages detected. Then: per corpus, the share of its pages stored in the folder's
language and the other languages stored; the sync's pages/s; hit@3 per mode (default
hybrid, vector, lexical) of each question set of tests/fixtures/wiki_questions over its
folder (bench/data/wiki.py): a question counts when an answering page is among the first
three hits; the names set's default hit@3 by kind (names as typed, names misspelled).
--variant NAME=JSON adds a row asking with the default search and those search fields
(the client's `search` keywords). --url: a stack already running with the folders
synced (nothing synced, no language table). --p50 N: the default search's p50 over the vector
search's through the gateway on `tldr` (the en questions N times, each text through both
in a shuffled order; target <= 1.2x). --beir: `lakehouse eval --cross-validate` on
SciFact train, Cranfield dev and CISI dev against the same stack (the default's held-out
mean: it must not fall).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import time
from collections import Counter
from pathlib import Path

import psycopg

from bench.data import texts, wiki
from bench.harness import Run
from bench.harness.stacks import Stack, python_of, running
from bench.harness.timing import median, ms, shuffled
from lakehouse import AsyncClient

OPTIONS = {"folders": (",".join(wiki.FOLDERS), "folders to sync"), "misses": False,
           "root": ("", "the checkout whose stack and `lakehouse sync` run (default: this)"),
           "variant": ([], "NAME=JSON: also ask with the default search and these fields"),
           "p50": (0, "rounds of the default/vector p50 ratio through the gateway (0: none)"),
           "beir": (False, "also the BEIR cross-validated mean against this stack"),
           "p50_only": (False, "the p50 ratio alone (a timing: under the lock; the rest is not)")}
QUICK = {"folders": "common,zh"}
MODES: dict[str, dict[str, object]] = {"default (hybrid)": {"mode": None}, "vector": {"mode": "vector"},
                                       "lexical": {"mode": "lexical"}, "keyword": {"mode": "keyword"}}
KINDS = {"exact names (bare, or among words)": ("exact", "phrase"),
         "misspelled names (one or two edits)": ("typo",)}


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


async def main(run: Run) -> None:
    a = run.args
    keys = [k.strip() for k in a.folders.split(",") if k.strip()]
    if unknown := [k for k in keys if k not in wiki.FOLDERS]:
        raise SystemExit(f"--folders: unknown {unknown}; expected of {list(wiki.FOLDERS)}")
    root = Path(os.path.abspath(a.root)) if a.root else run.root  # noqa: ASYNC240
    with contextlib.ExitStack() as held:
        if a.url:  # a stack already running, its folders synced: asked only
            stack = Stack(root, run.folder / "stack", a.url)
        else:
            stack = held.enter_context(running(root, run.folder / "stack"))
        if not a.p50_only:
            with run.between():  # counts and qualities, not timings: outside the lock
                if not a.url:
                    await synced_table(run, stack, root, keys)
                await hit_tables(run, stack, keys, variants(a.variant))
                if a.beir:
                    await beir_cross_validated(run, stack)
        if a.p50 and "common" in keys:
            await p50_ratio(run, stack.gateway, [q.text for q in wiki.questions("en")], a.p50)


async def synced_table(run: Run, stack: Stack, root: Path, keys: list[str]) -> None:
    """Each folder synced as a new user would, and the languages its pages are stored in."""
    folder = texts.extract(wiki.archive(run.data), run.folder / "tldr")
    synced = {k: await wiki.sync(stack, folder / wiki.FOLDERS[k][0], wiki.FOLDERS[k][1]) for k in keys}
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


async def hit_tables(run: Run, stack: Stack, keys: list[str],
                     searches: dict[str, dict[str, object]]) -> None:
    """hit@3 of every question set in every mode, and the names set's by kind."""
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
        if name.startswith("names"):
            found = await ask(stack.gateway, corpus, asked, MODES["default (hybrid)"])
            for label, kinds in KINDS.items():
                part = [(f, q) for f, q in zip(found, asked, strict=True) if q.kind in kinds]
                score = wiki.hit_at_3([f for f, _ in part], [q for _, q in part])
                run.say(f"{name}, default hit@3, {label}: {score:.3f} "
                        f"({round(score * len(part))}/{len(part)})", **{f"{name} {label}": score})
    run.table("hit@3: a question counts when a page that answers it is among the first three hits",
              ["questions", "corpus", "n:d", *(f"{m} hit@3:.3f" for m in searches)], hits)
    if run.args.misses:
        for line in misses:
            print(line)


async def p50_ratio(run: Run, gateway: str, asked: list[str], rounds: int) -> None:
    """The default search's p50 over the vector search's on `tldr` through the gateway:
    each text through both in a shuffled order (seeded), after a round that caches every
    embedding."""
    rng = random.Random(7)
    lat: dict[str, list[float]] = {"default": [], "vector": []}
    async with AsyncClient(gateway, timeout=120.0) as client:
        for r in range(rounds + 1):
            for text in asked:
                for side in shuffled(list(lat), rng):
                    took = await ms(client.search(text, corpora=["tldr"], k=10,
                                                  mode=None if side == "default" else "vector"))
                    if r:
                        lat[side].append(took)
    d, v = median(lat["default"]), median(lat["vector"])
    run.table(f"p50 through the gateway on `tldr`, {len(lat['default'])} searches each",
              ["search", "p50 ms:.2f"], [("default (hybrid)", d), ("vector", v)])
    run.say(f"the default's p50 over the vector search's: {d / v:.2f}x (target <= 1.2x)",
            p50_ratio=d / v)


async def beir_cross_validated(run: Run, stack: Stack) -> None:
    """`lakehouse eval --cross-validate` against this stack's vectord and embedd: the
    default's held-out nDCG@10 over SciFact train, Cranfield dev and CISI dev (with --url,
    the daemons LAKEHOUSE_GATEWAY_VECTORD and LAKEHOUSE_GATEWAY_EMBEDD name: the eval uses
    the configured ones when they answer)."""
    env = {**os.environ, "LAKEHOUSE_LOG_LEVEL": "warning"}
    if stack.ports:  # a stack started here (with --url: LAKEHOUSE_GATEWAY_VECTORD/_EMBEDD)
        env.update(LAKEHOUSE_GATEWAY_VECTORD=stack.url("vectord"),
                   LAKEHOUSE_GATEWAY_EMBEDD=stack.url("embedd"))
    args = ["-m", "internal.cli.main", "eval", "--cross-validate"]
    for name, split in (("scifact", "train"), ("cranfield", "dev"), ("cisi", "dev")):
        args += ["--dataset", str(run.data / "data" / name), "--split", split]
    proc = await asyncio.create_subprocess_exec(
        python_of(stack.root), *args, cwd=stack.root, env=env, stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    text = out.decode()
    run.say(text)
    for line in text.splitlines():
        if line.startswith("the shipped default:") and "held-out mean" in line:
            run.figure(beir_held_out_mean=float(line.rsplit(" ", 1)[1].rstrip(")")))
