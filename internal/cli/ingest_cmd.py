"""`lakehouse ingest FILE --corpus NAME`: a JSON-lines file of documents sent to the stack's
document pipeline (POST /v1/corpora/{name}/documents): the stack chunks, embeds with the
corpus's model and stores them, a task per batch; this command reads the file, skips
what the corpus lists with the same content hash, and follows the tasks to their end."""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from internal.cli.connect import add_url_arg, run_command
from internal.cli.ingest_input import (
    as_document,
    normalized,
    plan_ingest,
    read_jsonl,
    window_arg,
)
from internal.cli.output import describe_error
from internal.understanding import context

if TYPE_CHECKING:  # loaded by the command that runs
    from internal.cli.progress import Progress
    from lakehouse import AsyncClient
    from lakehouse.wire.documents import DocumentIn, Task

POLL = 0.5  # seconds between two looks at the tasks
_NAMED = re.compile(r"^documents\[(\d+)\]")  # the document a refusal names


def _notice(message: str) -> None:
    print(message, file=sys.stderr)


def _ids(ids: list[str], limit: int = 20) -> str:
    shown = ", ".join(ids[:limit])
    return shown + (f", ... ({len(ids) - limit} more)" if len(ids) > limit else "")


async def _stored(client: AsyncClient, corpus: str) -> dict[str, str]:
    """The corpus's documents and their content hashes (none when it does not exist)."""
    from lakehouse.errors import NotFound

    try:
        return {row.id: row.content_hash
                async for row in client.iter_documents(corpus, page_size=10000)}
    except NotFound:
        return {}


async def _follow(client: AsyncClient, tasks: list[Task], progress: Progress) -> list[Task]:
    """The tasks to their end, the bar moved by the documents each one has done."""
    now = {t.id: t for t in tasks}
    seen = 0
    while True:
        for t in tasks:
            if not now[t.id].done:
                now[t.id] = await client.task(t.id)
        counted = sum(c.added + c.updated + c.unchanged + c.failed
                      for c in (t.counts for t in now.values()))
        progress.update(counted - seen)
        seen = counted
        if all(t.done for t in now.values()):
            return [now[t.id] for t in tasks]
        await asyncio.sleep(POLL)


async def _ensure_corpus(client: AsyncClient, args: argparse.Namespace) -> None:
    """A new corpus with the metric, language or model asked for (else the first task
    makes one: cosine, language auto, the model for its documents' languages); a corpus
    on another model than `--model` stops the ingest, naming `reembed`."""
    if args.metric == "cosine" and args.language is None and args.model is None:
        return
    from lakehouse.errors import Conflict

    corpus, created = await client.ensure_corpus(args.corpus, metric=args.metric,
                                                 language=args.language, model=args.model)
    if created:
        print(f"created corpus {args.corpus!r} (dim {corpus.dim}, model {corpus.model})",
              file=sys.stderr)
    elif args.model and corpus.model != args.model:
        raise Conflict(f"corpus {args.corpus!r} is on model {corpus.model!r}, not "
                       f"{args.model!r}; move it with `lakehouse reembed {args.corpus} "
                       f"--model {args.model}`", code="model_mismatch")


async def _send(client: AsyncClient, args: argparse.Namespace, part: list[DocumentIn],
                refused: dict[str, Exception]) -> list[Task]:
    """One batch as a task; a document the stack refuses (a 400 naming `documents[i]`)
    is set aside with why, and the rest sent again."""
    from internal.ingest import retrying
    from lakehouse.errors import InvalidArgument

    while part:
        try:
            return await retrying(partial(client.add_documents, args.corpus, part,
                                          chunking=args.chunking, chunk_chars=args.chunk_chars),
                                  "sending", 3, _notice)
        except InvalidArgument as exc:
            m = _NAMED.match(exc.field or "")
            if m is None or int(m.group(1)) >= len(part):
                raise
            bad = part[int(m.group(1))]
            refused[bad.id] = exc
            part = [d for d in part if d is not bad]
    return []


