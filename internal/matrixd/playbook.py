"""The playbook's I/O: entries near a query, recall of their answers, listing, deleting.

The playbook is an ordinary vectord corpus (`[matrixd] playbook_corpus`): one item per
(query_text, answer_id, answer_corpus), its vector the question's embedding, its metadata
the entry (boost.PlaybookEntry), its title `answer_corpus/answer_id`. What the entries do
to hits is decided by the pure modules boost and downgrade.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import msgspec
import structlog

from internal.api.matrixd import RecordRequest
from internal.api.responses import PlaybookEntryRow, RankedHit, RecordResponse
from internal.api.validate import corpus_name
from internal.api.vectord import Filter, IncludeRef, Item, SearchRequest
from internal.common.access import Scope
from internal.common.errors import (
    InvalidArgument,
    LakehouseError,
    NotFound,
    ServiceError,
    UpstreamError,
    describe,
    in_callers_fields,
)
from internal.matrixd import boost
from internal.matrixd.boost import Match, PlaybookEntry
from internal.matrixd.deps import Deps, embed_query

log = structlog.get_logger()

MAX_INCLUDE = 100  # vectord takes at most this many `include` items a search
MAX_LIST = 1000
# Every entry's title is `answer_corpus/answer_id` and so holds "/": vectord's keyword
# mode with this text lists every entry, newest first, with the metadata filter in its SQL.
_LIST_MARK = "/"
_PLAYBOOK_ID = re.compile(r"^[0-9a-f]{64}$")
# How long a playbook corpus vectord said does not exist is taken as still absent (as long
# as matrixd trusts its spaces, matrixd.spaces): a stack whose playbook was never recorded
# to pays no round trip a search for it. A record through this matrixd forgets it at once;
# one through another replica is seen within this time.
ABSENT_TTL_SECONDS = 5.0


@dataclass
class Lookup:
    """What the playbook said about one query."""

    corpus: str
    matches: list[Match] = field(default_factory=list)
    unavailable: bool = False
    lexical: bool = False  # matched by the question's words, not its embedding

    def include(self, corpora: Sequence[str] | None, with_factors: bool = False
                ) -> list[IncludeRef]:
        """The recorded answers to add to the candidates, nearest question first, at most
        MAX_INCLUDE, in a searched corpus (None: every corpus).

        Without factors (vector, lexical: the boost follows the merge): the answers the
        entries raise (deciding score > 0), so retrieval cannot miss them. With factors
        (hybrid: the boost goes inside the fusion, where a fused score's x2 could not lift
        a recalled answer): every answer an entry judges, with its factor 1 - 0.5 s.
        """
        best = boost.best_scores(self.matches)
        searched = None if corpora is None else set(corpora)
        out: list[IncludeRef] = []
        seen: set[tuple[str, str]] = set()
        for m in self.matches:
            key = (m.entry.answer_corpus, m.entry.answer_id)
            score = best.get(key, 0.0)
            if (key in seen or (searched is not None and key[0] not in searched)
                    or score == 0 or (score < 0 and not with_factors)):
                continue
            seen.add(key)
            factor = boost.factor(score) if with_factors else 1.0
            # A document's entry recalls its chunks (as they were when it was recorded).
            ids = m.entry.chunks if m.entry.chunks else [key[1]]
            out += [IncludeRef(corpus=key[0], id=i, factor=factor) for i in ids]
            if len(out) >= MAX_INCLUDE:
                return out[:MAX_INCLUDE]
        return out


async def lookup(deps: Deps, corpus: str, vector: list[float] | None, text: str, top_k: int,
                 max_distance: float, allow_partial: bool) -> Lookup:
    """Entries whose recorded question is within max_distance of the query, nearest first.

    With the query's vector: the vector distance. Without one (keyword and lexical
    searches never wait for an embedding; a hybrid one whose embedder is down): the
    entries BM25 finds for the text, at their word distance (boost.word_distance), so
    the same recorded question still applies. A playbook corpus that does not exist yet
    has none. Any other failure is a 502, or with allow_partial an empty lookup marked
    unavailable.
    """
    absent_at = deps.playbooks_absent.get(corpus)
    if absent_at is not None and time.monotonic() - absent_at < ABSENT_TTL_SECONDS:
        return Lookup(corpus, lexical=vector is None)
    req = (SearchRequest(mode="vector", query_vector=vector, k=top_k) if vector is not None
           else SearchRequest(mode="lexical", query_text=text, k=top_k))
    try:
        out = await deps.vectord.search(corpus, req)
    except NotFound:
        deps.playbooks_absent[corpus] = time.monotonic()
        return Lookup(corpus, lexical=vector is None)
    except LakehouseError as exc:
        if not allow_partial:
            raise UpstreamError(f"playbook corpus {corpus!r}: {describe(exc)}") from None
        return Lookup(corpus, unavailable=True, lexical=vector is None)
    matches = []
    for h in out.hits:
        d = h.distance if vector is not None else boost.word_distance(text, h.text)
        if d is None or d > max_distance:
            continue
        entry = boost.entry_from_metadata(h.metadata)
        if entry is None:
            log.warning("playbook_entry_invalid", corpus=corpus, id=h.id)
            continue
        matches.append(Match(entry, float(d)))
    matches.sort(key=lambda m: m.distance)  # nearest first, as the vector lookup gives them
    return Lookup(corpus, matches, lexical=vector is None)


def mark_recalled(hits: list[RankedHit]) -> int:
    """Hits that entered the candidates only through `include` say so, as `from_playbook`
    instead of `included`; how many there are."""
    n = 0
    for h in hits:
        recalled = h.included is True
        h.included = msgspec.UNSET
        h.from_playbook = recalled
        n += recalled
    return n


# ---- record, list, delete -------------------------------------------------------------------

async def check_answer(deps: Deps, answer_corpus: str, answer_id: str
                       ) -> list[str] | msgspec.UnsetType:
    """The answer's chunks when it is a document (UNSET for an item); 404 naming
    answer_corpus (no such corpus, with the nearest name) or answer_id (neither an item
    nor a document in it)."""
    try:
        await deps.vectord.get_corpus(answer_corpus)
    except NotFound as exc:
        raise NotFound(f"answer_corpus: {exc.message}", field="answer_corpus",
                       code="corpus_not_found") from None
    try:
        await deps.vectord.get_item(answer_corpus, answer_id)
        return msgspec.UNSET
    except NotFound:
        pass
    try:
        return (await deps.vectord.get_document(answer_corpus, answer_id)).chunks
    except NotFound:
        raise NotFound(f"answer_id: no item or document {answer_id!r} in corpus "
                       f"{answer_corpus!r}", field="answer_id") from None


def entry_title(entry: boost.PlaybookEntry) -> str:
    return f"{entry.answer_corpus}/{entry.answer_id}"


async def list_entries(deps: Deps, corpus: str, answer_id: str | None,
                       answer_corpus: str | None, limit: int) -> list[PlaybookEntryRow]:
    """Entries, newest first, optionally only those for one answer; none if no playbook yet."""
    meta: dict[str, str] = {}
    if answer_id is not None:
        meta["answer_id"] = answer_id
    if answer_corpus is not None:
        meta["answer_corpus"] = answer_corpus
    req = SearchRequest(mode="keyword", query_text=_LIST_MARK, k=limit,
                        filter=Filter(metadata=meta) if meta else None)
    try:
        out = await deps.vectord.search(corpus, req)
    except NotFound:
        return []
    rows = []
    for h in out.hits:
        entry = boost.entry_from_metadata(h.metadata)
        if entry is None:
            continue
        rows.append(PlaybookEntryRow(
            playbook_id=h.id, query_text=entry.query_text, answer_id=entry.answer_id,
            answer_corpus=entry.answer_corpus, score=entry.score, tags=entry.tags,
            recorded_at=h.updated_at))
    return rows


_HEX = "0123456789abcdef"


async def all_entries(deps: Deps, corpus: str) -> list[PlaybookEntry]:
    """Every entry of the playbook (none if it does not exist), by id prefix: vectord's
    keyword mode lists at most MAX_LIST a call, so a prefix that fills a page is split
    into its sixteen longer ones (ids are hex digests)."""
    out: list[PlaybookEntry] = []
    todo = [""]
    while todo:
        prefix = todo.pop()
        req = SearchRequest(mode="keyword", query_text=_LIST_MARK, k=MAX_LIST,
                            filter=Filter(id_prefix=prefix) if prefix else None)
        try:
            found = await deps.vectord.search(corpus, req)
        except NotFound:
            return []
        if len(found.hits) >= MAX_LIST:
            todo.extend(prefix + c for c in _HEX)
            continue
        for h in found.hits:
            entry = boost.entry_from_metadata(h.metadata)
            if entry is not None:
                out.append(entry)
    return out


def check_playbook_id(playbook_id: str) -> str:
    """The id itself, or ValueError: ids are sha256 hex digests (boost.playbook_id)."""
    if not _PLAYBOOK_ID.match(playbook_id):
        raise ValueError(f"expected 64 lowercase hex digits, got {playbook_id!r}")
    return playbook_id


async def delete_entry(deps: Deps, corpus: str, playbook_id: str,
                       scope: Scope | None = None) -> None:
    """Remove one entry; 404 naming playbook_id when there is no such entry (or playbook),
    or when its answer's corpus is outside the caller's scope (the same answer)."""
    try:
        if scope is not None and not scope.all_corpora:
            item = await deps.vectord.get_item(corpus, playbook_id)
            entry = boost.entry_from_metadata(item.metadata)
            if entry is None or not scope.sees(entry.answer_corpus):
                raise NotFound(playbook_id)
        deleted = await deps.vectord.delete_items(corpus, [playbook_id])
    except NotFound:
        deleted = 0
    if not deleted:
        raise NotFound(f"playbook_id: no entry {playbook_id!r} in playbook {corpus!r}",
                       field="playbook_id")


async def record(deps: Deps, body: RecordRequest) -> RecordResponse:
    """Record (question, answer, score) in the playbook corpus (created on the first record,
    with the question's embedding model); the answer must exist. 400 naming the caller's
    field; vectord's other refusals are a 502."""
    if not body.query_text.strip():
        raise InvalidArgument("query_text: must not be blank", field="query_text")
    if not body.answer_id:
        raise InvalidArgument("answer_id: must not be empty", field="answer_id")
    corpus_name(body.answer_corpus, "answer_corpus")
    try:
        score = boost.validate_score(body.score)
    except ValueError as exc:
        raise InvalidArgument(f"score: {exc}", field="score") from None
    name = body.playbook_corpus or deps.cfg.playbook_corpus
    corpus_name(name, "playbook_corpus")
    chunks = await check_answer(deps, body.answer_corpus, body.answer_id)

    emb = await embed_query(deps, body.query_text)
    entry = PlaybookEntry(query_text=body.query_text, answer_id=body.answer_id,
                          answer_corpus=body.answer_corpus, score=score, tags=list(body.tags),
                          chunks=chunks)
    pid = boost.playbook_id(body.query_text, body.answer_id, body.answer_corpus)
    item = Item(id=pid, vector=emb.vectors[0], text=body.query_text, title=entry_title(entry),
                tags=list(body.tags), metadata=boost.entry_to_metadata(entry))
    created = False
    try:
        try:
            await deps.vectord.upsert(name, [item], model=emb.model)
        except NotFound:
            # First record: the playbook corpus does not exist yet.
            _, created = await deps.vectord.ensure_corpus(name, emb.dim, "cosine",
                                                          model=emb.model)
            await deps.vectord.upsert(name, [item], model=emb.model)
    except ServiceError as exc:
        raise _record_fault(exc) from None
    # After the write: a search that found no playbook while it was being made must not
    # leave it taken as absent.
    deps.playbooks_absent.pop(name, None)
    log.info("playbook_recorded", corpus=name, playbook_id=pid, answer_corpus=body.answer_corpus,
             score=score, created=created)
    return RecordResponse(playbook_id=pid, playbook_corpus=name, created=created)


# vectord's fields of the playbook item -> the record request's own fields.
_ITEM_FIELDS = {"text": "query_text", "title": "query_text", "tags": "tags",
                "metadata": "query_text"}


def _record_fault(exc: ServiceError) -> LakehouseError:
    """vectord's 400 about the playbook item, told in the caller's fields (`query_text`,
    `tags[0]`), never vectord's `items[0].text`; any other 400 is not the caller's: 502."""
    if exc.status != 400:
        return exc
    return (in_callers_fields(exc, _ITEM_FIELDS, prefix="items[0].")
            or UpstreamError(f"playbook upsert: {describe(exc)}"))
