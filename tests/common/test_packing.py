"""Parts packed by weight and count: the sync's tasks and a task's embedding rounds."""

from internal.common.packing import packed


def test_a_part_closes_before_the_item_that_would_pass_the_limit_or_the_most() -> None:
    assert packed([3, 3, 3, 1], int, limit=6) == [[3, 3], [3, 1]]
    assert packed([1, 1, 1, 1, 1], int, limit=100, most=2) == [[1, 1], [1, 1], [1]]
    # An item heavier than the limit is never split: a part of its own.
    assert packed([1, 9, 1], int, limit=5) == [[1], [9], [1]]
    assert packed([], int, limit=5) == []
