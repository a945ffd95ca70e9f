"""The checks of a search its decoding cannot make, shared by matrixd and vectord (no I/O).

A mode and a fusion method are checked strings (lakehouse.wire.modes): a registered
name, else a 400 naming the field with the names there are. A mode's needs are read
from its entry; each daemon says what it has (matrixd can embed the text, vectord
cannot), the entry says what is missing. The weights of the fusion's layers name
layers there are.
"""

from __future__ import annotations

from collections.abc import Mapping

from internal.common.errors import InvalidArgument
from lakehouse.wire.modes import FUSIONS, MODES, FusionSpec, ModeSpec, default_mode
from lakehouse.wire.search import LAYERS


def mode_of(name: str | None, has_text: bool) -> ModeSpec:
    """The request's mode: the one it names (registered, else 400 naming `mode`), else
    hybrid for a text query and vector for a vector."""
    if name is None:
        return default_mode(has_text)
    spec = MODES.get(name)
    if spec is None:
        raise InvalidArgument(f"mode: unknown mode {name!r}; expected one of "
                              f"{', '.join(MODES)}", field="mode")
    return spec


def needs(mode: ModeSpec, *, text: bool, vector: bool) -> None:
    """400 naming the field the mode needs and the request lacks (text: the query text
    is there; vector: a query vector is, or will be)."""
    if mode.needs == "text" and not text:
        raise InvalidArgument(f"query_text: mode {mode.name!r} needs query text",
                              field="query_text")
    if mode.needs == "vector" and not vector:
        raise InvalidArgument(f"query_vector: mode {mode.name!r} needs a query vector",
                              field="query_vector")
    if mode.needs == "either" and not (text or vector):
        raise InvalidArgument(f"query_text: mode {mode.name!r} needs query_text, "
                              "query_vector or both", field="query_text")


def fusion_of(name: str | None) -> FusionSpec | None:
    """The fusion method named (registered, else 400 naming `fusion`); None: not named."""
    if name is None:
        return None
    spec = FUSIONS.get(name)
    if spec is None:
        raise InvalidArgument(f"fusion: unknown method {name!r}; expected one of "
                              f"{', '.join(FUSIONS)}", field="fusion")
    return spec


def layer_weights(weights: Mapping[str, float] | None) -> dict[str, float] | None:
    """The fusion's layer weights, each naming a layer (their range is the wire type's);
    None: the method's default."""
    if weights is None:
        return None
    for name in weights:
        if name not in LAYERS:
            raise InvalidArgument(f"weights.{name}: unknown layer; expected one of "
                                  f"{', '.join(LAYERS)}", field=f"weights.{name}")
    return dict(weights)
