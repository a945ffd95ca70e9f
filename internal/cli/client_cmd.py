"""Commands for people, through the gateway: corpora, ingest, search, record."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
from tqdm import tqdm

from internal.cli.connect import add_url_arg, auth_headers, gateway_url, load_config
from internal.common.client import ServiceClient
from internal.common.errors import ServiceError, Unavailable, UpstreamTimeout
from internal.common.hashing import content_hash
from internal.embed.client import EmbedClient
from internal.vectord.client import VectordClient

T = TypeVar("T")


def _run(args: argparse.Namespace, work: Callable[[str, aiohttp.ClientSession], Awaitable[int]]) -> int:
    """Run one command against the gateway; errors become one line and exit code 1."""
    cfg = load_config(args)
    base = gateway_url(args, cfg)

    async def go() -> int:
        async with aiohttp.ClientSession(headers=auth_headers(cfg)) as session:
            return await work(base, session)

    try:
        return asyncio.run(go())
    except Unavailable:
        print(f"error: cannot reach Lakehouse at {base} (is `lakehouse up` running?)", file=sys.stderr)
    except UpstreamTimeout as exc:
        print(f"error: timed out: {exc.message}", file=sys.stderr)
    except ServiceError as exc:
        where = f" ({exc.field})" if exc.field else ""
        print(f"error: HTTP {exc.status} {exc.code}{where}: {exc.message}", file=sys.stderr)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
    return 1


class InputError(Exception):
    """A problem with the user's file or arguments."""


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(out)


# --- corpora -----------------------------------------------------------------

def _corpora(args: argparse.Namespace) -> int:
    async def work(base: str, session: aiohttp.ClientSession) -> int:
        corpora = await VectordClient(session, base).list_corpora()
        if args.json:
            print(json.dumps(corpora, indent=2))
            return 0
        rows = [[str(c.get("name")), str(c.get("count")), str(c.get("dim")), str(c.get("metric")),
                 str(c.get("language")), str(c.get("model") or "")] for c in corpora]
        print(_table(["corpus", "items", "dim", "metric", "language", "model"], rows) if rows
              else "no corpora yet: lakehouse ingest FILE.jsonl --corpus NAME")
        return 0

    return _run(args, work)


# --- ingest ------------------------------------------------------------------

@dataclass
class Doc:
    id: str
    text: str
    title: str | None
    tags: list[str] | None
    metadata: dict[str, Any]
    language: str | None

    def embed_text(self) -> str:
        return f"{self.title}\n{self.text}" if self.title else self.text


def read_jsonl(path: Path) -> list[Doc]:
    """BEIR-style lines ({_id, title?, text, metadata?, tags?, language?}), checked up front."""
    docs: list[Doc] = []
    seen: set[str] = set()
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as exc:
                raise InputError(f"{path}:{n}: not JSON: {exc}") from None
            if not isinstance(obj, dict):
                raise InputError(f"{path}:{n}: expected a JSON object")
            doc_id = obj.get("_id", obj.get("id"))
            if not isinstance(doc_id, (str, int)) or str(doc_id) == "":
                raise InputError(f"{path}:{n}: _id: required (a string)")
            text = obj.get("text")
            if not isinstance(text, str):
                raise InputError(f"{path}:{n}: text: required (a string)")
            title = obj.get("title") or None
            metadata = obj.get("metadata") or {}
            tags = obj.get("tags")
            language = obj.get("language")
            if not isinstance(metadata, dict):
                raise InputError(f"{path}:{n}: metadata: expected an object")
            if tags is not None and not (isinstance(tags, list) and all(isinstance(t, str) for t in tags)):
                raise InputError(f"{path}:{n}: tags: expected a list of strings")
            if str(doc_id) in seen:
                raise InputError(f"{path}:{n}: _id {doc_id!r} appears twice")
            seen.add(str(doc_id))
            docs.append(Doc(str(doc_id), text, title if isinstance(title, str) else None, tags,
                            metadata, language if isinstance(language, str) else None))
    return docs


@dataclass
class IngestPlan:
    todo: list[Doc] = field(default_factory=list)
    unchanged: int = 0
    empty: int = 0  # no title and no text: nothing to embed or match, not sent (as eval)


