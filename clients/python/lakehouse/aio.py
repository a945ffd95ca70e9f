"""AsyncClient: every public route of the gateway as an async method returning structs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Iterable, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Literal
from urllib.parse import quote

import aiohttp

from lakehouse import _answer, _ranker
from lakehouse._connect import resolve_token, resolve_url
from lakehouse._corpus_calls import CorpusCalls
from lakehouse._documents import DocumentCalls
from lakehouse._items import as_documents, as_item, check_written, renumbered
from lakehouse._transport import Transport, as_given, body_of, given_only, plain
from lakehouse.errors import Conflict, InvalidArgument, LakehouseError, NotFound
from lakehouse.types import DowngradeOption, Filter, Item, Prf
from lakehouse.wire.models import model_for
from lakehouse.wire.responses import (
    AnalyzeResponse,
    Corpus,
    CorpusDeleted,
    CorpusList,
    EmbedResponse,
    IdRow,
    IdsPage,
    IndexSettingsChanged,
    ItemsDeleted,
    MatrixSearchResponse,
    ModelsResponse,
    NormalizeResponse,
    PlaybookDeleted,
    PlaybookList,
    Ready,
    RecordResponse,
    SearchAutoResponse,
    SmartSearchResponse,
    StoredItem,
    SyncRun,
    SyncStatus,
    Upserted,
)
from lakehouse.wire.search import (
    FusionName,
    MatrixSearchRequest,
    ModeName,
    SearchAutoRequest,
    SmartSearchRequest,
)
from lakehouse.wire.shapes import MAX_IDS_PAGE, ObservationIn, Precision
from lakehouse.wire.storage import StorageStatus

Options = Mapping[str, Any]  # an option struct's fields as a dict, e.g. {"tags_any": ["vpn"]}

UPSERT_BATCH = 256  # items per upsert call (vectord takes up to max_batch, 1,000)
FETCH_CONCURRENCY = 8  # item reads in flight while iterating a corpus


def _names(corpora: str | Sequence[str] | None) -> list[str] | None:
    """A list of corpus names; one name may be given as a str."""
    if corpora is None:
        return None
    return [corpora] if isinstance(corpora, str) else list(corpora)


def _c(name: str) -> str:
    return f"/v1/vectors/corpora/{quote(name, safe='')}"


def _item_path(corpus: str, item_id: str) -> str:
    """The item's route, its id percent-encoded as one path segment (RFC 3986): `/`, `#`,
    `?`, `%`, `{`, spaces and any non-ASCII character encoded. "." and ".." are refused:
    a URL cannot carry them as a segment (every HTTP client resolves them), so the
    server refuses them as ids at write time too."""
    if item_id in (".", ".."):
        raise InvalidArgument(f"item_id: {item_id!r} cannot be sent in a URL path (no item "
                              "can have it)", field="item_id")
    return f"{_c(corpus)}/items/{quote(item_id, safe='')}"


class AsyncClient(_ranker.RankerCalls, CorpusCalls, _answer.AnswerCalls, DocumentCalls):
    """Lakehouse's HTTP API, through the gateway, on one reused aiohttp session.

    `url` defaults to $LAKEHOUSE_URL, else the gateway address in lakehouse.toml;
    `token` to the first of $LAKEHOUSE_TOKEN, else the first configured token (as the
    `lakehouse` command; "" sends none). `timeout` is per request, in seconds; `retries`
    bounds the attempts after a 503 or a refused connection, `backoff` is the first wait
    (doubling). A 429 (past this caller's share) on a search, a read or an upsert is
    waited out as its `Retry-After` says, up to `max_wait` seconds in all per call;
    beyond, or on another call, it raises TooManyRequests (`retry_after` set). `headers`
    go with every request; `session` is an aiohttp session to use (its owner closes it)
    instead of one of the client's own. Use it as
    `async with AsyncClient() as client:` or call `await client.aclose()`; one client
    belongs to one event loop.
    """

    def __init__(self, url: str | None = None, token: str | None = None, *,
                 timeout: float = 60.0, retries: int = 3, backoff: float = 0.25,
                 max_wait: float = 60.0, headers: Mapping[str, str] | None = None,
                 session: aiohttp.ClientSession | None = None) -> None:
        self.url = resolve_url(url)
        self._http = Transport(self.url, resolve_token(token), timeout=timeout,
                               retries=retries, backoff=backoff, max_wait=max_wait,
                               session=session, headers=headers)

    @property
    def lsn(self) -> str | None:
        """The WAL position of this client's latest write (its `Lakehouse-LSN` answer), sent
        with every later request: searches see the client's own writes, on a read replica
        too. None before the first write."""
        return self._http.lsn

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the session; the client cannot be used afterwards."""
        await self._http.aclose()

    # ---- corpora ------------------------------------------------------------------------

    async def create_corpus(self, name: str, dim: int | None = None, *,
                            metric: Literal["cosine", "l2", "ip"] = "cosine",
                            language: str | None = None, model: str | None = None,
                            defer_index: bool = False,
                            precision: Precision | None = None,
                            index: Mapping[str, int] | None = None,
                            description: str | None = None) -> Corpus:
        """Create a corpus (Conflict if it exists). Without `dim`, it is made for `model`
        (its dimension and label), by default the stack's model for `language` (an ISO
        639-1 code: the multilingual model for a language the default does not declare),
        ready for text upserts.
        `precision`: how its vectors are stored (float16, the server's default, or float32);
        `index`: its vector index's settings (`m`, `ef_construction`, `ef_search`,
        `exact_scan_rows`; each left out: the server's default); `description`: what it
        is about (a search over several corpora weighs it)."""
        if dim is None:
            model, dim = await self._model(model, language)
        body = body_of(name=name, dim=dim, metric=metric, language=language, model=model,
                       defer_index=defer_index, precision=precision,
                       index=dict(index) if index else None, description=description)
        return await self._http.call("POST", "/v1/vectors/corpora", Corpus, body=body)

    async def list_corpora(self) -> list[Corpus]:
        """Every corpus, with its item count."""
        return (await self._http.call("GET", "/v1/vectors/corpora", CorpusList)).corpora

    async def get_corpus(self, name: str) -> Corpus:
        """One corpus (NotFound if there is none of that name)."""
        return await self._http.call("GET", _c(name), Corpus)

    async def delete_corpus(self, name: str) -> None:
        """Delete a corpus and its items (NotFound if there is none of that name)."""
        await self._http.call("DELETE", _c(name), CorpusDeleted)

    async def index_settings(self, name: str, *, m: int | None = None,
                             ef_construction: int | None = None, ef_search: int | None = None,
                             exact_scan_rows: int | None = None) -> IndexSettingsChanged:
        """Change the corpus's vector index settings: `ef_search` and `exact_scan_rows` at
        once; a new `m` or `ef_construction` rebuilds its graph in the background
        (searches answer throughout; progress: get_corpus(name).reindex)."""
        body = body_of(m=m, ef_construction=ef_construction, ef_search=ef_search,
                       exact_scan_rows=exact_scan_rows)
        return await self._http.call("POST", f"{_c(name)}/index/settings",
                                     IndexSettingsChanged, body=body)

    async def storage(self) -> StorageStatus:
        """The corpora's rows, table and index bytes and fit in shared_buffers; memory held."""
        return await self._http.call("GET", "/v1/vectors/storage", StorageStatus)

    async def ensure_corpus(self, name: str, dim: int | None = None, *,
                            metric: Literal["cosine", "l2", "ip"] = "cosine",
                            language: str | None = None, model: str | None = None,
                            defer_index: bool = False,
                            precision: Precision | None = None) -> tuple[Corpus, bool]:
        """The corpus `name` and whether this call created it: made as `create_corpus`
        makes it when there is none (two callers racing both get the one made)."""
        try:
            return await self.get_corpus(name), False
        except NotFound:
            pass
        try:
            return await self.create_corpus(name, dim, metric=metric, language=language,
                                            model=model, defer_index=defer_index,
                                            precision=precision), True
        except Conflict:
            return await self.get_corpus(name), False

    async def _model(self, model: str | None, language: str | None = None) -> tuple[str, int]:
        """The label and dimension of `model` (None: the one embedd lists for a corpus in
        `language`, an ISO 639-1 code: `lakehouse.wire.models.model_for`)."""
        listing = await self.models()
        wanted = model or model_for(listing, language)
        for info in listing.models:
            if info.id == wanted and info.dim:
                return info.id, info.dim
        probe = await self.embed(["dimension probe"], model=model)  # a remote model not asked yet
        return probe.model, probe.dim

    # ---- items --------------------------------------------------------------------------

    async def upsert(self, corpus: str, items: Iterable[Item | Mapping[str, Any]], *,
                     model: str | None = None) -> int:
        """Store items (an id already there is replaced); returns how many were stored.

        An item without a vector is written as a document of one chunk (`add_documents`
        with chunking "none"): the stack embeds its title and text with the corpus's
        model, in its bulk lane, and stores it under its id (with `metadata.parent_id`
        its id). With vectors of your own, set `model` to their label if the corpus has
        one; they go in batches of UPSERT_BATCH, each all or nothing. Sending items again
        is safe.
        """
        todo = [as_item(it, i) for i, it in enumerate(items)]
        texts = [i for i, it in enumerate(todo) if it.vector is None]
        stored = 0
        if texts:
            try:
                tasks = await self.add_documents(corpus, as_documents(todo, texts),
                                                 chunking="none", wait=True)
            except LakehouseError as exc:
                raise renumbered(exc, texts) from None
            check_written(tasks, todo, texts)
            stored += len(texts)
        own = [i for i, it in enumerate(todo) if it.vector is not None]
        for start in range(0, len(own), UPSERT_BATCH):
            places = own[start:start + UPSERT_BATCH]
            body = body_of(items=[plain(todo[i]) for i in places], model=model)
            try:
                stored += (await self._http.call("POST", f"{_c(corpus)}/items", Upserted,
                                                 body=body, idempotent=True)).upserted
            except LakehouseError as exc:
                raise renumbered(exc, places) from None
        return stored

    async def get_item(self, corpus: str, item_id: str, *, vector: bool = False) -> StoredItem:
        """One stored item (NotFound if absent); its vector too with `vector`."""
        return await self._http.call("GET", _item_path(corpus, item_id), StoredItem,
                                     params={"include": "vector"} if vector else None)

    async def delete_item(self, corpus: str, item_id: str) -> int:
        """Delete one item by its own path (NotFound if there is none)."""
        return (await self._http.call("DELETE", _item_path(corpus, item_id),
                                      ItemsDeleted)).deleted

    async def delete_items(self, corpus: str, ids: Iterable[str]) -> int:
        """Delete items by id; returns how many existed."""
        todo, deleted = list(ids), 0
        for start in range(0, len(todo), MAX_IDS_PAGE):
            body = {"ids": todo[start:start + MAX_IDS_PAGE]}
            deleted += (await self._http.call("POST", f"{_c(corpus)}/items/delete",
                                              ItemsDeleted, body=body, idempotent=True)).deleted
        return deleted

    async def iter_ids(self, corpus: str, *, prefix: str | None = None,
                       page_size: int = 1000) -> AsyncGenerator[IdRow, None]:
        """Every item's id, content hash and update time, in id order, a page at a time."""
        async for page in self._http.pages(f"{_c(corpus)}/ids", IdsPage, prefix=prefix,
                                           page_size=page_size):
            for row in page.items:
                yield row

    async def iter_items(self, corpus: str, *, prefix: str | None = None,
                         page_size: int = 1000, vector: bool = False
                         ) -> AsyncGenerator[StoredItem, None]:
        """Every stored item, in id order (the ids `iter_ids` yields), with its vector when
        asked; an item deleted meanwhile is left out, any other failure to read one raises."""
        batch: list[str] = []
        async for row in self.iter_ids(corpus, prefix=prefix, page_size=page_size):
            batch.append(row.id)
            if len(batch) == FETCH_CONCURRENCY:
                for item in await self._fetch(corpus, batch, vector):
                    yield item
                batch = []
        for item in await self._fetch(corpus, batch, vector):
            yield item

    async def _fetch(self, corpus: str, ids: list[str], vector: bool) -> list[StoredItem]:
        async def one(item_id: str) -> StoredItem | None:
            try:
                return await self.get_item(corpus, item_id, vector=vector)
            except NotFound as exc:
                if exc.field == "id":  # the item's own 404: deleted since it was listed
                    return None
                raise

        return [it for it in await asyncio.gather(*(one(i) for i in ids)) if it is not None]

    # ---- embeddings ---------------------------------------------------------------------

    async def embed(self, texts: Sequence[str], *, model: str | None = None,
                    input_type: Literal["document", "query"] = "document") -> EmbedResponse:
        """The stack's embeddings of `texts` (at most embedd's max_texts, 256 by default),
        with `model` (default: embedd's), as documents or as search queries."""
        body = body_of(texts=list(texts), input_type=input_type, model=model)
        return await self._http.call("POST", "/v1/embed", EmbedResponse, body=body,
                                     idempotent=True)

    async def models(self) -> ModelsResponse:
        """The embedding models the stack serves, and which one it uses when none is named."""
        return await self._http.call("GET", "/v1/embed/models", ModelsResponse)

    # ---- the stack ----------------------------------------------------------------------

    async def ready(self) -> Ready:
        """Each component's readiness (GET /readyz): `status` "ok" when every one is
        ready; a stack that is not ready answers too (not raised), with the reasons."""
        return await self._http.call("GET", "/readyz", Ready, answered=frozenset({503}))

    # ---- any route ----------------------------------------------------------------------

    async def request(self, method: str, path: str, *, body: Any = None,
                      params: Mapping[str, str | int] | None = None) -> Any:
        """One request to any route of the gateway (e.g. "/openapi.json"), its JSON answer
        as sent (dicts and lists); errors raise their class as for every method."""
        return await self._http.call(method, path, Any, body=plain(body), params=params)

    # ---- search -------------------------------------------------------------------------

    async def search(self, query: str | None = None, *,
                     corpora: str | Sequence[str] | None = None, k: int = 10,
                     mode: ModeName | None = None, vector: Sequence[float] | None = None,
                     filter: Filter | Options | None = None,
                     prefer: Filter | Options | None = None, language: str | None = None,
                     fusion: FusionName | None = None, rrf_k: int | None = None,
                     weights: Mapping[str, float] | None = None, candidates: int | None = None,
                     prf: Prf | Options | None = None,
                     corpus_weights: Mapping[str, float] | None = None,
                     per_corpus_k: int | None = None, ef_search: int | None = None,
                     use_playbook: bool = False, playbook_corpus: str | None = None,
                     allow_partial: bool = False,
                     downgrade: DowngradeOption | Options | None = None,
                     relevance: Options | None = None,
                     highlight: bool | Options | None = None, group_by: str | None = None,
                     group_size: int | None = None,
                     facets: Sequence[str | Options] | None = None,
                     facet_size: int | None = None, diversity: float | None = None,
                     recency: Options | None = None, explain: bool = False,
                     corpus_selection: bool = True) -> MatrixSearchResponse:
        """The best `k` hits for a question, each with its corpus (POST /v1/matrix/search).

        `corpora` None searches every corpus but the playbook. `mode` None is hybrid for
        a text query (vector + BM25, fused, with pseudo-relevance feedback), else vector;
        `vector` searches by your own query vector. `filter` must hold, `prefer` only
        counts; `fusion`, `rrf_k`, `weights` and `candidates` tune hybrid fusion, `prf`
        its feedback (`Prf(docs=0)`: off). `use_playbook` applies recorded feedback;
        `allow_partial` returns the corpora that answered when one fails. The results are
        shaped by `highlight` (True or {fields, pre, post, fragment_chars, fragments}),
        `group_by` ("parent" or "metadata.<key>") with `group_size`, `facets` with
        `facet_size`, `diversity` (0..1) and `recency` ({field, half_life_days, weight});
        docs/API.md, "Shaping results". `explain`: each corpus's selection score and why
        (`corpus_selection` False: the union's ranking, unweighted), and with the learned
        ranker each hit's largest feature contributions. The keyword arguments build a
        `MatrixSearchRequest` (lakehouse.wire.search), sent by `search_request`.
        """
        spec = MatrixSearchRequest(
            query_text=query, query_vector=list(vector) if vector is not None else None,
            corpora=_names(corpora), k=k, mode=mode, filter=as_given(filter),
            prefer=as_given(prefer), language=language, fusion=fusion, rrf_k=rrf_k,
            weights=dict(weights) if weights is not None else None, candidates=candidates,
            prf=as_given(prf), corpus_weights=dict(corpus_weights) if corpus_weights else None,
            per_corpus_k=per_corpus_k, ef_search=ef_search, use_playbook=use_playbook,
            playbook_corpus=playbook_corpus, allow_partial=allow_partial,
            downgrade=as_given(downgrade), relevance=as_given(relevance),
            highlight=as_given(highlight), group_by=group_by,
            facets=as_given(list(facets)) if facets is not None else None,
            diversity=diversity, recency=as_given(recency), explain=explain,
            corpus_selection=corpus_selection,
            **given_only(group_size=group_size, facet_size=facet_size))
        return await self.search_request(spec)

    async def search_request(self, spec: MatrixSearchRequest) -> MatrixSearchResponse:
        """POST /v1/matrix/search with a request built whole (the fields `search` takes)."""
        return await self._http.call("POST", "/v1/matrix/search", MatrixSearchResponse,
                                     body=spec, idempotent=True)

    async def smart_search(self, query: str, *, corpora: str | Sequence[str] | None = None,
                           k: int = 10, max_iterations: int = 3, now: str | datetime | None = None,
                           min_confidence: float | None = None, date_field: str | None = None,
                           context: bool = True, filter: Filter | Options | None = None,
                           prefer: Filter | Options | None = None, language: str | None = None,
                           use_playbook: bool = False, allow_partial: bool = False
                           ) -> SmartSearchResponse:
        """A planned search: the question is analysed and split, its parts searched, the
        hits merged, and parts still unanswered searched again (up to `max_iterations`)."""
        spec = SmartSearchRequest(
            query_text=query, corpora=_names(corpora), k=k, max_iterations=max_iterations,
            now=_iso(now), min_confidence=min_confidence, context=context,
            filter=as_given(filter), prefer=as_given(prefer), language=language,
            use_playbook=use_playbook, allow_partial=allow_partial,
            **given_only(date_field=date_field))
        return await self._http.call("POST", "/v1/matrix/smart_search", SmartSearchResponse,
                                     body=spec, idempotent=True)

    async def search_auto(self, query: str, *, corpora: str | Sequence[str] | None = None,
                          k: int = 10, budget_ms: float | None = None,
                          now: str | datetime | None = None,
                          filter: Filter | Options | None = None, language: str | None = None,
                          allow_partial: bool = False, context: bool = True
                          ) -> SearchAutoResponse:
        """A search whose strategy (keyword, lexical, vector, hybrid or smart) the stack
        picks for the question and, with `budget_ms`, for the time it may take."""
        spec = SearchAutoRequest(query_text=query, corpora=_names(corpora), k=k,
                                 budget_ms=budget_ms, now=_iso(now), filter=as_given(filter),
                                 language=language, allow_partial=allow_partial,
                                 context=context)
        return await self._http.call("POST", "/v1/matrix/search_auto", SearchAutoResponse,
                                     body=spec, idempotent=True)

    # ---- query understanding ------------------------------------------------------------

    async def analyze(self, query: str, *, now: str | datetime | None = None) -> AnalyzeResponse:
        """Entities, time range, question type and sub-queries of a question."""
        body = body_of(query_text=query, now=_iso(now))
        return await self._http.call("POST", "/v1/matrix/analyze", AnalyzeResponse, body=body,
                                     idempotent=True)

    async def normalize(self, observations: Iterable[ObservationIn | Options | str], *,
                        context: Sequence[str] | None = None) -> NormalizeResponse:
        """Observations with "I", "you" and "yesterday" resolved against their speaker
        and reference time, and their key phrases; a str is an observation's text."""
        obs = [{"text": o} if isinstance(o, str) else o for o in observations]
        body = body_of(observations=obs, context=list(context) if context else None)
        return await self._http.call("POST", "/v1/matrix/normalize", NormalizeResponse,
                                     body=body, idempotent=True)

    # ---- feedback -----------------------------------------------------------------------

    async def record(self, query: str, answer_id: str, corpus: str, score: float = 1.0, *,
                     tags: Sequence[str] | None = None,
                     playbook_corpus: str | None = None) -> RecordResponse:
        """Record that `answer_id` in `corpus` answers `query` (score in -1..1: 1 right,
        -1 wrong); searches with `use_playbook` then favour it for similar questions."""
        body = body_of(query_text=query, answer_id=answer_id, answer_corpus=corpus,
                       score=score, tags=list(tags) if tags else None,
                       playbook_corpus=playbook_corpus)
        return await self._http.call("POST", "/v1/matrix/playbooks/record", RecordResponse,
                                     body=body)

    async def wrong(self, query: str, answer_id: str, corpus: str, *,
                    tags: Sequence[str] | None = None,
                    playbook_corpus: str | None = None) -> RecordResponse:
        """Record that `answer_id` is a wrong answer to `query` (score -1)."""
        return await self.record(query, answer_id, corpus, -1.0, tags=tags,
                                 playbook_corpus=playbook_corpus)

    async def playbooks(self, *, answer_id: str | None = None, answer_corpus: str | None = None,
                        limit: int = 100, playbook_corpus: str | None = None) -> PlaybookList:
        """Recorded feedback entries, newest first."""
        params = {k: v for k, v in (("answer_id", answer_id), ("answer_corpus", answer_corpus),
                                    ("limit", limit), ("playbook_corpus", playbook_corpus))
                  if v is not None}
        return await self._http.call("GET", "/v1/matrix/playbooks", PlaybookList, params=params)

    async def delete_playbook(self, playbook_id: str, *,
                              playbook_corpus: str | None = None) -> PlaybookDeleted:
        """Delete one feedback entry (NotFound if there is none with that id)."""
        params = {"playbook_corpus": playbook_corpus} if playbook_corpus else None
        return await self._http.call("DELETE", f"/v1/matrix/playbooks/{quote(playbook_id, safe='')}",
                                     PlaybookDeleted, params=params)

    # ---- wiki sync ----------------------------------------------------------------------

    async def run_sync(self) -> SyncRun:
        """Make the sync corpus equal to the wiki folder now (Unavailable with code
        `sync_not_configured` when the stack has no `[sync] wiki_dir`)."""
        return await self._http.call("POST", "/v1/sync/run", SyncRun)

    async def sync_status(self) -> SyncStatus:
        """The wiki sync's folder, corpus, interval and last run."""
        return await self._http.call("GET", "/v1/sync/status", SyncStatus)


def _iso(when: str | datetime | None) -> str | None:
    return when.isoformat() if isinstance(when, datetime) else when
