"""glibc's malloc thresholds fixed at start, so memory freed goes back to the system.

glibc raises its mmap threshold to the largest block freed (up to 32 MiB): after the
first upsert body of a few MiB, such bodies come from the heap and stay there when
freed, and a bulk load leaves vectord tens of MiB larger for good (measured at 100k:
97 MiB PSS after a load as shipped, 83 with the threshold fixed;
docs/decisions/0158-memory-counted-and-lean.md). Fixed thresholds (mallopt) keep blocks
of 128 KiB or more mmapped, unmapped when freed, and trim the heap's top past 128 KiB.
Nothing happens off glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util

import structlog

log = structlog.get_logger()

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
THRESHOLD = 128 * 1024


def fixed_thresholds(threshold: int = THRESHOLD) -> bool:
    """Set glibc's mmap and trim thresholds (which also stops their adjustment); True
    when glibc took them."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok = bool(mallopt(M_MMAP_THRESHOLD, threshold)) and bool(mallopt(M_TRIM_THRESHOLD, threshold))
    if not ok:
        log.warning("malloc_thresholds_not_set", threshold=threshold)
    return ok
