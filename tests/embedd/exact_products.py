"""The integer products of a built graph as plain integer arithmetic, to hold onnxruntime's
kernels to: each `DynamicQuantizeMatMul` rewritten as `DynamicQuantizeLinear` (the same
uint8 activations), an int32 `MatMul` of those minus their zero point by the weights minus
theirs (exact: no CPU's kernel choice, no saturation), then the same float scaling and
bias. What a CPU whose integer products are exact computes, on any CPU."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import onnxruntime as ort
from onnx import TensorProto, helper, load_from_string, numpy_helper

OP = "DynamicQuantizeMatMul"


def weight_storage(data: bytes) -> set[tuple[str, int]]:
    """Each integer product's (weight dtype, zero point) in the serialized graph."""
    model = load_from_string(data)
    init = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    return {(str(init[n.input[1]].dtype), int(z))
            for n in model.graph.node if n.op_type == OP for z in np.unique(init[n.input[3]])}


def exact_products(data: bytes) -> bytes:
    """The serialized graph with every integer product computed exactly."""
    model = load_from_string(data)
    init = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    nodes, replaced = [], set()
    for n in model.graph.node:
        if n.op_type != OP:
            nodes.append(n)
            continue
        x, w, scale, zero = n.input[:4]
        k = n.output[0] + "_exact_"
        replaced |= {w, zero}
        weights = init[w].astype(np.int32) - init[zero].astype(np.int32)
        model.graph.initializer.append(numpy_helper.from_array(weights, k + "w"))
        product = k + "y" if len(n.input) > 4 and n.input[4] else n.output[0]
        nodes += [
            helper.make_node("DynamicQuantizeLinear", [x], [k + "q", k + "qs", k + "qz"]),
            helper.make_node("Cast", [k + "q"], [k + "q32"], to=TensorProto.INT32),
            helper.make_node("Cast", [k + "qz"], [k + "qz32"], to=TensorProto.INT32),
            helper.make_node("Sub", [k + "q32", k + "qz32"], [k + "a"]),
            helper.make_node("MatMul", [k + "a", k + "w"], [k + "acc"]),
            helper.make_node("Cast", [k + "acc"], [k + "accf"], to=TensorProto.FLOAT),
            helper.make_node("Mul", [k + "qs", scale], [k + "s"]),
            helper.make_node("Mul", [k + "accf", k + "s"], [product]),
        ]
        if product != n.output[0]:
            nodes.append(helper.make_node("Add", [product, n.input[4]], [n.output[0]]))
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    kept = [t for t in model.graph.initializer if t.name not in replaced]
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    return bytes(model.SerializeToString())


def pooled(data: bytes, ids: list[list[int]], token_types: bool) -> npt.NDArray[np.float32]:
    """Each text's (its token ids') mean of the last hidden states, L2-normalised, one text a
    call on one thread: how embedd pools the local models' outputs."""
    from internal.embedd.local import session_options

    session = ort.InferenceSession(data, sess_options=session_options(1),
                                   providers=["CPUExecutionProvider"])
    out = []
    for row in ids:
        feed = {"input_ids": np.array([row], dtype=np.int64)}
        feed["attention_mask"] = np.ones_like(feed["input_ids"])
        if token_types:
            feed["token_type_ids"] = np.zeros_like(feed["input_ids"])
        (hidden,) = session.run(["last_hidden_state"], feed)
        v = np.asarray(hidden, dtype=np.float32)[0].mean(axis=0)
        out.append(v / np.linalg.norm(v))
    return np.stack(out)
