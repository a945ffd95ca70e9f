"""LRU of embeddings keyed by (model, sha256 of the exact text sent to the model)."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Key = tuple[str, bytes]


@dataclass(frozen=True)
class Entry:
    vector: npt.NDArray[np.float32]  # read-only, shared by every hit
    truncated: bool


def key(model: str, text: str) -> Key:
    """Cache key; text is what the model saw (with any input_type prefix)."""
    return (model, hashlib.sha256(text.encode("utf-8")).digest())


class LRUCache:
    """Not thread-safe: used only from the event loop. size 0 disables it."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._data: OrderedDict[Key, Entry] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._data)

    def get(self, k: Key) -> Entry | None:
        entry = self._data.get(k)
        if entry is None:
            self.misses += 1
            return None
        self._data.move_to_end(k)
        self.hits += 1
        return entry

    def put(self, k: Key, vector: npt.NDArray[np.float32], truncated: bool) -> None:
        if self.size <= 0:
            return
        vec = np.array(vector, dtype=np.float32, copy=True)
        vec.flags.writeable = False
        self._data[k] = Entry(vec, truncated)
        self._data.move_to_end(k)
        while len(self._data) > self.size:
            self._data.popitem(last=False)