def _ingest(args: argparse.Namespace) -> int:
    path = Path(args.file)
    if not path.exists():
        print(f"error: {path}: no such file", file=sys.stderr)
        return 1

    from internal.cli import progress as progress_bar
    from internal.ingest import retrying

    async def work(client: AsyncClient) -> int:
        docs = read_jsonl(path)
        await retrying(partial(_ensure_corpus, client, args), "corpus", 3, _notice)
        if args.normalize:
            docs = await normalized(client, docs, args.context, args.thread)
        stored = await retrying(partial(_stored, client, args.corpus), "listing", 3, _notice)
        plan = plan_ingest([as_document(d) for d in docs], stored, args.chunking,
                           args.chunk_chars)
        empty = [d.id for d in plan.empty]
        if empty:
            print(f"skipped {len(empty)} documents with no title and no text: {_ids(empty)}",
                  file=sys.stderr)
        todo = plan.todo
        bar = progress_bar.bar(len(docs), initial=len(docs) - len(todo), unit="doc",
                               desc=args.corpus, disable=args.quiet)
        tasks: list[Task] = []
        refused: dict[str, Exception] = {}
        try:
            for start in range(0, len(todo), args.batch):
                tasks += await _send(client, args, todo[start:start + args.batch], refused)
            bar.update(len(refused))
            ended = await _follow(client, tasks, bar)
        finally:
            bar.close()
        corpus = await retrying(partial(client.get_corpus, args.corpus), "count", 3, _notice)
        return _report(args, Outcome(len(docs), len(empty), refused, ended,
                                     corpus.documents or 0, corpus.count))

    # 503s and 504s are retried by `retrying` (saying so), 429s waited out by the client.
    return run_command(args, work, timeout=args.timeout, retries=0)


@dataclass
class Outcome:
    """What an ingest did: documents read, skipped (nothing to store), refused when sent,
    the tasks as they ended, and the corpus's documents and items after."""

    read: int
    empty: int
    refused: dict[str, Exception]
    tasks: list[Task]
    documents: int
    items: int


def _report(args: argparse.Namespace, out: Outcome) -> int:
    for doc_id, why in out.refused.items():
        print(f"failed: document {doc_id!r}: {describe_error(why)}", file=sys.stderr)
    failed = [e for t in out.tasks for e in t.errors]
    for e in failed:
        print(f"failed: document {e.document_id!r}: {e.code}: {e.message}", file=sys.stderr)
    stopped = [t for t in out.tasks if t.state == "failed" and t.error]
    for t in stopped:
        print(f"error: {args.corpus}: task {t.id}: {t.error}", file=sys.stderr)
    c = [t.counts for t in out.tasks]
    written = sum(x.added + x.updated for x in c)
    sent = sum(x.received for x in c)
    unchanged = out.read - out.empty - len(out.refused) - sent + sum(x.unchanged for x in c)
    n_failed = len(out.refused) + sum(x.failed for x in c)
    print(f"{args.corpus}: {out.read} documents: {written} written "
          f"({sum(x.chunks for x in c)} chunks), {unchanged} unchanged, {out.empty} skipped "
          f"(no text), {n_failed} failed; {out.documents} documents, {out.items} items in corpus")
    names = [*out.refused, *(e.document_id for e in failed)]
    if names:
        print(f"failed documents: {_ids(names)}", file=sys.stderr)
    return 1 if names or stopped else 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("ingest", help="store a JSON-lines file of documents (resumable)",
                       usage="lakehouse ingest FILE --corpus NAME [options]")
    p.add_argument("file", help="JSON lines: {_id, title?, text, metadata?, tags?, language?}")
    p.add_argument("--corpus", required=True, metavar="NAME", help="created on first use")
    p.add_argument("--batch", type=int, default=500, metavar="N",
                   help="documents per task of the stack (500)")
    p.add_argument("--chunking", default="sections", choices=("sections", "none"),
                   help="a chunk per markdown section (the default), or none: each document "
                        "one item under its id")
    p.add_argument("--chunk-chars", type=int, default=2000, metavar="N",
                   help="the longest section kept whole (2000)")
    p.add_argument("--metric", default="cosine", choices=("cosine", "l2", "ip"),
                   metavar="NAME", help="a new corpus's: cosine, l2 or ip")
    p.add_argument("--language", default=None, help="a new corpus's (default: auto)")
    p.add_argument("--model", default=None,
                   help="a new corpus's embedding model (default: the one for its "
                        "documents' languages)")
    p.add_argument("--timeout", type=float, default=300.0, metavar="S",
                   help="seconds per call (300)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--normalize", action="store_true",
                   help="index the text as /v1/matrix/normalize rewrites it")
    p.add_argument("--context", type=window_arg,
                   default=(context.WINDOW_BEFORE, context.WINDOW_AFTER), metavar="B:A",
                   help="with --normalize: neighbours indexed with a turn "
                        f"({context.WINDOW_BEFORE}:{context.WINDOW_AFTER})")
    p.add_argument("--thread", default="session", metavar="FIELD",
                   help="with --normalize: the metadata naming a thread")
    add_url_arg(p)
    p.set_defaults(func=_ingest)