def plan_ingest(docs: list[Doc], stored: dict[str, str]) -> IngestPlan:
    """Docs that are new or whose stored content hash differs; the rest are skipped."""
    out = IngestPlan()
    for doc in docs:
        if not doc.embed_text().strip():
            out.empty += 1
        elif stored.get(doc.id) == content_hash(doc.title, doc.text, doc.tags, doc.metadata,
                                              doc.language):
            out.unchanged += 1
        else:
            out.todo.append(doc)
    return out


async def _retrying(call: Callable[[], Awaitable[T]], attempts: int = 4) -> T:
    """Retry a call the stack may answer once it is less busy (503/504, or unreachable)."""
    for attempt in range(1, attempts + 1):
        try:
            return await call()
        except (ServiceError, UpstreamTimeout, Unavailable) as exc:
            if attempt == attempts or exc.status not in (503, 504):
                raise
            print(f"retrying after {exc.code} ({attempt}/{attempts - 1})", file=sys.stderr)
            await asyncio.sleep(2.0 * attempt)
    raise AssertionError("unreachable")


async def _ensure_corpus(vectord: VectordClient, embed: EmbedClient, args: argparse.Namespace
                         ) -> dict[str, Any]:
    try:
        return await vectord.get_corpus(args.corpus)
    except ServiceError as exc:
        if exc.status != 404:
            raise
    models = await embed.models()
    default = str(models.get("default", ""))
    entries = models.get("models")
    dim = next((int(m["dim"]) for m in (entries if isinstance(entries, list) else [])
                if isinstance(m, dict) and m.get("id") == default), 0)
    if not dim:
        dim = (await embed.embed(["dimension probe"])).dim
    corpus = await vectord.create_corpus(args.corpus, dim, args.metric, args.language, default or None)
    print(f"created corpus {args.corpus!r} (dim {dim}, model {default})", file=sys.stderr)
    return corpus


def _ingest(args: argparse.Namespace) -> int:
    path = Path(args.file)
    if not path.exists():
        print(f"error: {path}: no such file", file=sys.stderr)
        return 1

    async def work(base: str, session: aiohttp.ClientSession) -> int:
        docs = read_jsonl(path)
        vectord = VectordClient(session, base, timeout=args.timeout)
        embed = EmbedClient(session, base, timeout=args.timeout)
        await _ensure_corpus(vectord, embed, args)
        stored = {row["id"]: row["content_hash"] async for row in vectord.iter_ids(args.corpus, page=10000)}
        plan = plan_ingest(docs, stored)
        batches = [plan.todo[i:i + args.batch] for i in range(0, len(plan.todo), args.batch)]
        bar = tqdm(total=len(docs), initial=plan.unchanged + plan.empty, unit="doc", desc=args.corpus,
                   disable=args.quiet)
        queue: asyncio.Queue[list[Doc]] = asyncio.Queue()
        for b in batches:
            queue.put_nowait(b)
        upserted = sent = 0

        async def worker() -> None:
            nonlocal upserted, sent
            while not queue.empty():
                batch = queue.get_nowait()
                texts = [d.embed_text() for d in batch]
                emb = await _retrying(partial(embed.embed, texts, input_type="document"))
                items = [{"id": d.id, "vector": v, "text": d.text, "title": d.title,
                          "tags": d.tags or [], "metadata": d.metadata,
                          **({"language": d.language} if d.language else {})}
                         for d, v in zip(batch, emb.vectors, strict=True)]
                upserted += await _retrying(partial(vectord.upsert, args.corpus, items, model=emb.model))
                sent += len(batch)
                bar.update(len(batch))

        try:
            await asyncio.gather(*(worker() for _ in range(max(1, args.concurrency))))
        except BaseException:
            bar.close()
            print(f"{args.corpus}: stopped after {upserted} upserted; run again to resume",
                  file=sys.stderr)
            raise
        bar.close()
        total = (await vectord.get_corpus(args.corpus)).get("count")
        empty = f", {plan.empty} with no title and no text (skipped)" if plan.empty else ""
        print(f"{args.corpus}: {sent} sent ({upserted} upserted), {plan.unchanged} unchanged "
              f"(skipped){empty}, {total} items in corpus")
        return 0

    return _run(args, work)


