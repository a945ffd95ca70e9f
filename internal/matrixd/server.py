"""matrixd: one query across many corpora, merged with attribution, boosted by feedback.

Routes: GET /v1/matrix/corpora, POST /v1/matrix/search, POST /v1/matrix/playbooks/record,
POST /v1/matrix/relevance, GET /readyz (and /healthz from make_base_app). The scoring
rules live in the I/O-free modules merge, boost and relevance; this module only talks
to vectord and embedd (through their clients) and shapes requests and responses.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import structlog
from aiohttp import web

from internal.common.daemon import serve
from internal.common.errors import (
    InvalidArgument,
    LakehouseError,
    ServiceError,
    Unavailable,
    UpstreamError,
    UpstreamTimeout,
)
from internal.common.web import json_response, make_base_app, read_json
from internal.config import Config, MatrixdConfig
from internal.embed.client import EmbedClient, Embedding, make_client
from internal.matrixd import boost, merge, relevance
from internal.matrixd.boost import PlaybookEntry
from internal.matrixd.models import (
    MatrixSearchRequest,
    Mode,
    RecordRequest,
    RelevanceOption,
    RelevanceRequest,
)
from internal.matrixd.relevance import Chunk
from internal.vectord.client import VectordClient
from internal.vectord.validate import corpus_name

log = structlog.get_logger()

# vectord 400s on these fields are faults of the request, the same for every corpus.
_REQUEST_FIELDS = ("filter", "language", "ef_search")
# Hybrid fusion options (issue 8), passed to vectord unchanged; a 400 on them is the request's.
_FUSION_FIELDS = ("fusion", "rrf_k", "weights", "candidates", "prefer")


@dataclass
class Deps:
    cfg: MatrixdConfig
    vectord: VectordClient
    embed: EmbedClient | None


DEPS: web.AppKey[Deps] = web.AppKey("deps", Deps)


# ---- helpers ---------------------------------------------------------------------------

def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)


def _describe(exc: LakehouseError) -> str:
    if isinstance(exc, ServiceError):
        return f"{exc.service} answered {exc.status} {exc.code}: {exc.message}"
    return f"{exc.code}: {exc.message}"


def _is_down(exc: LakehouseError) -> bool:
    """An error meaning the service cannot answer now (not that the request was wrong)."""
    return isinstance(exc, (Unavailable, UpstreamTimeout)) or exc.status >= 500


def _check_range(value: int, lo: int, hi: int, field: str) -> None:
    if not lo <= value <= hi:
        raise InvalidArgument(f"{field}: must be in {lo}..{hi}, got {value}", field=field)


async def _embed_query(deps: Deps, text: str) -> Embedding:
    if deps.embed is None:
        raise Unavailable("embedd is not configured ([matrixd] embedd_url is empty)",
                          code="embedd_unavailable")
    return await deps.embed.embed([text], input_type="query")


# ---- corpora -----------------------------------------------------------------------------

async def corpora_handler(request: web.Request) -> web.Response:
    deps = request.app[DEPS]
    try:
        rows = await deps.vectord.list_corpora()
    except ServiceError as exc:
        if exc.status >= 500:
            raise UpstreamError(_describe(exc)) from None
        raise
    keep = ("name", "count", "dim", "model", "metric", "language")
    return json_response({"corpora": [{k: r.get(k) for k in keep} for r in rows]})


# ---- search ------------------------------------------------------------------------------

@dataclass
class CorpusResult:
    corpus: str
    hits: list[dict[str, Any]]
    ms: float
    error: LakehouseError | None = None


async def _search_all(deps: Deps, corpora: list[str], body: dict[str, Any]) -> list[CorpusResult]:
    """Every corpus in one vectord call; each failure is kept with its corpus.

    A corpus's error is vectord's answer for it, as the per-corpus route gives it; a
    failure of the whole call (vectord down, a request-wide 400) is every corpus's.
    """
    started = time.perf_counter()
    try:
        rows = await deps.vectord.search_many(corpora, body)
    except LakehouseError as exc:
        ms = _ms(started)
        return [CorpusResult(c, [], ms, exc) for c in corpora]
    ms = _ms(started)
    out = []
    for c, row in zip(corpora, rows, strict=True):
        err = row.get("error")
        if err is not None:
            out.append(CorpusResult(c, [], ms, ServiceError(
                int(row.get("status") or 502), str(err.get("code", "error")),
                str(err.get("message", "")), service="vectord", field=err.get("field"))))
        else:
            out.append(CorpusResult(c, list(row.get("hits") or []),
                                    round(float(row.get("took_ms", ms)), 2)))
    return out


async def _playbook_entries(deps: Deps, corpus: str, vector: list[float], top_k: int,
                            max_distance: float) -> list[PlaybookEntry]:
    """Entries near the query; a playbook corpus that does not exist yet has none."""
    try:
        out = await deps.vectord.search(corpus, {"mode": "vector", "query_vector": vector,
                                                 "k": top_k})
    except ServiceError as exc:
        if exc.status == 404:
            return []
        raise
    entries = []
    for h in out.get("hits") or []:
        d = h.get("distance")
        if d is None or d > max_distance:
            continue
        entry = boost.entry_from_metadata(h.get("metadata"))
        if entry is None:
            log.warning("playbook_entry_invalid", corpus=corpus, id=h.get("id"))
            continue
        entries.append(entry)
    return entries


def _validate_search(body: MatrixSearchRequest, cfg: MatrixdConfig) -> tuple[Mode, str, int]:
    """The effective mode, the stripped query text and per_corpus_k; 400 on bad input."""
    if not body.corpora:
        raise InvalidArgument("corpora: name at least one corpus", field="corpora")
    if len(body.corpora) > cfg.max_corpora:
        raise InvalidArgument(f"corpora: at most {cfg.max_corpora} corpora, got {len(body.corpora)}",
                              field="corpora")
    seen: set[str] = set()
    for i, name in enumerate(body.corpora):
        corpus_name(name, f"corpora[{i}]")
        if name in seen:
            raise InvalidArgument(f"corpora[{i}]: {name!r} is named twice", field=f"corpora[{i}]")
        seen.add(name)
    _check_range(body.k, 1, cfg.max_k, "k")
    per_corpus_k = body.per_corpus_k if body.per_corpus_k is not None else body.k
    _check_range(per_corpus_k, 1, cfg.max_k, "per_corpus_k")
    text = (body.query_text or "").strip()
    if body.query_vector is not None and not body.query_vector:
        raise InvalidArgument("query_vector: must not be empty", field="query_vector")
    if not text and body.query_vector is None:
        raise InvalidArgument("query_text: give query_text or query_vector", field="query_text")
    mode: Mode = body.mode or ("hybrid" if text else "vector")
    if mode != "vector" and not text:
        raise InvalidArgument(f"query_text: mode {mode!r} needs query text", field="query_text")
    if body.playbook_corpus is not None:
        corpus_name(body.playbook_corpus, "playbook_corpus")
    if body.playbook_top_k is not None:
        _check_range(body.playbook_top_k, 1, cfg.max_k, "playbook_top_k")
    if body.playbook_max_distance is not None and body.playbook_max_distance < 0:
        raise InvalidArgument("playbook_max_distance: must not be negative",
                              field="playbook_max_distance")
    if body.relevance is not None and not body.relevance.focus.path.strip():
        raise InvalidArgument("relevance.focus.path: must not be empty", field="relevance.focus.path")
    return mode, text, per_corpus_k


def _raise_request_fault(results: list[CorpusResult]) -> None:
    """A vectord 400 naming a request-wide field is the caller's fault: 400, not 502."""
    for r in results:
        e = r.error
        if (isinstance(e, ServiceError) and e.status == 400 and e.field
                and e.field.split(".")[0].split("[")[0] in (*_REQUEST_FIELDS, *_FUSION_FIELDS)):
            raise InvalidArgument(e.message, field=e.field)


