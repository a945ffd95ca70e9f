"""One question across corpora as good as asking the right one: the fan-out's resource
selection on tldr's platform folders, and the BEIR federation check.

tldr-pages' platform folders synced as corpora named after them (bench/data/platforms.py:
common, linux, osx, windows; with android, cisco_ios, dos, freebsd, netbsd, openbsd and
sunos, eleven) and the question sets written over them (tests/fixtures/wiki_questions:
platforms and platforms_small, each with its held-out part). Every question asked three
ways through the gateway: the fan-out as it is (resource selection on), the union's
ranking (`corpus_selection: false`, what the fan-out was before), and routing told by
hand (the question's own corpus only); first without descriptions, then with the
corpora described as an owner would (platforms.descriptions.json). hit@3: an acceptable
corpus:page among the first three hits; per set, per corpus a question is about, and
(--attribution) every question's first three hits with their corpora.

The BEIR federation check (--beir): SciFact (train), Cranfield (dev) and CISI (dev), each
as one corpus (a), in 4 parts by a hash of the id (b), the parts with the two other sets
(d), and those with the four platform corpora (f); nDCG@10 of the default search with
selection and as the union, against (a). The data: the shared tldr archive and BEIR sets.

Targets (docs/decisions/0240-resource-selection.md): the fan-out's hit@3 within 0.02 of
routing told by hand; a set split into parts and mixed with unrelated corpora within
0.003 of the union's ranking of the same corpora (questions that name no corpus lose
nothing). Quality only: the run lets the lock go (figures that do not depend on load).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import aiohttp

from bench.data import beir, platforms, texts, wiki
from bench.harness import Run
from bench.harness.http import CORPORA, call, profiled, session
from bench.harness.stacks import Stack
from internal.evaluation.metrics import evaluate

OPTIONS = {"beir": (False, "also the BEIR federation check"), "attribution": False,
           "queries": (0, "BEIR queries a set (0: every judged one)")}
QUICK: dict[str, object] = {}
WAYS = ("fan-out", "union", "routed")
PARTS = 4


async def ask(http: aiohttp.ClientSession, base: str, text: str, corpora: list[str],
              k: int = 3, **extra: Any) -> list[dict[str, Any]]:
    out = await call(http, "POST", f"{base}/v1/matrix/search",
                     {"query_text": text, "corpora": corpora, "k": k, **extra})
    return list(out["hits"])


async def platform_sets(run: Run, http: aiohttp.ClientSession, stack: Stack, described: bool
                        ) -> None:
    base, rows, per, lines = stack.gateway, [], [], []
    for name, corpora in platforms.SETS.items():
        for part in (name, f"{name}.held"):
            asked = platforms.questions(part)
            found: dict[str, list[list[str]]] = {w: [] for w in WAYS}
            for q in asked:
                for way in WAYS:
                    extra = {"corpus_selection": False} if way == "union" else {}
                    where = [q.corpus] if way == "routed" else corpora
                    found[way].append(platforms.pages(await ask(http, base, q.text, where, **extra)))
            hits = {w: [platforms.hit(f, q) for f, q in zip(found[w], asked, strict=True)]
                    for w in WAYS}
            cells = [sum(hits[w]) / len(asked) for w in WAYS]
            rows.append((part, len(corpora), len(asked), *cells, cells[2] - cells[0]))
            run.figure(**{f"{part}{' described' if described else ''} {w} hit@3": c
                          for w, c in zip(WAYS, cells, strict=True)})
            for corpus in sorted({q.corpus for q in asked}):
                at = [i for i, q in enumerate(asked) if q.corpus == corpus]
                per.append((part, corpus, len(at), *(sum(hits[w][i] for i in at) / len(at)
                                                     for w in WAYS)))
            lines += [(part, q.text, q.corpus, *(("+ " if hits[w][i] else "- ") + ", ".join(
                found[w][i][:3]) for w in ("fan-out", "routed"))) for i, q in enumerate(asked)]
    how = "described as an owner would" if described else "no descriptions"
    run.table(f"hit@3 over tldr's platform folders as corpora, {how}: the fan-out (selection "
              "on), the union's ranking (corpus_selection false), routing told by hand",
              ["questions", "corpora:d", "n:d", "fan-out:.3f", "union:.3f", "routed:.3f",
               "routed - fan-out:+.3f"], rows)
    run.table(f"hit@3 per corpus the questions are about, {how}",
              ["questions", "corpus", "n:d", "fan-out:.3f", "union:.3f", "routed:.3f"], per)
    if run.args.attribution:
        run.table(f"every question's first three hits, {how}",
                  ["questions", "question", "its corpus", "fan-out", "routed"], lines)


async def describe(http: aiohttp.ClientSession, base: str, text: Mapping[str, str | None]
                   ) -> None:
    for corpus, description in text.items():
        await call(http, "PATCH", f"{base}{CORPORA}/{corpus}", {"description": description})


def ndcg(ds: Any, qids: list[str], found: dict[str, list[str]]) -> float:
    return float(evaluate(found, {q: ds.qrels[q] for q in qids})["ndcg@10"])


async def beir_check(run: Run, http: aiohttp.ClientSession, stack: Stack) -> None:
    """Each set whole, in parts, and mixed with unrelated corpora; selection vs union."""
    sets = {name: beir.load(run.data, name, split) for name, split, _ in beir.SETS}
    for name, ds in sets.items():
        await beir.into(http, stack.gateway, f"sel_{name}", ds.docs)
        for i in range(PARTS):
            await beir.into(http, stack.gateway, f"sel_{name}_p{i}",
                            [d for d in ds.docs if beir.part_of(d.id, PARTS) == i])
    names = [f"sel_{n}{p}" for n in sets for p in ("", *(f"_p{i}" for i in range(PARTS)))]
    await profiled(http, stack.gateway, [*names, *platforms.FOUR])
    rows = []
    for name, ds in sets.items():
        parts = [f"sel_{name}_p{i}" for i in range(PARTS)]
        others = [f"sel_{n}" for n in sets if n != name]
        setups = {"(a) one corpus": [f"sel_{name}"], "(b) 4 parts": parts,
                  "(d) parts + 2 sets": parts + others,
                  "(f) parts + 2 sets + 4 wiki corpora": parts + others + platforms.FOUR}
        qids = [q for q in ds.queries if q in ds.qrels][:run.args.queries or None]
        one = 0.0
        for setup, corpora in setups.items():
            got = {}
            for way, extra in (("selection", {}), ("union", {"corpus_selection": False})):
                found = {q: [str(h["id"]) for h in await ask(
                    http, stack.gateway, ds.queries[q], corpora, 10, **extra)] for q in qids}
                got[way] = ndcg(ds, qids, found)
            one = got["union"] if setup.startswith("(a)") else one
            rows.append((name, setup, len(qids), got["selection"], got["union"],
                         got["selection"] - got["union"], got["selection"] - one))
    run.table("BEIR federation check: the default search's nDCG@10, with resource selection "
              "and as the union (corpus_selection false), a set split into parts and mixed "
              "with unrelated corpora",
              ["set", "corpora", "queries:d", "selection:.4f", "union:.4f",
               "selection - union:+.4f", "selection - one corpus:+.4f"], rows)


async def main(run: Run) -> None:
    archive = run.need(*wiki.ARCHIVE)
    with run.between(), run.stack() as stack:  # quality only: others may measure meanwhile
        folder = texts.extract(archive, run.folder / "tldr", "pages/")
        async with session(4) as http:
            for path, corpus in platforms.FOLDERS.items():
                await platforms.sync(stack, folder / path, corpus)
            names = list(platforms.FOLDERS.values())
            await describe(http, stack.gateway, dict.fromkeys(names))
            await profiled(http, stack.gateway, names)
            await platform_sets(run, http, stack, False)
            await describe(http, stack.gateway, platforms.descriptions())
            await profiled(http, stack.gateway, names)
            await platform_sets(run, http, stack, True)
            await describe(http, stack.gateway, dict.fromkeys(names))
            if run.args.beir:
                await beir_check(run, http, stack)
    run.say("described: " + json.dumps(platforms.descriptions()))
