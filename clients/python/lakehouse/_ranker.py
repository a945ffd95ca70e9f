"""AsyncClient's learned-ranker calls (POST /v1/matrix/ranker/train, GET /v1/matrix/ranker)."""

from __future__ import annotations

from collections.abc import Sequence

from lakehouse._transport import Transport, body_of
from lakehouse.wire.ranker import RankerModel, RankerStatus, RankerTraining


class RankerCalls:
    """Training the learned ranker and reading its models (mixed into AsyncClient)."""

    _http: Transport

    async def train_ranker(self, *, corpora: str | Sequence[str] | None = None,
                           playbook_corpus: str | None = None,
                           wait: bool = True) -> RankerModel | RankerTraining:
        """Train the learned ranker on a playbook's records (the default playbook; every
        corpus its records answer, or `corpora`). `wait`: the stored model with its
        cross-validated figures; else the training under way (it goes on in the stack)."""
        names = [corpora] if isinstance(corpora, str) else (
            list(corpora) if corpora is not None else None)
        body = body_of(corpora=names, playbook_corpus=playbook_corpus, wait=wait)
        if wait:
            return await self._http.call("POST", "/v1/matrix/ranker/train", RankerModel,
                                         body=body)
        return await self._http.call("POST", "/v1/matrix/ranker/train", RankerTraining,
                                     body=body)

    async def rankers(self, *, playbook_corpus: str | None = None,
                      limit: int = 20) -> RankerStatus:
        """The learned ranker's models (newest first; `current` marks the ones searches
        use), the trainings under way and the last failure, for the corpora you see."""
        params: dict[str, str | int] = {"limit": limit}
        if playbook_corpus:
            params["playbook_corpus"] = playbook_corpus
        return await self._http.call("GET", "/v1/matrix/ranker", RankerStatus, params=params)
