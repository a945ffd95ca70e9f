"""Which query vector a corpus is searched with (internal.vectord.spaces, no I/O)."""

from __future__ import annotations

from datetime import UTC, datetime

from internal.api.vectord import Corpus, QueryVector
from internal.vectord import spaces


def corpus(dim: int, model: str | None) -> Corpus:
    return Corpus(id=1, name="c", dim=dim, metric="cosine", language="english", model=model,
                  keyword_index="trgm", created_at=datetime.now(UTC))


def test_without_query_vectors_the_request_vector_is_used_as_ever() -> None:
    assert spaces.choose(corpus(3, "m"), [1.0] * 384, None) == spaces.Choice([1.0] * 384,
                                                                             spaces.PLAIN)


def test_each_corpus_takes_its_models_vector() -> None:
    qvs = [QueryVector("local", [0.1] * 384), QueryVector("nomic", [0.2] * 768)]
    assert spaces.choose(corpus(768, "nomic"), [0.1] * 384, qvs) == spaces.Choice([0.2] * 768, 1)
    assert spaces.choose(corpus(384, "local"), [0.1] * 384, qvs).space == 0
    # No model recorded: the request's vector when its dimension fits.
    assert spaces.choose(corpus(384, None), [0.1] * 384, qvs).vector == [0.1] * 384
    skipped = spaces.choose(corpus(3, None), [0.1] * 384, qvs)
    assert skipped.vector is None and "dimension 3" in (skipped.skipped or "")
    missing = spaces.choose(corpus(1024, "openai"), [0.1] * 384, qvs)
    assert missing.vector is None and "'openai'" in (missing.skipped or "")
    wrong = spaces.choose(corpus(512, "nomic"), [0.1] * 384, qvs)
    assert wrong.vector is None and "768 dimensions" in (wrong.skipped or "")


def test_the_shared_graph_serves_many_corpora_holding_enough_of_their_space() -> None:
    assert not spaces.use_shared([500.0], [500.0, 10_000.0])  # one corpus: its own graph
    assert spaces.use_shared([500.0] * 16, [500.0] * 16 + [8000.0])  # half of it, 16 corpora
    assert not spaces.use_shared([500.0] * 2, [500.0] * 2 + [8000.0])  # 2 small of a large space
    assert spaces.use_shared([500.0] * 2, [500.0] * 2)  # the whole space
    assert spaces.use_shared([-1.0] * 3, [-1.0] * 4)  # sizes unknown: by corpora
    assert not spaces.use_shared([-1.0] * 2, [-1.0] * 5)
