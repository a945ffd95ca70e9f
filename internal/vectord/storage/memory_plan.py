"""How much memory a corpus's vectors take, and what a build or a warm-up may use (I/O-free).

The figures are pgvector's layout, checked against the sizes measured at 100k and 1M
(docs/SCALING.md, "Memory for N vectors of dimension D"): a 384-d vector is 4 D + 8 =
1,544 bytes as `vector`, 2 D + 8 = 776 as `halfvec`; its HNSW element at m 16 adds about
500 bytes of neighbours and tuple headers (2,048 and 1,170 bytes an element measured).
"""

from __future__ import annotations

MIB = 2**20
# An HNSW element's bytes beyond its vector, per unit of m (layer 0 keeps 2 m neighbours
# of 6 bytes, the upper layers a few more, plus the tuples' headers): 504 / 16 measured
# float32, 394 / 16 float16; the larger is kept so a build is never planned short.
NEIGHBOUR_BYTES_PER_M = 32
BUILD_FLOOR = 64 * MIB  # PostgreSQL's own default maintenance_work_mem
BUILD_SHARE = 0.5  # of the memory available: a build never takes the rest from searches
WARM_SHARE = 0.5  # of the memory available, when no warm-up budget is configured


def vector_bytes(dim: int, precision: str) -> int:
    """One stored vector: a 4-byte header and 2 bytes a dimension (float16) or 4 (float32)."""
    return 8 + dim * (2 if precision == "float16" else 4)


def element_bytes(dim: int, precision: str, m: int) -> int:
    """One vector's HNSW element: the vector and its neighbours."""
    return vector_bytes(dim, precision) + NEIGHBOUR_BYTES_PER_M * m


def build_memory(rows: int, dim: int, precision: str, m: int, available: int) -> int:
    """maintenance_work_mem for an HNSW build over `rows` vectors: the whole graph (a
    graph that outgrows it is built about 6x slower at 1M), a quarter more for the
    build's own bookkeeping, within BUILD_SHARE of the memory available; bytes."""
    want = int(rows * element_bytes(dim, precision, m) * 1.25)
    cap = int(available * BUILD_SHARE)
    return max(BUILD_FLOOR, min(want, cap))


def setting(nbytes: int) -> str:
    """A memory setting in PostgreSQL's units, in whole MiB ('1170MB')."""
    return f"{max(1, nbytes // MIB)}MB"


def warm_budget(configured_mb: int, available: int) -> int:
    """Bytes a warm-up may read: the configured budget, or WARM_SHARE of what is available."""
    return configured_mb * MIB if configured_mb > 0 else int(available * WARM_SHARE)
