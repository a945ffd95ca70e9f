"""A matrix search checked once, into the plan the search runs (`check` -> SearchPlan; no I/O).

The decode checked every range (lakehouse.wire.search); here what it cannot: the
configured limits, the mode (registered, and what it needs: a mode that embeds may be
given text alone, matrixd embeds it), the fusion method and its layers, the corpora and
their weights, the playbook's options, the downgrade keys. Everything after reads the
plan, never the request: vectord's request is built here once (`vectord`: its query
vectors and the playbook's items are added when known), with the fusion's options only
for a mode that fuses.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from internal.api import search, validate
from internal.api.matrixd import MatrixSearchRequest, RelevanceOption
from internal.api.vectord import Highlight, IncludeRef, MultiSearchRequest, QueryVector
from internal.common.errors import InvalidArgument
from internal.config import MatrixdConfig
from internal.matrixd import downgrade
from lakehouse.wire.modes import ModeSpec
from lakehouse.wire.search import SEARCH_FIELDS

# The fields a mode that does not fuse leaves at vectord's default (sent only to a mode
# whose registry entry says `fusion`).
FUSION_FIELDS = ("fusion", "rrf_k", "weights", "candidates", "prefer", "prf")
# vectord's request fields that are the caller's own (a 400 on one is the caller's, for
# every corpus): the search's fields but the query vector, whose fit is per corpus.
CALLERS_FIELDS = {f: f for f in (*SEARCH_FIELDS, "corpus_weights") if f != "query_vector"}


@dataclass(frozen=True)
class Playbook:
    """The playbook's part in a search: applied (boost and recall) or only read (the
    disputed gate), where, and how far its lookup reaches."""

    corpus: str
    use: bool  # use_playbook: boost and recall
    read: bool  # looked up at all (use, or the downgrade gate's `disputed`)
    top_k: int
    max_distance: float


@dataclass(frozen=True)
class SearchPlan:
    """What every step of a matrix search reads (never the request)."""

    mode: ModeSpec
    text: str  # stripped
    query_vector: list[float] | None  # the caller's own
    k: int
    corpora: list[str] | None
    allow_partial: bool
    excluded: list[str]  # corpora None: every corpus but these (the playbooks)
    playbook: Playbook
    rules: downgrade.Rules
    relevance: RelevanceOption | None
    highlight_chars: int | None  # semantic highlights' fragment size; None: not asked
    explain: bool  # with the learned ranker: each hit's largest feature contributions
    request: MultiSearchRequest  # vectord's, but the query vectors and `include`

    def vectord(self, mode: ModeSpec, vector: list[float] | None,
                vectors: list[QueryVector] | None, include: list[IncludeRef]
                ) -> MultiSearchRequest:
        """vectord's request in `mode` (the planned one, or the one it degraded to),
        with the query vectors (a mode that embeds) and the playbook's items."""
        req = self.request
        if mode is not self.mode and not mode.fusion:
            req = msgspec.structs.replace(req, **dict.fromkeys(FUSION_FIELDS))
        return msgspec.structs.replace(
            req, mode=mode.name, query_vector=vector if mode.embeds else None,
            query_vectors=vectors if mode.embeds else None,
            query_text=self.text if mode.needs != "vector" else None, include=include)


def _check_range(value: int, lo: int, hi: int, field: str) -> None:
    if not lo <= value <= hi:
        raise InvalidArgument(f"{field}: must be in {lo}..{hi}, got {value}", field=field)


def _mode(body: MatrixSearchRequest, text: str) -> ModeSpec:
    """The mode, and the query it needs: text, else a vector (given, or the text's
    embedding when the mode embeds)."""
    if body.query_vector is not None and not body.query_vector:
        raise InvalidArgument("query_vector: must not be empty", field="query_vector")
    if not text and body.query_vector is None:
        raise InvalidArgument("query_text: give query_text or query_vector", field="query_text")
    mode = search.mode_of(body.mode, bool(text))
    search.needs(mode, text=bool(text),
                 vector=body.query_vector is not None or (mode.embeds and bool(text)))
    return mode