async def search_handler(request: web.Request) -> web.Response:
    deps = request.app[DEPS]
    cfg = deps.cfg
    started = time.perf_counter()
    body = await read_json(request, MatrixSearchRequest)
    mode, text, per_corpus_k = _validate_search(body, cfg)
    requested_mode = mode
    degraded: list[str] = []

    vector = body.query_vector
    embed_ms: float | None = None
    if vector is None and (mode in ("vector", "hybrid") or body.use_playbook):
        t0 = time.perf_counter()
        try:
            vector = (await _embed_query(deps, text)).vectors[0]
        except LakehouseError as exc:
            if mode == "vector" or not _is_down(exc):
                raise
            log.warning("embedding_unavailable", error=exc.message, mode=mode)
            degraded.append("embedding_unavailable")
            if mode == "hybrid":
                mode = "lexical"
        embed_ms = _ms(t0)

    vbody: dict[str, Any] = {"mode": mode, "k": per_corpus_k}
    if mode in ("vector", "hybrid"):
        vbody["query_vector"] = vector
    if mode != "vector":
        vbody["query_text"] = text
    for key in ("filter", "language", "ef_search"):
        if getattr(body, key) is not None:
            vbody[key] = getattr(body, key)
    if mode == "hybrid":
        for key in _FUSION_FIELDS:
            if getattr(body, key) is not None:
                vbody[key] = getattr(body, key)

    playbook_name = body.playbook_corpus or cfg.playbook_corpus
    use_playbook = body.use_playbook and vector is not None
    if body.use_playbook and vector is None:
        degraded.append("playbook_unavailable")
    searches = _search_all(deps, body.corpora, vbody)
    playbook_task: asyncio.Task[list[PlaybookEntry]] | None = None
    if use_playbook and vector is not None:
        playbook_task = asyncio.ensure_future(_playbook_entries(
            deps, playbook_name, vector,
            body.playbook_top_k or cfg.playbook_top_k,
            body.playbook_max_distance if body.playbook_max_distance is not None
            else cfg.playbook_max_distance))
    results = await searches

    entries: list[PlaybookEntry] = []
    if playbook_task is not None:
        try:
            entries = await playbook_task
        except LakehouseError as exc:
            if not body.allow_partial:
                raise UpstreamError(f"playbook corpus {playbook_name!r}: {_describe(exc)}") from None
            degraded.append("playbook_unavailable")

    _raise_request_fault(results)
    failed = [r for r in results if r.error is not None]
    if failed and (not body.allow_partial or len(failed) == len(results)):
        detail = "; ".join(f"corpus {r.corpus!r}: {_describe(r.error)}"
                           for r in failed if r.error is not None)
        raise UpstreamError(detail)

    ok = [r for r in results if r.error is None]
    hits = merge.merge([(r.corpus, r.hits) for r in ok], mode, cfg.rrf_k)
    ranking = merge.ranking_of(mode)
    boosted = boost.apply(hits, entries, ranking)

    relevance_info: dict[str, Any] | None = None
    if body.relevance is not None:
        hits, relevance_info = _filter_hits(hits, body.relevance)

    hits = hits[:body.k]
    for i, h in enumerate(hits):
        h["rank"] = i + 1

    out: dict[str, Any] = {
        "mode": mode,
        "requested_mode": requested_mode,
        "k": body.k,
        "hits": hits,
        "corpora": [{"corpus": r.corpus, "hits": len(r.hits), "ms": r.ms,
                     "status": "ok" if r.error is None else "failed"} for r in results],
        "failed_corpora": [{"corpus": r.corpus, "error": _describe(r.error),
                            "status": r.error.status, "code": r.error.code}
                           for r in failed if r.error is not None],
        "degraded": degraded,
        "playbook_boosted": boosted,
        "embed_ms": embed_ms,
        "took_ms": _ms(started),
    }
    if body.use_playbook:
        out["playbook"] = {"corpus": playbook_name, "entries": len(entries), "boosted": boosted}
    if relevance_info is not None:
        out["relevance"] = relevance_info
    log.info("search_done", corpora=len(results), failed=len(failed), mode=mode, k=body.k,
             hits=len(hits), boosted=boosted, ms=out["took_ms"])
    return json_response(out)


