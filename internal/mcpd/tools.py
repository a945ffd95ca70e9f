"""The MCP tools: their arguments, descriptions, the route each one calls, and the body.

I/O-free. Each tool is one gateway route; its arguments are a msgspec Struct (the JSON
Schema a model sees and the validation of what it sends, errors naming the argument),
and the route's own field names are mapped back to argument names when the route
rejects a value (`query_text` -> `query`). Ranges (k, score, ...) are the route's to
check: a tool never hard-codes what the route validates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal
from urllib.parse import quote

import msgspec
from msgspec import Meta

from lakehouse.wire.answer import Generator
from lakehouse.wire.modes import MODES

# A model sees the registered modes as the schema's enum and an unknown one is refused at
# decode, naming `mode` (the route's own field is a checked string: lakehouse.wire.modes).
if TYPE_CHECKING:
    ModeChoice = str
else:
    ModeChoice = Literal[tuple(MODES)]

_QUERY = Annotated[str, Meta(description="The question or words to look for, in plain language.")]
_CORPORA = Annotated[list[str] | None, Meta(
    description="Corpus names to search (see list_corpora). Leave out to search every corpus.")]
_K = Annotated[int | None, Meta(description="How many hits to return (default 10).")]
_FILTER = Annotated[dict[str, Any] | None, Meta(description=(
    "Hard filters applied inside the search: {\"tags_any\": [..], \"tags_all\": [..], "
    "\"type\": str, \"metadata\": {..containment..}, \"id_prefix\": str, "
    "\"date\": {\"field\", \"after\", \"before\"}, \"range\": {\"field\", \"gte\", \"lte\"}, "
    "\"parent_id\": str, \"has\": [keys], \"updated_after\"/\"updated_before\": ISO 8601}."))]
_PLAYBOOK = Annotated[bool | None, Meta(description=(
    "Boost answers that earlier feedback (record_feedback) marked as right for similar "
    "questions. Default false."))]
_NOW = Annotated[str | None, Meta(description=(
    "The moment relative dates are resolved against (ISO 8601), e.g. for 'last week'. "
    "Default: now."))]


class SearchArgs(msgspec.Struct, forbid_unknown_fields=True):
    query: _QUERY
    corpora: _CORPORA = None
    mode: Annotated[ModeChoice | None, Meta(description=(
        "hybrid (default): meaning and words together, best for most questions, names "
        "(a title or id) first and typos corrected; "
        "keyword: exact substrings, a title or id equal to the query first, for names, ids, "
        "error codes and file paths; "
        "lexical: ranked words (BM25), for rare terms; vector: meaning only, for paraphrases."
    ))] = None
    k: _K = None
    filter: _FILTER = None
    use_playbook: _PLAYBOOK = None
    group_by: Annotated[str | None, Meta(description=(
        "One hit per group: \"parent\" (one per wiki page) or \"metadata.<key>\"; the "
        "best hit of each group is shown, with the group's size."))] = None
    facets: Annotated[list[str] | None, Meta(description=(
        "Count the matching items per value of these fields: \"corpus\", \"tags\", "
        "\"type\", \"metadata.<key>\". Use the counts to narrow a search with `filter`."
    ))] = None


class AnswerArgs(msgspec.Struct, forbid_unknown_fields=True):
    query: Annotated[str, Meta(description="The question to answer, in plain language.")]
    corpora: _CORPORA = None
    k: Annotated[int | None, Meta(description=(
        "How many hits the answer is drawn from (default 10)."))] = None
    filter: _FILTER = None
    use_playbook: _PLAYBOOK = None
    max_words: Annotated[int | None, Meta(description=(
        "The answer's length in words at most (default: the server's, 60)."))] = None
    generator: Annotated[Generator | None, Meta(description=(
        "extractive: the sentences of the hits that answer, quoted; model: written by the "
        "server's configured model from those passages. Default: the model when the "
        "server has one."))] = None


class NoArgs(msgspec.Struct, forbid_unknown_fields=True):
    pass


class GetItemArgs(msgspec.Struct, forbid_unknown_fields=True):
    corpus: Annotated[str, Meta(description="The corpus the item is in (a hit's `corpus`).")]
    id: Annotated[str, Meta(description="The item's id (a hit's `id`).")]


class FeedbackArgs(msgspec.Struct, forbid_unknown_fields=True):
    query: Annotated[str, Meta(description="The question exactly as it was searched.")]
    answer_id: Annotated[str, Meta(description="The id of the hit being judged.")]
    corpus: Annotated[str, Meta(description="The corpus of that hit.")]
    score: Annotated[float, Meta(description=(
        "How good the answer was: 1 = the right answer; lower = worse (the server's accepted "
        "range is enforced by the feedback route and named in its error)."))]


class AnalyzeArgs(msgspec.Struct, forbid_unknown_fields=True):
    query: _QUERY
    now: _NOW = None


class SmartSearchArgs(msgspec.Struct, forbid_unknown_fields=True):
    query: _QUERY
    corpora: _CORPORA = None
    k: _K = None
    max_iterations: Annotated[int | None, Meta(description=(
        "How many search-reflect rounds at most (default 3)."))] = None
    now: _NOW = None
    filter: _FILTER = None
    use_playbook: _PLAYBOOK = None


class Observation(msgspec.Struct, forbid_unknown_fields=True):
    text: Annotated[str, Meta(description="What was said or observed.")]
    reference_time: Annotated[str | None, Meta(description=(
        "When it was said (ISO 8601): relative dates are anchored to it."))] = None
    speaker: Annotated[str | None, Meta(description="Who said it: 'I' is replaced by this name.")] = None


class NormalizeArgs(msgspec.Struct, forbid_unknown_fields=True):
    observations: Annotated[list[Observation], Meta(description="The observations to normalize.")]
    context: Annotated[list[str] | None, Meta(description=(
        "Earlier turns that pronouns may refer to."))] = None


class SearchAutoArgs(msgspec.Struct, forbid_unknown_fields=True):
    query: _QUERY
    corpora: _CORPORA = None
    k: _K = None
    budget_ms: Annotated[float | None, Meta(description=(
        "Time budget in milliseconds: a cheaper strategy is picked when the best would "
        "exceed it."))] = None


def _drop_none(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if v is not None}


def _search_body(a: SearchArgs) -> dict[str, Any]:
    # The snippet of each hit is its highlight: the passages with the question's words.
    return _drop_none({"query_text": a.query, "corpora": a.corpora, "mode": a.mode, "k": a.k,
                       "filter": a.filter, "use_playbook": a.use_playbook,
                       "highlight": True, "group_by": a.group_by, "facets": a.facets})


def _answer_body(a: AnswerArgs) -> dict[str, Any]:
    return _drop_none({"query_text": a.query, "corpora": a.corpora, "k": a.k,
                       "filter": a.filter, "use_playbook": a.use_playbook,
                       "max_words": a.max_words, "generator": a.generator})


def _feedback_body(a: FeedbackArgs) -> dict[str, Any]:
    return {"query_text": a.query, "answer_id": a.answer_id, "answer_corpus": a.corpus,
            "score": a.score}


def _analyze_body(a: AnalyzeArgs) -> dict[str, Any]:
    return _drop_none({"query_text": a.query, "now": a.now})


def _smart_body(a: SmartSearchArgs) -> dict[str, Any]:
    return _drop_none({"query_text": a.query, "corpora": a.corpora, "k": a.k,
                       "max_iterations": a.max_iterations, "now": a.now, "filter": a.filter,
                       "use_playbook": a.use_playbook})


def _normalize_body(a: NormalizeArgs) -> dict[str, Any]:
    obs = [_drop_none(msgspec.structs.asdict(o)) for o in a.observations]
    return _drop_none({"observations": obs, "context": a.context})


def _auto_body(a: SearchAutoArgs) -> dict[str, Any]:
    return _drop_none({"query_text": a.query, "corpora": a.corpora, "k": a.k,
                       "budget_ms": a.budget_ms})


@dataclass(frozen=True)
class Tool:
    """One MCP tool = one gateway route."""

    name: str
    description: str
    args: type[msgspec.Struct]
    method: str
    path: str  # the gateway route; {corpus} / {id} filled from the arguments
    body: Callable[[Any], dict[str, Any] | None] = lambda _: None
    # route field -> argument name, for errors the route reports
    fields: dict[str, str] = field(default_factory=dict)
    # Listed only when this optional route is served (the query-intelligence routes).
    optional_route: bool = False
    # Listed only when the wiki sync is configured.
    needs_sync: bool = False
    # The search route takes a list of corpora: fill "all" when the model gave none.
    fills_corpora: bool = False
    read_only: bool = True

    def input_schema(self) -> dict[str, Any]:
        """The JSON Schema of the arguments: an object at the root, $defs inlined below it."""
        (_,), components = msgspec.json.schema_components([self.args], ref_template="#/$defs/{name}")
        schema = dict(components.pop(self.args.__name__))
        schema.pop("title", None)
        if components:
            schema["$defs"] = components
        return schema


_QUERY_FIELDS = {"query_text": "query", "answer_corpus": "corpus"}

TOOLS: tuple[Tool, ...] = (
    Tool(
        "search", (
            "Search the knowledge base: one question across every corpus (or the ones named), "
            "hits ranked together, each with the corpus it came from, its id, title, text and "
            "per-layer scores. Use mode keyword for exact names, ids, error codes and paths; "
            "the default hybrid for questions in plain language. Set use_playbook to let "
            "earlier feedback boost answers known to be right. Follow up with get_item for a "
            "hit's whole text and record_feedback to say whether a hit answered the question."),
        SearchArgs, "POST", "/v1/matrix/search", _search_body, _QUERY_FIELDS, fills_corpora=True),
    Tool(
        "answer", (
            "Answer a question from the knowledge base, with its sources: a short answer "
            "whose statements end in numbered markers [n], and the citations (corpus, id, "
            "title and the passage quoted). Use it rather than search when you want the "
            "answer itself (a fact, a date, a step to take) and will quote or act on it; use "
            "search to browse, to compare many hits or to read whole documents. When the "
            "corpora hold no answer it says so (answered: false, with the reason and the "
            "nearest hits): do not guess then. Record whether a cited hit was right with "
            "record_feedback."),
        AnswerArgs, "POST", "/v1/matrix/answer", _answer_body, _QUERY_FIELDS,
        optional_route=True),
    Tool(
        "list_corpora", (
            "List the corpora (collections of documents) that can be searched, with their item "
            "counts, language, embedding model and what each is about (its description). "
            "Use it to pick `corpora` for search; a search over all of them already weighs "
            "each by how much the question is about it."),
        NoArgs, "GET", "/v1/vectors/corpora"),
    Tool(
        "get_item", (
            "Fetch one stored item (document or chunk) by corpus and id: its whole text, title, "
            "tags and metadata. Use it after search when a hit's snippet is not enough."),
        GetItemArgs, "GET", "/v1/vectors/corpora/{corpus}/items/{id}"),
    Tool(
        "record_feedback", (
            "Teach the search which answer was right: after a search, record the question, the "
            "hit's id and corpus, and a score (1 = right answer, lower = worse). Later searches "
            "with use_playbook boost answers recorded as right for similar questions."),
        FeedbackArgs, "POST", "/v1/matrix/playbooks/record", _feedback_body, _QUERY_FIELDS,
        read_only=False),
    Tool(
        "analyze_query", (
            "Understand a question before searching: named people, places and organizations, "
            "a date range for words like 'last week', the question type (factual, temporal, "
            "comparative, multi-hop...), its complexity and sub-questions. Use it to plan "
            "your own searches; smart_search does this by itself."),
        AnalyzeArgs, "POST", "/v1/matrix/analyze", _analyze_body, _QUERY_FIELDS,
        optional_route=True),
    Tool(
        "smart_search", (
            "Answer a hard question: splits multi-hop and comparative questions into "
            "sub-queries, turns dates into filters, searches, checks whether every part is "
            "covered and searches again for what is missing. Returns the hits plus the plan "
            "and the iterations. Slower than search: use it for questions that need several "
            "facts or dates; use search for a simple lookup."),
        SmartSearchArgs, "POST", "/v1/matrix/smart_search", _smart_body, _QUERY_FIELDS,
        optional_route=True),
    Tool(
        "normalize_observations", (
            "Rewrite observations (e.g. conversation turns) so they can be found later: "
            "pronouns and 'I'/'you' replaced by who they mean, relative dates ('yesterday') "
            "turned into absolute ones from reference_time, keywords extracted. The originals "
            "are kept in the result. Does not store anything."),
        NormalizeArgs, "POST", "/v1/matrix/normalize", _normalize_body, optional_route=True),
    Tool(
        "search_auto", (
            "Search with the strategy picked for you (keyword for quoted strings and "
            "identifiers, lexical, vector, hybrid, or smart for multi-hop and temporal "
            "questions), within an optional time budget. Returns the hits, the strategy and "
            "why. Use it when unsure which search mode fits."),
        SearchAutoArgs, "POST", "/v1/matrix/search_auto", _auto_body, _QUERY_FIELDS,
        optional_route=True),
    Tool(
        "sync_status", (
            "Show the wiki sync: the folder and corpus it keeps in step, whether a run is "
            "going on, the last run's counts and errors, and when the next run is due."),
        NoArgs, "GET", "/v1/sync/status", needs_sync=True),
    Tool(
        "sync_now", (
            "Sync the wiki folder into its corpus now (pages added, changed or deleted since "
            "the last run), then return the run's counts. Use it after editing pages when the "
            "next scheduled run is too far off."),
        NoArgs, "POST", "/v1/sync/run", lambda _: {}, needs_sync=True, read_only=False),
)

BY_NAME = {t.name: t for t in TOOLS}


def route_path(tool: Tool, args: msgspec.Struct) -> str:
    """The route with its path parameters filled (quoted) from the arguments."""
    path = tool.path
    for name in ("corpus", "id"):
        if "{" + name + "}" in path:
            path = path.replace("{" + name + "}", quote(str(getattr(args, name)), safe=""))
    return path


def argument_name(tool: Tool, route_field: str | None) -> str | None:
    """The tool argument a route's error field refers to ('query_text' -> 'query')."""
    if not route_field:
        return None
    head, sep, rest = route_field.partition(".")
    bracket = head.find("[")
    if bracket > 0:
        head, rest, sep = head[:bracket], head[bracket:] + (sep + rest if sep else ""), ""
    name = tool.fields.get(head, head)
    return f"{name}{sep}{rest}" if rest else name
