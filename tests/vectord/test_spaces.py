"""Which query vector a corpus is searched with (internal.vectord.search.query_vectors, no I/O)."""

from __future__ import annotations

from datetime import UTC, datetime

from internal.api.vectord import Corpus, QueryVector
from internal.vectord.search import query_vectors


def corpus(dim: int, model: str | None) -> Corpus:
    return Corpus(id=1, name="c", dim=dim, metric="cosine", language="english", model=model,
                  keyword_index="trgm", created_at=datetime.now(UTC))


def test_without_query_vectors_the_request_vector_is_used_as_ever() -> None:
    assert query_vectors.choose(corpus(3, "m"), [1.0] * 384, None) == query_vectors.Choice([1.0] * 384,
                                                                             query_vectors.PLAIN)


def test_each_corpus_takes_its_models_vector() -> None:
    qvs = [QueryVector("local", [0.1] * 384), QueryVector("nomic", [0.2] * 768)]
    assert query_vectors.choose(corpus(768, "nomic"), [0.1] * 384, qvs) == query_vectors.Choice([0.2] * 768, 1)
    assert query_vectors.choose(corpus(384, "local"), [0.1] * 384, qvs).space == 0
    # No model recorded: the request's vector when its dimension fits.
    assert query_vectors.choose(corpus(384, None), [0.1] * 384, qvs).vector == [0.1] * 384
    skipped = query_vectors.choose(corpus(3, None), [0.1] * 384, qvs)
    assert skipped.vector is None and "dimension 3" in (skipped.skipped or "")
    missing = query_vectors.choose(corpus(1024, "openai"), [0.1] * 384, qvs)
    assert missing.vector is None and "'openai'" in (missing.skipped or "")
    wrong = query_vectors.choose(corpus(512, "nomic"), [0.1] * 384, qvs)
    assert wrong.vector is None and "768 dimensions" in (wrong.skipped or "")


def test_the_shared_graph_serves_many_corpora_holding_enough_of_their_space() -> None:
    assert not query_vectors.use_shared([500.0], [500.0, 10_000.0])  # one corpus: its own graph
    assert query_vectors.use_shared([500.0] * 16, [500.0] * 16 + [8000.0])  # half of it, 16 corpora
    assert not query_vectors.use_shared([500.0] * 2, [500.0] * 2 + [8000.0])  # 2 small of a large space
    assert query_vectors.use_shared([500.0] * 2, [500.0] * 2)  # the whole space
    assert query_vectors.use_shared([-1.0] * 3, [-1.0] * 4)  # sizes unknown: by corpora
    assert not query_vectors.use_shared([-1.0] * 2, [-1.0] * 5)
