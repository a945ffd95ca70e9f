"""Which text of each group is nearest a query vector (no I/O): cosine similarity."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt


def nearest_each(query: Sequence[float], vectors: npt.NDArray[np.float32],
                 sizes: Sequence[int]) -> list[int]:
    """Per group (consecutive rows of `vectors`, `sizes` rows each), the index within the
    group of the row most similar (cosine) to `query`; the first on a tie."""
    q = np.asarray(query, dtype=np.float32)
    m = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(m, axis=1) * (np.linalg.norm(q) or 1.0)
    sims = (m @ q) / np.where(norms > 0, norms, 1.0)
    out: list[int] = []
    at = 0
    for size in sizes:
        out.append(int(np.argmax(sims[at:at + size])))
        at += size
    return out
