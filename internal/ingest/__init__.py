"""One ingest pipeline for every reader: the CLI's JSONL files, syncd's markdown pages
and the evaluation's data sets turn their input into `Doc`s and hand them to
`Pipeline`, which keeps only what changed (content hashes against the corpus's /ids),
embeds in batches, upserts, deletes what is stale once the new content is in, and
isolates a document (or a page) the stack refuses while the rest goes in."""

from internal.ingest.pipeline import (
    Doc,
    Embedder,
    Pipeline,
    Report,
    StackFailure,
    Store,
    changed,
    retrying,
)

__all__ = ["Doc", "Embedder", "Pipeline", "Report", "StackFailure", "Store", "changed", "retrying"]