def _filter_hits(hits: list[dict[str, Any]], opt: RelevanceOption
                 ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Apply the relevance filter to merged hits; source is metadata path/source, else id."""
    chunks = []
    for h in hits:
        raw_meta = h.get("metadata")
        meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        src = meta.get("path") or meta.get("source") or h.get("id") or ""
        chunks.append(Chunk(text=str(h.get("text") or ""), source=str(src)))
    scored = relevance.score(opt.focus, chunks, opt.threshold)
    kept: list[dict[str, Any]] = []
    dropped: list[dict[str, Any]] = []
    for h, s in zip(hits, scored, strict=True):
        h["relevance"] = {"score": s.total, "signals": s.signals}
        if s.kept:
            kept.append(h)
        else:
            dropped.append({"corpus": h["corpus"], "id": h["id"], "score": s.total,
                            "signals": s.signals})
    return kept, {"threshold": opt.threshold, "kept": len(kept), "dropped": dropped}


# ---- playbook record ---------------------------------------------------------------------

async def record_handler(request: web.Request) -> web.Response:
    deps = request.app[DEPS]
    body = await read_json(request, RecordRequest)
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

    emb = await _embed_query(deps, body.query_text)
    entry = PlaybookEntry(query_text=body.query_text, answer_id=body.answer_id,
                          answer_corpus=body.answer_corpus, score=score, tags=list(body.tags))
    pid = boost.playbook_id(body.query_text, body.answer_id, body.answer_corpus)
    item = {"id": pid, "vector": emb.vectors[0], "text": body.query_text, "tags": list(body.tags),
            "metadata": boost.entry_to_metadata(entry)}
    created = False
    try:
        await deps.vectord.upsert(name, [item], model=emb.model)
    except ServiceError as exc:
        if exc.status != 404:
            raise
        # First record: create the corpus. Two first records racing both get here;
        # the loser's 409 means the winner created it, which is all we need.
        try:
            await deps.vectord.create_corpus(name, emb.dim, "cosine", model=emb.model)
            created = True
        except ServiceError as exc2:
            if exc2.status != 409:
                raise
        await deps.vectord.upsert(name, [item], model=emb.model)
    log.info("playbook_recorded", corpus=name, playbook_id=pid, answer_corpus=body.answer_corpus,
             score=score, created=created)
    return json_response({"playbook_id": pid, "playbook_corpus": name, "created": created})


# ---- relevance ---------------------------------------------------------------------------

async def relevance_handler(request: web.Request) -> web.Response:
    body = await read_json(request, RelevanceRequest)
    if not body.focus.path.strip():
        raise InvalidArgument("focus.path: must not be empty", field="focus.path")
    if not body.chunks:
        raise InvalidArgument("chunks: give at least one chunk", field="chunks")
    for i, c in enumerate(body.chunks):
        if not (c.source or c.doc_id):
            raise InvalidArgument(f"chunks[{i}]: needs source or doc_id", field=f"chunks[{i}].source")
    if not math.isfinite(body.threshold):
        raise InvalidArgument("threshold: must be a finite number", field="threshold")
    scored = relevance.score(body.focus, body.chunks, body.threshold)
    symbols = relevance.focus_symbols(body.focus)

    def row(s: relevance.Scored) -> dict[str, Any]:
        c = body.chunks[s.index]
        return {"index": s.index, "source": c.source, "doc_id": c.doc_id, "text": c.text,
                "score": s.total, "signals": s.signals}

    return json_response({
        "threshold": body.threshold,
        "kept": [row(s) for s in scored if s.kept],
        "dropped": [row(s) for s in scored if not s.kept],
        "focus": {"path": body.focus.path, "language": relevance.language_of(body.focus.path),
                  "defined_symbols": sorted(symbols.defined),
                  "imported_symbols": sorted(symbols.imported)},
    })


# ---- readiness and app -------------------------------------------------------------------

async def _probe(client: VectordClient | EmbedClient | None) -> str:
    if client is None:
        return "not_configured"
    try:
        await client.call("GET", "/readyz", timeout=5.0)
    except LakehouseError as exc:
        return f"{exc.code}: {exc.message}"
    return "ok"


async def readyz(request: web.Request) -> web.Response:
    deps = request.app[DEPS]
    vectord_state, embedd_state = await asyncio.gather(_probe(deps.vectord), _probe(deps.embed))
    components = {"vectord": vectord_state, "embedd": embedd_state}
    if vectord_state != "ok":
        return json_response({"status": "degraded", "components": components}, 503)
    # Without embedd, lexical and keyword search still work: degraded, not down.
    status = "ok" if embedd_state == "ok" else "degraded"
    return json_response({"status": status, "components": components})


def make_app(cfg: Config) -> web.Application:
    """The matrixd app: one ClientSession for vectord and embedd, opened and closed with it."""
    mcfg = cfg.matrixd
    app = make_base_app()

    async def clients_ctx(app: web.Application) -> AsyncIterator[None]:
        # limit_per_host bounds connections to vectord; a fan-out of max_corpora fits.
        connector = aiohttp.TCPConnector(limit=0, limit_per_host=max(100, 2 * mcfg.max_corpora))
        async with aiohttp.ClientSession(connector=connector) as session:
            app[DEPS] = Deps(
                cfg=mcfg,
                vectord=VectordClient(session, mcfg.vectord_url, mcfg.timeout_seconds),
                embed=make_client(session, mcfg.embedd_url, mcfg.timeout_seconds),
            )
            yield

    app.cleanup_ctx.append(clients_ctx)
    app.router.add_get("/v1/matrix/corpora", corpora_handler)
    app.router.add_post("/v1/matrix/search", search_handler)
    app.router.add_post("/v1/matrix/playbooks/record", record_handler)
    app.router.add_post("/v1/matrix/relevance", relevance_handler)
    app.router.add_get("/readyz", readyz)
    return app


def main() -> int:
    return serve("matrixd", make_app, "matrixd")


if __name__ == "__main__":
    raise SystemExit(main())
