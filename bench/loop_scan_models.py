"""Writes two ONNX models with control flow for bench/onnx_bench (one input each):

  loop256.onnx  Loop, M = 256: h = tanh(h @ W + xs[i]) with W [64, 64], h [1, 64] from zeros,
                scan output: sum(h) per iteration. Input xs [256, 1, 64].
  scan128.onnx  Scan over axis 1 of x [1, 128, 32], backwards: s = s + x_t, y_t = s * x_t,
                stacked along axis 1. Input x [1, 128, 32].

Consensor unrolls both at import (docs/DETERMINISM.md 6.1b); ONNX Runtime runs them as loops.

usage: /usr/bin/python3 bench/loop_scan_models.py OUT_DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh


def loop_model():
    rng = np.random.default_rng(1)
    w = (rng.standard_normal((64, 64)) * 0.2).astype(np.float32)
    body = h.make_graph(
        [h.make_node("Gather", ["xs", "i"], ["x_i"], axis=0),
         h.make_node("MatMul", ["h_in", "W"], ["hw"]),
         h.make_node("Add", ["hw", "x_i"], ["pre"]),
         h.make_node("Tanh", ["pre"], ["h_out"]),
         h.make_node("Identity", ["cond_in"], ["cond_out"]),
         h.make_node("ReduceSum", ["h_out"], ["s"], keepdims=0)],
        "body",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("cond_in", T.BOOL, []),
         h.make_tensor_value_info("h_in", T.FLOAT, [1, 64])],
        [h.make_tensor_value_info("cond_out", T.BOOL, []), h.make_tensor_value_info("h_out", T.FLOAT, [1, 64]),
         h.make_tensor_value_info("s", T.FLOAT, [])])
    g = h.make_graph(
        [h.make_node("Loop", ["M", "", "h0"], ["h_final", "sums"], body=body)], "loop",
        [h.make_tensor_value_info("xs", T.FLOAT, [256, 1, 64])],
        [h.make_tensor_value_info("h_final", T.FLOAT, [1, 64]), h.make_tensor_value_info("sums", T.FLOAT, [256])],
        [nh.from_array(np.array(256, np.int64), "M"), nh.from_array(w, "W"),
         nh.from_array(np.zeros((1, 64), np.float32), "h0")])
    return g, 17


def scan_model():
    body = h.make_graph(
        [h.make_node("Add", ["s_in", "x_t"], ["s_out"]), h.make_node("Mul", ["s_out", "x_t"], ["y_t"])], "body",
        [h.make_tensor_value_info("s_in", T.FLOAT, [1, 32]), h.make_tensor_value_info("x_t", T.FLOAT, [1, 32])],
        [h.make_tensor_value_info("s_out", T.FLOAT, [1, 32]), h.make_tensor_value_info("y_t", T.FLOAT, [1, 32])])
    g = h.make_graph(
        [h.make_node("Scan", ["s0", "x"], ["s_final", "y"], body=body, num_scan_inputs=1, scan_input_axes=[1],
                     scan_input_directions=[1], scan_output_axes=[1])], "scan",
        [h.make_tensor_value_info("x", T.FLOAT, [1, 128, 32])],
        [h.make_tensor_value_info("s_final", T.FLOAT, [1, 32]),
         h.make_tensor_value_info("y", T.FLOAT, [1, 128, 32])],
        [nh.from_array(np.zeros((1, 32), np.float32), "s0")])
    return g, 16


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    os.makedirs(sys.argv[1], exist_ok=True)
    for name, make in (("loop256", loop_model), ("scan128", scan_model)):
        graph, opset = make()
        model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
        model.ir_version = 8
        onnx.checker.check_model(model)
        onnx.save(model, os.path.join(sys.argv[1], name + ".onnx"))


if __name__ == "__main__":
    main()
