"""The gateway's public routes: which daemon serves each, and what it takes and gives.

One table drives both the router (so metrics are labelled per route) and
/openapi.json (so the document cannot drift from what is served).
"""

from __future__ import annotations

from dataclasses import dataclass

from internal.gateway import schemas as s

# Upstream name -> the GatewayConfig field holding its per-route timeout.
TIMEOUT_FIELDS = {
    "embedd": "embed_timeout",
    "vectord": "vectors_timeout",
    "matrixd": "matrix_timeout",
    "syncd": "sync_timeout",
    "mcpd": "mcp_timeout",
}


@dataclass(frozen=True)
class Route:
    method: str  # "*" for a catch-all passthrough
    path: str  # aiohttp/OpenAPI template
    upstream: str
    summary: str
    request: type | None = None
    response: type | None = None
    status: int = 200
    # Pass the client's Authorization on: mcpd calls the gateway back as that client.
    forward_auth: bool = False
    # The events the route sends as server-sent events when the request asks to stream.
    events: tuple[type, ...] = ()


_C = "/v1/vectors/corpora/{name}"
_D = "/v1/corpora/{name}/documents"

ROUTES: tuple[Route, ...] = (
    # Documents first: text in, chunked and embedded by the service (vectord's task runner).
    Route("POST", _D, "vectord",
          "Add documents as text (a task: 202 at once, 200 with ?wait=true once done)",
          s.AddDocuments, s.Task, 202),
    Route("GET", _D, "vectord", "List documents with content hashes (keyset pages)", None,
          s.DocumentsPage),
    Route("POST", f"{_D}/delete", "vectord", "Delete documents by id with their chunks (a task)",
          s.DeleteDocuments, s.Task, 202),
    Route("GET", f"{_D}/{{id}}", "vectord", "Get a document by the id it was given", None,
          s.StoredDocument),
    Route("DELETE", f"{_D}/{{id}}", "vectord", "Delete a document with its chunks (a task)",
          None, s.Task, 202),
    Route("GET", "/v1/tasks", "vectord",
          "List tasks, newest first (?corpus=&state=&kind=&from=&limit=)", None, s.TaskList),
    Route("GET", "/v1/tasks/{task_id}", "vectord", "Get a task (?wait=true: once it ended)",
          None, s.Task),
    Route("POST", "/v1/embed", "embedd", "Embed texts", s.EmbedRequest, s.EmbedResponse),
    Route("GET", "/v1/embed/models", "embedd", "List embedding models", None, s.ModelsResponse),
    Route("POST", "/v1/vectors/corpora", "vectord", "Create a corpus", s.CreateCorpus, s.Corpus, 201),
    Route("GET", "/v1/vectors/corpora", "vectord", "List corpora", None, s.CorpusList),
    Route("GET", _C, "vectord", "Get a corpus", None, s.Corpus),
    Route("PATCH", _C, "vectord", "Change a corpus's description", s.UpdateCorpus, s.Corpus),
    Route("DELETE", _C, "vectord", "Delete a corpus", None, s.CorpusDeleted),
    Route("GET", f"{_C}/profile", "vectord",
          "What the corpus is about: its description and most distinctive lexemes", None,
          s.CorpusProfile),
    Route("POST", f"{_C}/index", "vectord", "Build the corpus's vector index now", None,
          s.IndexBuilt),
    Route("POST", f"{_C}/index/settings", "vectord",
          "Change the corpus's vector index settings (a new graph is built in the background)",
          s.IndexSettingsRequest, s.IndexSettingsChanged, 202),
    Route("POST", f"{_C}/reembed", "vectord",
          "Embed the corpus's texts again with another model, in the background",
          s.ReembedRequest, s.ReembedStarted, 202),
    Route("POST", f"{_C}/convert", "vectord",
          "Store the corpus's vectors in another precision, in the background",
          s.ConvertRequest, s.ConvertStarted, 202),
    Route("POST", f"{_C}/items", "vectord", "Upsert items (all or nothing)", s.UpsertRequest, s.Upserted),
    Route("GET", f"{_C}/items/{{id}}", "vectord", "Get one item (?include=vector: with its vector)",
          None, s.StoredItem),
    Route("DELETE", f"{_C}/items/{{id}}", "vectord", "Delete one item", None, s.ItemsDeleted),
    Route("POST", f"{_C}/items/delete", "vectord", "Delete items by id", s.DeleteItems, s.ItemsDeleted),
    Route("GET", f"{_C}/ids", "vectord", "List ids with content hashes (keyset pages)", None, s.IdsPage),
    Route("POST", f"{_C}/search", "vectord", "Search one corpus", s.SearchRequest, s.SearchResponse),
    Route("POST", "/v1/vectors/search", "vectord", "Search several corpora in one call (errors per corpus)",
          s.MultiSearchRequest, s.MultiSearchResponse),
    Route("GET", "/v1/vectors/spaces", "vectord", "Corpora by embedding space (model, dimension)",
          None, s.SpacesResponse),
    Route("GET", "/v1/vectors/storage", "vectord",
          "What the corpora take: rows, table and index bytes, memory held, the warm-up",
          None, s.StorageStatus),
    Route("GET", "/v1/matrix/corpora", "matrixd", "Corpora available to matrix search", None, s.MatrixCorpora),
    Route("POST", "/v1/matrix/search", "matrixd", "Search many corpora at once", s.MatrixSearchRequest, s.MatrixSearchResponse),
    Route("POST", "/v1/matrix/answer", "matrixd",
          "Answer a question from the corpora, each statement cited (`stream`: server-sent "
          "events, the citations first)", s.AnswerRequest, s.AnswerResponse,
          events=s.ANSWER_EVENTS),
    Route("POST", "/v1/matrix/answer/feedback", "matrixd",
          "Record feedback on an answer: each of its cited hits, with the answer's score",
          s.AnswerFeedback, s.AnswerFeedbackResponse),
    Route("POST", "/v1/matrix/playbooks/record", "matrixd", "Record feedback on a hit", s.RecordRequest, s.RecordResponse),
    Route("GET", "/v1/matrix/playbooks", "matrixd",
          "List playbook entries, newest first (?answer_id=&answer_corpus=&limit=&playbook_corpus=)",
          None, s.PlaybookList),
    Route("DELETE", "/v1/matrix/playbooks/{playbook_id}", "matrixd",
          "Delete one playbook entry (?playbook_corpus=)", None, s.PlaybookDeleted),
    Route("POST", "/v1/matrix/ranker/train", "matrixd",
          "Train the learned ranker on a playbook's records (202 at once; 200 with `wait`)",
          s.TrainRanker, s.RankerModel),
    Route("GET", "/v1/matrix/ranker", "matrixd",
          "The learned ranker's models, trainings and failures (?playbook_corpus=&limit=)",
          None, s.RankerStatus),
    Route("POST", "/v1/matrix/relevance", "matrixd", "Score chunks against a focus file", s.RelevanceRequest, s.RelevanceResponse),
    Route("POST", "/v1/matrix/analyze", "matrixd", "Analyse a query: entities, time range, type, sub-queries",
          s.AnalyzeRequest, s.AnalyzeResponse),
    Route("POST", "/v1/matrix/normalize", "matrixd", "Normalise observations: coreference, dates, keywords",
          s.NormalizeRequest, s.NormalizeResponse),
    Route("POST", "/v1/matrix/smart_search", "matrixd", "Planned search with reflection",
          s.SmartSearchRequest, s.SmartSearchResponse),
    Route("POST", "/v1/matrix/search_auto", "matrixd", "Search with a strategy chosen for the query",
          s.SearchAutoRequest, s.SearchAutoResponse),
    Route("POST", "/v1/sync/run", "syncd", "Run one wiki sync now", None, s.SyncRun),
    Route("GET", "/v1/sync/status", "syncd", "Wiki sync status", None, s.SyncStatus),
    Route("POST", "/v1/keys", "vectord", "Create an API key (admin; the secret is shown once)",
          s.CreateKey, s.CreatedKey, 201),
    Route("GET", "/v1/keys", "vectord", "List API keys (admin; never a secret)", None, s.KeyList),
    Route("DELETE", "/v1/keys/{key_id}", "vectord", "Revoke an API key (admin)", None,
          s.KeyRevoked),
    Route("*", "/mcp", "mcpd", "MCP over streamable HTTP (JSON-RPC): Lakehouse's tools for AI agents",
          forward_auth=True),
    # Anything else under a daemon's prefix is passed through unchanged.
    Route("*", "/v1/embed/{tail:.*}", "embedd", "Other embedd routes (passthrough)"),
    Route("*", "/v1/vectors/{tail:.*}", "vectord", "Other vectord routes (passthrough)"),
    Route("*", "/v1/matrix/{tail:.*}", "matrixd", "Other matrixd routes (passthrough)"),
    Route("*", "/v1/sync/{tail:.*}", "syncd", "Other syncd routes (passthrough)"),
    Route("*", "/v1/corpora/{tail:.*}", "vectord", "Other document routes (passthrough)"),
)

# POST routes that read only (or give the same result when sent twice): a connection lost
# mid-call is retried on the next replica. Writes are not: a lost answer to an
# upsert may follow a commit, and the client must decide.
RETRY_SAFE_POSTS = frozenset({
    "/v1/embed", f"{_C}/search", "/v1/vectors/search", "/v1/matrix/search",
    "/v1/matrix/relevance",
})

# POST routes that only read but are not retried (their answer depends on more than the
# request, or they are long): with the retry-safe ones and the safe methods, they use the
# gateway's read connections; every other call is a write (gateway/server.py).
READ_POSTS = RETRY_SAFE_POSTS | frozenset({
    "/v1/matrix/analyze", "/v1/matrix/normalize", "/v1/matrix/smart_search",
    "/v1/matrix/search_auto", "/v1/matrix/answer", "/mcp",
})
