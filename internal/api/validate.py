"""Checks on names, vectors and items before anything reaches SQL (no I/O)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

import msgspec
import numpy as np
import numpy.typing as npt

from internal.api.vectord import MAX_DIM, MAX_ID_BYTES, MAX_K, NAME_PATTERN, Item
from internal.common.errors import InvalidArgument

NAME_RE = re.compile(NAME_PATTERN)
MAX_ID_LEN = MAX_ID_BYTES  # bytes of UTF-8
_json = msgspec.json.Encoder()


def corpus_name(name: str, field: str = "name") -> str:
    if not NAME_RE.match(name):
        raise InvalidArgument(
            f"{field}: {name[:80]!r} is not a valid corpus name "
            "(lowercase letter, then up to 62 lowercase letters, digits or underscores)",
            field=field)
    return name


def description(text: str | None, field: str = "description") -> str | None:
    """A corpus's description as stored: stripped, None when empty; no NUL (the decode
    checked its length)."""
    if text is None or not text.strip():
        return None
    _no_nul(text, field)
    return text.strip()


def corpora(names: Sequence[str] | None, most: int) -> None:
    """A search's `corpora`: absent (every corpus), else 1..most valid names, none twice."""
    if names is None:
        return
    if not names:
        raise InvalidArgument("corpora: name at least one corpus, or leave it out for all",
                              field="corpora")
    if len(names) > most:
        raise InvalidArgument(f"corpora: at most {most} corpora, got {len(names)}",
                              field="corpora")
    seen: set[str] = set()
    for i, name in enumerate(names):
        corpus_name(name, f"corpora[{i}]")
        if name in seen:
            raise InvalidArgument(f"corpora[{i}]: {name!r} is named twice", field=f"corpora[{i}]")
        seen.add(name)


def corpus_weights(weights: Mapping[str, object], searched: Sequence[str]) -> dict[str, float]:
    """`corpus_weights`: each a searched corpus's, a finite number > 0; 400 naming the bad
    one (`corpus_weights.<name>`)."""
    names = set(searched)
    for name, w in weights.items():
        field = f"corpus_weights.{name}"
        if name not in names:
            raise InvalidArgument(f"{field}: corpus {name!r} is not searched", field=field)
        if isinstance(w, bool) or not isinstance(w, (int, float)):
            raise InvalidArgument(f"{field}: expected a number > 0", field=field)
        if not math.isfinite(w) or w <= 0:
            raise InvalidArgument(f"{field}: must be a finite number > 0, got {w}", field=field)
    return {name: float(w) for name, w in weights.items()}  # type: ignore[arg-type]


def dim(value: int, field: str = "dim") -> int:
    if not 1 <= value <= MAX_DIM:
        raise InvalidArgument(f"{field}: must be in 1..{MAX_DIM}, got {value}", field=field)
    return value


def k(value: int, field: str = "k") -> int:
    if not 1 <= value <= MAX_K:
        raise InvalidArgument(f"{field}: must be in 1..{MAX_K}, got {value}", field=field)
    return value


def vector(values: list[float], expected_dim: int, metric: str, field: str) -> npt.NDArray[np.float32]:
    """The vector as float32, or InvalidArgument naming the field."""
    if len(values) != expected_dim:
        raise InvalidArgument(f"{field}: expected {expected_dim} numbers, got {len(values)}",
                              field=field)
    with np.errstate(over="ignore"):
        arr = np.asarray(values, dtype=np.float32)
    if not np.isfinite(arr).all():
        bad = int(np.argmin(np.isfinite(arr)))
        raise InvalidArgument(
            f"{field}[{bad}]: must be a finite number within float32 range, got {values[bad]}",
            field=field)
    if metric == "cosine" and not arr.any():
        raise InvalidArgument(f"{field}: a zero vector has no direction (cosine metric)",
                              field=field)
    return arr


def _no_nul(value: str, field: str) -> None:
    if "\x00" in value:
        raise InvalidArgument(f"{field}: must not contain NUL characters", field=field)


def item_id(value: str, field: str) -> str:
    if not value:
        raise InvalidArgument(f"{field}: must not be empty", field=field)
    # Characters are at most 4 bytes: only long ids need encoding to be measured.
    if len(value) * 4 > MAX_ID_LEN and len(value.encode("utf-8")) > MAX_ID_LEN:
        raise InvalidArgument(f"{field}: longer than {MAX_ID_LEN} bytes of UTF-8", field=field)
    _no_nul(value, field)
    return value


# Ids that cannot be read back: as a URL path segment they are a step of the path, which
# browsers, curl and yarl resolve before sending (RFC 3986 §5.2.4, percent-encoded too).
UNREADABLE_IDS = frozenset({".", ".."})


def item(it: Item, index: int, expected_dim: int, metric: str) -> npt.NDArray[np.float32]:
    """Check one item of a batch; errors name `items[index].<field>`."""
    base = f"items[{index}]"
    item_id(it.id, f"{base}.id")
    if it.id in UNREADABLE_IDS:
        raise InvalidArgument(
            f"{base}.id: {it.id!r} cannot be read back (in a URL it means a folder step, "
            "which clients resolve before sending); any other id can", field=f"{base}.id")
    arr = vector(it.vector, expected_dim, metric, f"{base}.vector")
    _no_nul(it.text, f"{base}.text")
    if it.title is not None:
        _no_nul(it.title, f"{base}.title")
    for j, tag in enumerate(it.tags):
        _no_nul(tag, f"{base}.tags[{j}]")
    if b"\\u0000" in _json.encode(it.metadata):
        raise InvalidArgument(f"{base}.metadata: must not contain NUL characters",
                              field=f"{base}.metadata")
    return arr
