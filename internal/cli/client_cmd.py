"""Commands for people, through the gateway: reembed, ingest, search, record, playbooks.

Every command talks to the stack through the public Python client (`lakehouse.AsyncClient`);
what a command needs is imported when it runs, so `--help` loads none of it.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from internal.cli import shaped
from internal.cli.connect import add_url_arg, run_command
from internal.cli.ingest_input import normalized, plan_ingest, read_jsonl, window_arg
from internal.cli.output import describe_error, format_score, format_table, print_json, shorten
from internal.understanding import context
from lakehouse.errors import Conflict
from lakehouse.wire.modes import MODES

if TYPE_CHECKING:  # loaded by the commands that use them
    from internal.ingest import Doc, StackFailure
    from lakehouse import AsyncClient
    from lakehouse.types import MatrixSearchResponse


def _reembed(args: argparse.Namespace) -> int:
    async def work(client: AsyncClient) -> int:
        started = await client.reembed(args.corpus, args.model)
        print(f"re-embedding {args.corpus!r} with {started.model} ({started.dim} dimensions): "
              f"{started.done} of {started.total} items; searches use the old vectors "
              "until the switch")
        if not args.wait:
            print(f"progress: lakehouse corpora --json (or GET /v1/vectors/corpora/{args.corpus})")
            return 0
        while True:
            corpus = await client.get_corpus(args.corpus)
            if corpus.reembed is None:
                done = corpus.model == started.model
                print(f"switched: {args.corpus!r} now holds vectors of {corpus.model}" if done
                      else f"stopped: {args.corpus!r} still holds vectors of {corpus.model}")
                return 0 if done else 1
            state = corpus.reembed
            note = f" (last error: {state.error})" if state.error else ""
            print(f"{state.done} of {state.total} items{note}", flush=True)
            await asyncio.sleep(2.0)

    return run_command(args, work)


# --- ingest ------------------------------------------------------------------

def _notice(message: str) -> None:
    print(message, file=sys.stderr)


async def _ensure_corpus(client: AsyncClient, args: argparse.Namespace) -> str | None:
    """The corpus of the ingest, made for the stack's embedding model if there is none;
    the model to embed with: the corpus's when embedd serves it (a corpus of a superseded
    model is written as it is until its re-embedding switches it), else the default."""
    corpus, created = await client.ensure_corpus(args.corpus, metric=args.metric,
                                                 language=args.language, model=args.model)
    if created:
        print(f"created corpus {args.corpus!r} (dim {corpus.dim}, model {corpus.model})",
              file=sys.stderr)
    elif args.model and corpus.model != args.model:
        raise Conflict(f"corpus {args.corpus!r} is on model {corpus.model!r}, not "
                       f"{args.model!r}; move it with `lakehouse reembed {args.corpus} "
                       f"--model {args.model}`", code="model_mismatch")
    served = {m.id for m in (await client.models()).models}
    return corpus.model if corpus.model in served else None


def _ids(docs: list[Doc], limit: int = 20) -> str:
    shown = ", ".join(d.id for d in docs[:limit])
    return shown + (f", ... ({len(docs) - limit} more)" if len(docs) > limit else "")


def _ingest(args: argparse.Namespace) -> int:
    path = Path(args.file)
    if not path.exists():
        print(f"error: {path}: no such file", file=sys.stderr)
        return 1

    from internal.cli import progress as progress_bar
    from internal.cli.gateway_store import GatewayStore
    from internal.ingest import Pipeline, StackFailure, retrying

    async def work(client: AsyncClient) -> int:
        docs = read_jsonl(path)
        # Each step waits out a 429 (past this client's share), as the batches do.
        model = await retrying(partial(_ensure_corpus, client, args), "corpus", 3, _notice)
        if args.normalize:
            docs = await normalized(client, docs, args.context, args.thread)

        async def listing() -> dict[str, str]:
            return {row.id: row.content_hash
                    async for row in client.iter_ids(args.corpus, page_size=10000)}

        stored = await retrying(listing, "listing", 3, _notice)
        plan = plan_ingest(docs, stored)
        if plan.empty:
            print(f"skipped {len(plan.empty)} documents with no title and no text: "
                  f"{_ids(plan.empty)}", file=sys.stderr)
        bar = progress_bar.bar(len(docs), initial=plan.unchanged + len(plan.empty),
                               unit="doc", desc=args.corpus, disable=args.quiet)
        store = GatewayStore(client)
        bar.set_postfix_str(f"batch {args.batch}", refresh=False)

        def progress(done: int) -> None:  # the batch size shrinks after a 429
            bar.set_postfix_str(f"batch {pipe.size}", refresh=False)
            bar.update(done)

        async def corpus_model() -> str | None:
            return (await client.get_corpus(args.corpus)).model

        pipe = Pipeline(store, store, args.corpus, model=model, batch=args.batch,
                        concurrency=max(1, args.concurrency), retries=3, notice=_notice,
                        progress=progress, model_of=corpus_model)
        stopped: StackFailure | None = None
        try:
            await pipe.write(plan.todo)
        except StackFailure as exc:
            stopped = exc
        bar.close()
        report = pipe.report
        for doc_id, (_, why) in report.failed.items():
            print(f"failed: document {doc_id!r}: {describe_error(why)}", file=sys.stderr)
        if stopped is not None:
            print(f"error: {args.corpus}: stopped: {describe_error(stopped.cause)}", file=sys.stderr)
            print(f"{args.corpus}: {report.upserted} upserted before stopping, "
                  f"{len(report.failed)} failed; run again to resume", file=sys.stderr)
            return 1
        total = (await retrying(partial(client.get_corpus, args.corpus), "count", 3,
                                _notice)).count
        print(f"{args.corpus}: {len(docs)} documents: {report.upserted} upserted, "
              f"{plan.unchanged} unchanged, {len(plan.empty)} skipped (no text), "
              f"{len(report.failed)} failed; {total} items in corpus")
        if report.failed:
            failed = list(report.failed)
            print(f"failed documents: {', '.join(failed[:20])}"
                  + (" ..." if len(failed) > 20 else ""), file=sys.stderr)
            return 1
        return 0

    # The client does not retry: the ingest retries 503s and 504s itself, saying so, and
    # waits out 429s itself, so that its batches shrink after one.
    return run_command(args, work, timeout=args.timeout, retries=0, max_wait=0.0)


# --- search and record -------------------------------------------------------

def _search(args: argparse.Namespace) -> int:
    from lakehouse.types import SearchAutoResponse

    corpora = [c.strip() for c in (args.corpora or "").split(",") if c.strip()]
    if args.auto and (args.mode or args.playbook):
        print("error: --auto chooses the mode itself (no --mode or --playbook)", file=sys.stderr)
        return 1

    async def work(client: AsyncClient) -> int:
        # No corpora: every corpus but the playbooks.
        out: MatrixSearchResponse
        if args.auto:
            out = await client.search_auto(args.text, corpora=corpora or None, k=args.k,
                                           budget_ms=args.budget_ms)
        else:
            out = await client.search(args.text, corpora=corpora or None, k=args.k,
                                      mode=args.mode, use_playbook=args.playbook,
                                      explain=args.explain,
                                      **shaped.options(args.highlight, args.group_by,
                                                       shaped.csv(args.facets), args.diversity))
        if args.json:
            print_json(out)
            return 0
        rows = [[str(h.rank or i + 1), h.corpus, shorten(h.id, 24), format_score(h.distance),
                 format_score(h.score), shorten(h.title or h.text, 60)] for i, h in enumerate(out.hits)]
        if out.did_you_mean:
            print(f"did you mean: {out.did_you_mean}")
        print(format_table(["#", "corpus", "id", "distance", "score", "title / text"], rows) if rows else "no hits")
        tty = sys.stdout.isatty()
        for i, h in enumerate(out.hits):
            for line in shaped.hit_lines(h.rank or i + 1, h.highlight, h.group, tty):
                print(line)
        for line in shaped.facet_lines(getattr(out, "facets", None)):
            print(line)
        notes = [f"mode {out.mode}", f"{out.took_ms} ms"]
        if isinstance(out, SearchAutoResponse):
            notes[0] = f"strategy {out.strategy}: {out.reason}; expected {out.estimated_ms} ms"
        if out.degraded:
            notes.append(f"degraded: {', '.join(out.degraded)}")
        for s in out.skipped_corpora:
            notes.append(f"{s.corpus}: {'lexical only' if s.searched == 'lexical' else 'not searched'}"
                         f" ({s.reason})")
        if out.playbook_boosted:
            notes.append(f"playbook boosted {out.playbook_boosted}")
        notes.extend(shaped.selection_notes(out.corpora, args.explain))
        print("(" + "; ".join(notes) + ")")
        return 0

    return run_command(args, work)


def _record(args: argparse.Namespace) -> int:
    async def work(client: AsyncClient) -> int:
        out = await client.record(args.query, args.answer_id, args.corpus,
                                  -1.0 if args.wrong else args.score,
                                  playbook_corpus=args.playbook_corpus or None)
        print(f"recorded: playbook_id {out.playbook_id}")
        return 0

    return run_command(args, work)


# --- playbooks ---------------------------------------------------------------

def _playbooks_list(args: argparse.Namespace) -> int:
    async def work(client: AsyncClient) -> int:
        out = await client.playbooks(answer_id=args.answer_id or None,
                                     answer_corpus=args.answer_corpus or None, limit=args.limit,
                                     playbook_corpus=args.playbook_corpus or None)
        if args.json:
            print_json(out)
            return 0
        rows = [[e.playbook_id[:12], f"{e.score:+.2f}",
                 f"{e.answer_corpus}/{shorten(e.answer_id, 24)}",
                 e.recorded_at.isoformat()[:19] if e.recorded_at else "",
                 shorten(e.query_text, 50)]
                for e in out.entries]
        print(format_table(["id", "score", "answer", "recorded_at", "query"], rows) if rows
              else f"no entries in playbook {out.playbook_corpus!r}")
        return 0

    return run_command(args, work)


def _playbooks_delete(args: argparse.Namespace) -> int:
    async def work(client: AsyncClient) -> int:
        for pid in args.playbook_id:
            await client.delete_playbook(pid, playbook_corpus=args.playbook_corpus or None)
            print(f"deleted: {pid}")
        return 0

    return run_command(args, work)


def _add_reembed(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("reembed", help="embed a corpus again with another model, online",
                       usage="lakehouse reembed CORPUS --model MODEL [--wait]")
    p.add_argument("corpus")
    p.add_argument("--model", required=True, help="a model embedd serves (its id or backend)")
    p.add_argument("--wait", action="store_true", help="print the progress until the switch")
    add_url_arg(p)
    p.set_defaults(func=_reembed)


def _add_ingest(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("ingest", help="embed and store a JSON-lines file (resumable)",
                       usage="lakehouse ingest FILE --corpus NAME [options]")
    p.add_argument("file", help="JSON lines: {_id, title?, text, metadata?, tags?, ...}")
    p.add_argument("--corpus", required=True, metavar="NAME", help="created on first use")
    p.add_argument("--batch", type=int, default=64, metavar="N",
                   help="documents per embed/upsert call (64)")
    p.add_argument("--concurrency", type=int, default=2, metavar="N",
                   help="batches in flight (2)")
    p.add_argument("--metric", default="cosine", choices=("cosine", "l2", "ip"),
                   metavar="NAME", help="a new corpus's: cosine, l2 or ip")
    p.add_argument("--language", default=None, help="a new corpus's (default: vectord's)")
    p.add_argument("--model", default=None,
                   help="a new corpus's embedding model (default: the one for --language)")
    p.add_argument("--timeout", type=float, default=300.0, metavar="S",
                   help="seconds per call (300)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--normalize", action="store_true",
                   help="index the text as /v1/matrix/normalize rewrites it")
    p.add_argument("--context", type=window_arg, default=(context.WINDOW_BEFORE, context.WINDOW_AFTER),
                   metavar="B:A",
                   help="with --normalize: neighbours indexed with a turn "
                        f"({context.WINDOW_BEFORE}:{context.WINDOW_AFTER})")
    p.add_argument("--thread", default="session", metavar="FIELD",
                   help="with --normalize: the metadata naming a thread")
    add_url_arg(p)
    p.set_defaults(func=_ingest)


def _add_search(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("search", help="search one or more corpora")
    p.add_argument("text")
    p.add_argument("--corpora", help="comma-separated corpus names (default: every corpus)")
    p.add_argument("--mode", choices=list(MODES))
    p.add_argument("--auto", action="store_true",
                   help="pick keyword, lexical, vector, hybrid or smart")
    p.add_argument("--budget-ms", type=float, help="with --auto: the time the strategy may take")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--playbook", action="store_true", help="boost answers recorded as good")
    p.add_argument("--highlight", action="store_true",
                   help="mark the question's words in each hit")
    p.add_argument("--group-by", metavar="FIELD",
                   help='one hit per "parent" page or "metadata.<key>"')
    p.add_argument("--facets", metavar="FIELDS",
                   help='counts per value (corpus,tags,type,metadata.<key>)')
    p.add_argument("--diversity", type=float, metavar="0..1",
                   help="push near-duplicates down (0: off, 1: most diverse)")
    p.add_argument("--explain", action="store_true",
                   help="why each corpus weighs what it does for the question")
    p.add_argument("--json", action="store_true", help="print the answer as JSON")
    add_url_arg(p)
    p.set_defaults(func=_search)


def _add_record(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("record", help="record ANSWER_ID as a right (or --wrong) answer")
    p.add_argument("query")
    p.add_argument("answer_id")
    p.add_argument("--corpus", required=True, help="the corpus the answer came from")
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--score", type=float, help="-1..1: 1 right (halves its distance), 0 no effect, "
                                                 "-1 wrong (distance x1.5)")
    how.add_argument("--wrong", action="store_true", help="the answer was wrong: score -1")
    p.add_argument("--playbook-corpus", help="default: matrixd's [matrixd] playbook_corpus")
    add_url_arg(p)
    p.set_defaults(func=_record)


def _add_playbooks(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("playbooks", help="list or delete recorded feedback")
    psub = p.add_subparsers(dest="playbooks_command", required=True, metavar="list|delete")
    pl = psub.add_parser("list", help="entries, newest first")
    pl.add_argument("--answer-id", help="only entries for this answer id")
    pl.add_argument("--answer-corpus", help="only entries for answers in this corpus")
    pl.add_argument("--limit", type=int, default=100, help="1..1000 (default 100)")
    pl.add_argument("--playbook-corpus", help="default: matrixd's [matrixd] playbook_corpus")
    pl.add_argument("--json", action="store_true", help="print the answer as JSON")
    add_url_arg(pl)
    pl.set_defaults(func=_playbooks_list)
    pd = psub.add_parser("delete", help="remove entries by playbook id")
    pd.add_argument("playbook_id", nargs="+")
    pd.add_argument("--playbook-corpus", help="default: matrixd's [matrixd] playbook_corpus")
    add_url_arg(pd)
    pd.set_defaults(func=_playbooks_delete)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    for add in (_add_reembed, _add_ingest, _add_search, _add_record, _add_playbooks):
        add(sub)
