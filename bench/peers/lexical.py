"""The lexical references: tantivy in-process and bm25s (over its own tokens or over
PostgreSQL's lexemes), each answering a query text with the top k ids."""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from internal.evaluation import beir

Ranked = dict[str, list[str]]


def repeated(docs: Sequence[beir.Doc], total: int) -> list[tuple[str, beir.Doc]]:
    """total documents: docs repeated, with new ids after the first pass."""
    return [(d.id if i < len(docs) else f"{d.id}~{i // len(docs)}", d)
            for i in range(total) for d in [docs[i % len(docs)]]]


class Tantivy:
    """tantivy in-process: English stemming tokenizer over title + text, BM25 k1 1.2 b 0.75."""

    def __init__(self, docs: Sequence[beir.Doc], total: int, k: int, threads: int) -> None:
        import tantivy  # type: ignore[import-not-found,import-untyped,unused-ignore]

        sb = tantivy.SchemaBuilder()
        sb.add_text_field("id", stored=True, tokenizer_name="raw")
        sb.add_text_field("body", stored=False, tokenizer_name="en_stem")
        self.index, self.k = tantivy.Index(sb.build()), k
        writer = self.index.writer(heap_size=200_000_000, num_threads=1)
        for doc_id, d in repeated(docs, total):
            writer.add_document(tantivy.Document(id=doc_id, body=f"{d.title} {d.text}"))
        writer.commit()
        writer.wait_merging_threads()
        self.index.reload()
        self.searcher = self.index.searcher()
        self.pool = ThreadPoolExecutor(threads)

    def query(self, text: str) -> list[str]:
        q = self.index.parse_query(re.sub(r"[^\w]+", " ", text).strip() or "_", ["body"])
        return [self.searcher.doc(addr)["id"][0] for _, addr in self.searcher.search(q, self.k).hits]

    def search(self) -> Callable[[str], Awaitable[list[str]]]:
        async def run(text: str) -> list[str]:
            return self.query(text)
        return run

    def qps(self, texts: list[str]) -> float:
        started = time.perf_counter()
        list(self.pool.map(self.query, texts))
        return len(texts) / (time.perf_counter() - started)


def bm25s_run(corpus: list[Any], docs: Sequence[beir.Doc], queries: dict[str, Any], k: int,
              tokenize: bool) -> Ranked:
    """bm25s (k1 1.2, b 0.75) over the documents: its own English tokens and stemmer
    (tokenize), or tokens given (PostgreSQL's lexemes: the scoring compared without the
    analyzer)."""
    import bm25s  # type: ignore[import-untyped]
    import Stemmer  # type: ignore[import-not-found]

    qids = list(queries)
    texts = [queries[q] for q in qids]
    if tokenize:
        stemmer = Stemmer.Stemmer("english")
        corpus = bm25s.tokenize(corpus, stopwords="en", stemmer=stemmer, show_progress=False)
        texts = bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False)
    retriever = bm25s.BM25(k1=1.2, b=0.75)
    retriever.index(corpus, show_progress=False)
    results, _ = retriever.retrieve(texts, k=k, show_progress=False)
    return {qid: [docs[int(results[i, j])].id for j in range(k)] for i, qid in enumerate(qids)}