def _playbook(body: MatrixSearchRequest, cfg: MatrixdConfig, rules: downgrade.Rules) -> Playbook:
    if body.playbook_corpus is not None:
        validate.corpus_name(body.playbook_corpus, "playbook_corpus")
    if body.playbook_top_k is not None:
        _check_range(body.playbook_top_k, 1, cfg.max_k, "playbook_top_k")
    return Playbook(
        corpus=body.playbook_corpus or cfg.playbook_corpus, use=body.use_playbook,
        read=body.use_playbook or rules.disputed,
        top_k=body.playbook_top_k or cfg.playbook_top_k,
        max_distance=(body.playbook_max_distance if body.playbook_max_distance is not None
                      else cfg.playbook_max_distance))


def _downgrade_rules(body: MatrixSearchRequest, cfg: MatrixdConfig) -> downgrade.Rules:
    """`[matrixd] downgrade_*` with the request's `downgrade` keys over them; 400 naming a key."""
    defaults = downgrade.Rules(cfg.downgrade_max_distance, cfg.downgrade_min_score,
                               cfg.downgrade_max_age_days, cfg.downgrade_disputed)
    if body.downgrade is None:
        return defaults
    given = {k: v for k, v in msgspec.structs.asdict(body.downgrade).items() if v is not None}
    try:
        return downgrade.combine(defaults, given)
    except downgrade.RuleError as exc:
        raise InvalidArgument(f"downgrade.{exc}", field=f"downgrade.{exc.key}") from None


def _request(body: MatrixSearchRequest, mode: ModeSpec, text: str, depth: int,
             excluded: list[str]) -> MultiSearchRequest:
    """vectord's request: the search's own fields as given (a struct built, not decoded:
    nothing is checked again on this side), at the depth matrixd ranks."""
    fields = {f: getattr(body, f) for f in SEARCH_FIELDS}
    if not mode.fusion:
        fields.update(dict.fromkeys(FUSION_FIELDS))
    fields.update(mode=mode.name, k=depth, query_text=text if mode.needs != "vector" else None)
    return MultiSearchRequest(**fields, corpora=body.corpora,
                              corpus_weights=body.corpus_weights or None,
                              corpus_selection=body.corpus_selection, exclude_corpora=excluded)


def check(body: MatrixSearchRequest, cfg: MatrixdConfig) -> SearchPlan:
    """matrixd's one check of a search (400 naming the field); vectord checks its own
    request on its side."""
    validate.corpora(body.corpora, cfg.max_corpora)
    if body.corpus_weights is not None:
        validate.corpus_weights(body.corpus_weights, body.corpora if body.corpora is not None
                                else list(body.corpus_weights))
    _check_range(body.k, 1, cfg.max_k, "k")
    per_corpus_k = body.per_corpus_k if body.per_corpus_k is not None else body.k
    _check_range(per_corpus_k, 1, cfg.max_k, "per_corpus_k")
    text = (body.query_text or "").strip()
    mode = _mode(body, text)
    search.fusion_of(body.fusion)
    if mode.fusion:
        search.layer_weights(body.weights)
    rules = _downgrade_rules(body, cfg)
    playbook = _playbook(body, cfg, rules)
    if body.relevance is not None and not body.relevance.focus.path.strip():
        raise InvalidArgument("relevance.focus.path: must not be empty", field="relevance.focus.path")
    # Every corpus but the playbooks: recorded questions are not answers.
    excluded = sorted({cfg.playbook_corpus, playbook.corpus}) if body.corpora is None else []
    highlight = body.highlight
    chars = (None if not highlight else highlight.fragment_chars
             if isinstance(highlight, Highlight) else Highlight().fragment_chars)
    return SearchPlan(
        mode=mode, text=text, query_vector=body.query_vector, k=body.k, corpora=body.corpora,
        allow_partial=body.allow_partial, excluded=excluded, playbook=playbook, rules=rules,
        relevance=body.relevance, highlight_chars=chars, explain=body.explain,
        # The depth of the merged list: room for the boost and the filters to reorder it.
        request=_request(body, mode, text, max(body.k, per_corpus_k), excluded))
