"""Which text of each group is nearest a query vector (no I/O)."""

from __future__ import annotations

import numpy as np

from internal.embedd.nearest import nearest_each


def test_each_group_gets_its_own_most_similar_row() -> None:
    rows = np.array([[0.0, 1.0], [0.9, 0.1], [-1.0, 0.0], [0.0, -1.0], [0.5, 0.5]],
                    dtype=np.float32)
    assert nearest_each([1.0, 0.0], rows, [3, 2]) == [1, 1]
    assert nearest_each([0.0, 1.0], rows, [3, 2]) == [0, 1]
    assert nearest_each([1.0, 0.0], rows[:0], []) == []
