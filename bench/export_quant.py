#!/usr/bin/python3
"""Writes the quantized benchmark models of docs/PERFORMANCE.md and their f32 twins (same
shapes, same random weights before quantization), built with onnx.helper:

  mlp_f32.onnx   x [64, 512] -> MatMul 512x512 -> Relu -> MatMul 512x512
  mlp_dynq.onnx  the same with ONNX Runtime's dynamic-quantization pattern per layer:
                 DynamicQuantizeLinear (u8) -> MatMulInteger (i8 weights) -> Cast -> Mul
  conv_f32.onnx  x [1, 32, 56, 56] -> Conv 3x3 32->64 pad 1 -> Relu -> Conv 3x3 64->64 pad 1
  conv_q.onnx    the same as QDQ: QuantizeLinear (u8) -> QLinearConv (i8 weights, per-channel
                 scales) -> QLinearConv -> DequantizeLinear (Relu folded into the ranges)

usage: /usr/bin/python3 bench/export_quant.py OUT_DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def save(out, name, nodes, inits, x_shape):
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, os.path.join(out, name + ".onnx"))


def const(name, v):
    return numpy_helper.from_array(np.asarray(v), name)


def per_channel_i8(w, axis):
    """Symmetric i8 weights with one scale per slice along axis."""
    other = tuple(d for d in range(w.ndim) if d != axis)
    scale = (np.abs(w).max(axis=other) / 127).astype(np.float32)
    shape = [1] * w.ndim
    shape[axis] = -1
    q = np.clip(np.rint(w / scale.reshape(shape)), -127, 127).astype(np.int8)
    return q, scale


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(19)
    w1 = (rng.standard_normal((512, 512)) / 22).astype(np.float32)
    w2 = (rng.standard_normal((512, 512)) / 22).astype(np.float32)
    save(out, "mlp_f32", [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
                          helper.make_node("MatMul", ["r", "w2"], ["y"])],
         [const("w1", w1), const("w2", w2)], [64, 512])
    nodes, inits = [], []
    src = "x"
    for i, w in enumerate([w1, w2]):
        q, scale = per_channel_i8(w, 1)
        ws = np.float32(scale.max())  # one scale per tensor, as MatMulInteger's Mul takes it
        q = np.clip(np.rint(w / ws), -127, 127).astype(np.int8)
        nodes += [helper.make_node("DynamicQuantizeLinear", [src], [f"q{i}", f"s{i}", f"z{i}"]),
                  helper.make_node("MatMulInteger", [f"q{i}", f"w{i}", f"z{i}"], [f"acc{i}"]),
                  helper.make_node("Cast", [f"acc{i}"], [f"accf{i}"], to=TensorProto.FLOAT),
                  helper.make_node("Mul", [f"s{i}", f"ws{i}"], [f"m{i}"]),
                  helper.make_node("Mul", [f"accf{i}", f"m{i}"], ["y" if i == 1 else f"h{i}"])]
        inits += [const(f"w{i}", q), const(f"ws{i}", ws)]
        if i == 0:
            nodes.append(helper.make_node("Relu", ["h0"], ["r0"]))
            src = "r0"
    save(out, "mlp_dynq", nodes, inits, [64, 512])

    c1 = (rng.standard_normal((64, 32, 3, 3)) / 17).astype(np.float32)
    c2 = (rng.standard_normal((64, 64, 3, 3)) / 24).astype(np.float32)
    b1 = (rng.standard_normal(64) / 10).astype(np.float32)
    b2 = (rng.standard_normal(64) / 10).astype(np.float32)
    save(out, "conv_f32", [helper.make_node("Conv", ["x", "c1", "b1"], ["h"], pads=[1, 1, 1, 1]),
                           helper.make_node("Relu", ["h"], ["r"]),
                           helper.make_node("Conv", ["r", "c2", "b2"], ["y"], pads=[1, 1, 1, 1])],
         [const("c1", c1), const("b1", b1), const("c2", c2), const("b2", b2)], [1, 32, 56, 56])
    xs, hs, ys = np.float32(4 / 255), np.float32(3 / 255), np.float32(6 / 255)
    q1, s1 = per_channel_i8(c1, 0)
    q2, s2 = per_channel_i8(c2, 0)
    save(out, "conv_q", [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        helper.make_node("QLinearConv", ["xq", "xs", "xz", "c1", "s1", "wz", "hs", "hz", "b1"], ["hq"],
                         pads=[1, 1, 1, 1]),
        helper.make_node("QLinearConv", ["hq", "hs", "hz", "c2", "s2", "wz", "ys", "yz", "b2"], ["yq"],
                         pads=[1, 1, 1, 1]),
        helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"])
    ], [const("xs", xs), const("xz", np.uint8(128)), const("c1", q1), const("s1", s1), const("wz", np.int8(0)),
        const("hs", hs), const("hz", np.uint8(0)), const("b1", np.rint(b1 / (xs * s1)).astype(np.int32)),
        const("c2", q2), const("s2", s2), const("ys", ys), const("yz", np.uint8(128)),
        const("b2", np.rint(b2 / (hs * s2)).astype(np.int32))], [1, 32, 56, 56])


if __name__ == "__main__":
    main()
