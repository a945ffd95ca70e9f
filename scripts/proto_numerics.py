"""The candidates for the local model's integer numerics, built and measured side by side.

How the integer-kernel model (internal/embedd/model_build.py) was chosen (DECISIONS.md,
"Vector and embeddings: integer kernels"). Builds in a temporary folder, from the wheel's
model.onnx:
- ort-dynamic: the graph folded at onnxruntime's basic level (the int8 weights
  dequantized), then `onnxruntime.quantization.quantize_dynamic`, per-channel QInt8
  weights (MatMulInteger);
- ort-static: the same graph through `quantize_static` (QOperator, per-channel QInt8
  weights, uint8 activations calibrated with MinMax on 64 Cranfield documents and 64
  questions);
- integer: model_build's graph (the wheel's own int8 weights and scales,
  DynamicQuantizeMatMul, MultiHeadAttention, SkipLayerNormalization, BiasGelu);
- qattention: the same with each layer's Q/K/V projection and attention as one
  `QAttention` (DynamicQuantizeLinear in front of it).
Then CPU per SciFact question and document (one text a call; one or two onnxruntime
threads; one call per 8 documents of similar length), the process's CPU time, the
sides taking turns over 2 rounds (the better round kept), and the cosine of each
candidate's vectors to the shipped model's.

    flock /tmp/lakehouse-heavy.lock flock /tmp/lakehouse-bench.lock \\
        .venv/bin/python scripts/proto_numerics.py

onnxruntime's transformer optimizer (`onnxruntime.transformers.optimizer`, model_type
bert, 12 heads, hidden 384; it needs sympy) was tried on the folded graph too: it fused
the 12 SkipLayerNormalization and 6 BiasGelu but no Attention (this export's attention
guards its softmax with IsNaN/Where), so no QAttention either; its quantized graph
measured as ort-dynamic (1.73 ms a question, 22.08 ms a document against 1.81 / 22.03).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
from onnx import helper
from tokenizers import Tokenizer

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_embed import data_dir  # noqa: E402

from internal.embedd import model_build  # noqa: E402
from internal.embedd.local import MAX_TOKENS, tokenizer_path  # noqa: E402


def texts(name: str, docs: int, questions: int) -> tuple[list[str], list[str]]:
    folder = data_dir() / "data" / name
    with (folder / "corpus.jsonl").open(encoding="utf-8") as f:
        d = [json.loads(line) for _, line in zip(range(docs), f, strict=False)]
    with (folder / "queries.jsonl").open(encoding="utf-8") as f:
        q = [json.loads(line)["text"] for _, line in zip(range(questions), f, strict=False)]
    return [f"{x.get('title', '')}\n{x['text']}" for x in d], q


def tokenizer() -> Tokenizer:
    tok = Tokenizer.from_file(str(tokenizer_path()))
    tok.enable_truncation(max_length=MAX_TOKENS)
    tok.enable_padding(pad_id=0, pad_token="[PAD]")
    return tok


def feeds(tok: Tokenizer, batch: list[str]) -> dict[str, np.ndarray]:
    encs = tok.encode_batch(batch)
    ids = np.array([e.ids for e in encs], dtype=np.int64)
    return {"input_ids": ids, "attention_mask": np.array([e.attention_mask for e in encs]),
            "token_type_ids": np.zeros_like(ids)}


def build(tmp: Path, tok: Tokenizer) -> dict[str, Path]:
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_dynamic,
        quantize_static,
    )

    src = model_build.source_path()
    folded = tmp / "folded.onnx"
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    so.optimized_model_filepath = str(folded)
    ort.InferenceSession(str(src), so, providers=["CPUExecutionProvider"])
    out = {"shipped": src, "ort-dynamic": tmp / "dynamic.onnx", "ort-static": tmp / "static.onnx",
           "integer": tmp / "integer.onnx", "qattention": tmp / "qattention.onnx"}
    quantize_dynamic(folded, out["ort-dynamic"], per_channel=True, weight_type=QuantType.QInt8)
    docs, questions = texts("cranfield", 64, 64)
    calibration = iter(docs + questions)

    class Reader(CalibrationDataReader):
        def get_next(self) -> dict[str, np.ndarray] | None:
            text = next(calibration, None)
            return None if text is None else feeds(tok, [text])

    quantize_static(folded, out["ort-static"], Reader(), quant_format=QuantFormat.QOperator,
                    per_channel=True, weight_type=QuantType.QInt8,
                    activation_type=QuantType.QUInt8, op_types_to_quantize=["MatMul"],
                    calibrate_method=CalibrationMethod.MinMax)
    data = model_build.build_bytes(src, frozenset(), {})  # as first merged: no float channel
    out["integer"].write_bytes(data)
    out["qattention"].write_bytes(with_qattention(data))
    return out


def with_qattention(data: bytes) -> bytes:
    """model_build's graph with each DynamicQuantizeMatMul(QKV) + Split + MultiHeadAttention
    replaced by DynamicQuantizeLinear + QAttention (mask as each text's length)."""
    import onnx

    model = onnx.load_from_string(data)
    g = model.graph
    nodes = list(g.node)
    kept: list[onnx.NodeProto] = []
    extra = [helper.make_node("ReduceSum", ["key_mask", "axis1"], ["mask_index"], keepdims=0)]
    g.initializer.append(onnx.numpy_helper.from_array(np.array([1], dtype=np.int64), "axis1"))
    for n in nodes:
        if n.op_type == "DynamicQuantizeMatMul" and n.output[0].endswith("_qkv"):
            layer = n.output[0].removesuffix("_qkv")
            x, w, s, z, b = n.input
            kept.append(helper.make_node("DynamicQuantizeLinear", [x],
                                         [f"{layer}_xq", f"{layer}_xs", f"{layer}_xz"]))
            kept.append(helper.make_node(
                "QAttention", [f"{layer}_xq", w, b, f"{layer}_xs", s, "mask_index",
                               f"{layer}_xz", z], [f"{layer}_ctx"], domain=model_build.MS,
                num_heads=model_build.HEADS))
        elif n.op_type in ("Split", "MultiHeadAttention"):
            continue
        else:
            kept.append(n)
            if n.output[0] == "key_mask":
                kept += extra
    del g.node[:]
    g.node.extend(kept)
    return bytes(model.SerializeToString())


def measure(path: Path, threads: int, tok: Tokenizer, batch_texts: list[str], batch: int,
            ) -> tuple[float, np.ndarray]:
    o = ort.SessionOptions()
    o.intra_op_num_threads = threads
    o.inter_op_num_threads = 1
    o.add_session_config_entry("session.intra_op.allow_spinning", "0")
    s = ort.InferenceSession(str(path), o, providers=["CPUExecutionProvider"])
    order = sorted(range(len(batch_texts)), key=lambda i: len(batch_texts[i]))
    vectors = np.zeros((len(batch_texts), model_build.HIDDEN), dtype=np.float32)
    s.run(None, feeds(tok, batch_texts[:1]))
    t = time.process_time()
    for i in range(0, len(order), batch):
        idx = order[i:i + batch]
        f = feeds(tok, [batch_texts[j] for j in idx])
        (h,) = s.run(["last_hidden_state"], f)
        w = f["attention_mask"][:, :, None].astype(np.float32)
        p = (h * w).sum(1) / w.sum(1)
        vectors[idx] = p / np.linalg.norm(p, axis=1, keepdims=True)
    return (time.process_time() - t) / len(batch_texts) * 1000, vectors


def main() -> None:
    tok = tokenizer()
    docs, questions = texts("scifact", 64, 200)
    with tempfile.TemporaryDirectory(prefix="proto-numerics-") as tmp:
        paths = build(Path(tmp), tok)
        runs = [(name, threads, batch) for name in paths for threads, batch in
                ((1, 1), (1, 8), (2, 1))]
        best: dict[tuple[str, int, int], tuple[float, float, np.ndarray, np.ndarray]] = {}
        for _ in range(2):
            for name, threads, batch in runs:
                q, qv = measure(paths[name], threads, tok, questions, 1)
                d, dv = measure(paths[name], threads, tok, docs, batch)
                old = best.get((name, threads, batch))
                if old is None or d < old[1]:
                    best[(name, threads, batch)] = (q, d, qv, dv)
    base = best[("shipped", 1, 1)]
    print("| numerics | threads | documents a call | question ms CPU | document ms CPU | "
          "cosine to shipped, questions (mean / min) | documents |")
    print("|---|---:|---:|---:|---:|---|---|")
    for (name, threads, batch), (q, d, qv, dv) in best.items():
        cq, cd = (qv * base[2]).sum(1), (dv * base[3]).sum(1)
        print(f"| {name} | {threads} | {batch} | {q:.2f} ({q / base[0]:.2f}x) | "
              f"{d:.2f} ({d / base[1]:.2f}x) | {cq.mean():.4f} / {cq.min():.4f} | "
              f"{cd.mean():.4f} / {cd.min():.4f} |")


if __name__ == "__main__":
    main()