# --- search and record -------------------------------------------------------

def _short(text: Any, width: int) -> str:
    s = " ".join(str(text or "").split())
    return s if len(s) <= width else s[: width - 1] + "…"


def _num(x: Any) -> str:
    return f"{x:.4f}" if isinstance(x, (int, float)) else ""


def _search(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"query_text": args.text, "k": args.k}
    if args.corpora:  # absent: every corpus but the playbooks
        body["corpora"] = [c.strip() for c in args.corpora.split(",") if c.strip()]
    if args.mode:
        body["mode"] = args.mode
    if args.playbook:
        body["use_playbook"] = True

    async def work(base: str, session: aiohttp.ClientSession) -> int:
        out = await ServiceClient(session, base, "matrixd").call("POST", "/v1/matrix/search", body)
        if args.json:
            print(json.dumps(out, indent=2))
            return 0
        hits = out.get("hits", [])
        rows = [[str(h.get("rank", i + 1)), str(h.get("corpus")), _short(h.get("id"), 24),
                 _num(h.get("distance")), _num(h.get("score")),
                 _short(h.get("title") or h.get("text"), 60)] for i, h in enumerate(hits)]
        print(_table(["#", "corpus", "id", "distance", "score", "title / text"], rows) if rows else "no hits")
        notes = [f"mode {out.get('mode')}", f"{out.get('took_ms')} ms"]
        if out.get("degraded"):
            notes.append(f"degraded: {', '.join(out['degraded'])}")
        if out.get("playbook_boosted"):
            notes.append(f"playbook boosted {out['playbook_boosted']}")
        print("(" + "; ".join(notes) + ")")
        return 0

    return _run(args, work)


def _record(args: argparse.Namespace) -> int:
    body = {"query_text": args.query, "answer_id": args.answer_id,
            "answer_corpus": args.corpus, "score": args.score}

    async def work(base: str, session: aiohttp.ClientSession) -> int:
        out = await ServiceClient(session, base, "matrixd").call(
            "POST", "/v1/matrix/playbooks/record", body)
        print(f"recorded: playbook_id {out.get('playbook_id')}")
        return 0

    return _run(args, work)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("corpora", help="list the corpora and their sizes")
    add_url_arg(p)
    p.add_argument("--json", action="store_true", help="print the raw JSON")
    p.set_defaults(func=_corpora)

    p = sub.add_parser("ingest", help="embed and store a JSON-lines file (resumable)")
    p.add_argument("file", help="JSON lines: {_id, title?, text, metadata?, tags?, language?}")
    p.add_argument("--corpus", required=True)
    p.add_argument("--batch", type=int, default=64, help="documents per embed/upsert call (default 64)")
    p.add_argument("--concurrency", type=int, default=2, help="batches in flight (default 2)")
    p.add_argument("--metric", default="cosine", choices=("cosine", "l2", "ip"), help="for a new corpus")
    p.add_argument("--language", default=None, help="for a new corpus (default: vectord's)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per call (default 300)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_url_arg(p)
    p.set_defaults(func=_ingest)

    p = sub.add_parser("search", help="search one or more corpora")
    p.add_argument("text")
    p.add_argument("--corpora", help="comma-separated corpus names (default: every corpus)")
    p.add_argument("--mode", choices=("vector", "keyword", "lexical", "hybrid"))
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--playbook", action="store_true", help="boost answers recorded as good")
    p.add_argument("--json", action="store_true", help="print the raw JSON")
    add_url_arg(p)
    p.set_defaults(func=_search)

    p = sub.add_parser("record", help="record that ANSWER_ID was a good (score 1) or bad (0) answer")
    p.add_argument("query")
    p.add_argument("answer_id")
    p.add_argument("--corpus", required=True, help="the corpus the answer came from")
    p.add_argument("--score", type=float, required=True, help="0..1")
    add_url_arg(p)
    p.set_defaults(func=_record)
