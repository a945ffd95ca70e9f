"""The storage gauges of the gateway's /metrics: what each corpus takes and the memory
the stack holds, as vectord's GET /v1/vectors/storage reports them at a scrape."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Gauge

from internal.api.responses import StorageStatus


class StorageGauges:
    """The gauges, registered on first use (a gateway without vectord shows none)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        corpus = ("corpus", "precision")
        self.rows = Gauge("lakehouse_corpus_rows", "Items stored in the corpus", corpus,
                          registry=registry)
        self.table = Gauge("lakehouse_corpus_table_bytes", "The corpus's items table on disk "
                           "(vectors, texts, metadata, with TOAST)", corpus, registry=registry)
        self.index = Gauge("lakehouse_corpus_index_bytes", "The corpus's vector index (HNSW "
                           "graph) on disk", corpus, registry=registry)
        self.other = Gauge("lakehouse_corpus_other_bytes", "The corpus's other indexes and "
                           "its lexical postings on disk", corpus, registry=registry)
        self.fits = Gauge("lakehouse_corpus_index_fits_shared_buffers", "1 when the corpus's "
                          "vector index is no larger than PostgreSQL's shared_buffers",
                          corpus, registry=registry)
        self.shared = Gauge("lakehouse_postgres_shared_buffers_bytes",
                            "PostgreSQL's shared_buffers", registry=registry)
        self.held = Gauge("lakehouse_memory_held_bytes", "Memory held now: vectord's PSS; "
                          "PostgreSQL's processes' own pages plus its shared memory's resident "
                          "pages once", ("process",), registry=registry)

    def publish(self, status: StorageStatus) -> None:
        """Set every gauge from one answer; a corpus absent from it loses its series."""
        for gauge in (self.rows, self.table, self.index, self.other, self.fits):
            gauge.clear()
        for c in status.corpora:
            labels = (c.name, c.precision)
            self.rows.labels(*labels).set(c.rows)
            self.table.labels(*labels).set(c.table_bytes)
            self.index.labels(*labels).set(c.index_bytes)
            self.other.labels(*labels).set(c.other_index_bytes + c.lexical_bytes)
            self.fits.labels(*labels).set(1.0 if c.index_fits_shared_buffers else 0.0)
        self.shared.set(status.shared_buffers_bytes)
        self.held.labels("vectord").set(status.memory.vectord_bytes)
        if status.memory.postgres_bytes is not None:
            self.held.labels("postgres").set(status.memory.postgres_bytes)
