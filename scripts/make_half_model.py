#!/usr/bin/python3
"""Writes a small convolutional classifier with float16 or bfloat16 weights and activations
(Conv, Relu, MaxPool, Reshape, Gemm, LayerNormalization, Softmax, ReduceMean), made here with
fixed random weights, to compare Consensor with ONNX Runtime on 16-bit floats:

  /usr/bin/python3 scripts/make_half_model.py OUT.onnx [--bf16]
  /usr/bin/python3 scripts/ort_compare.py OUT.onnx --rtol 1e-2 --atol 1e-3

Needs Debian's python3 with numpy and onnx.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def half_initializer(name, values, bf16):
    if not bf16:
        return numpy_helper.from_array(values.astype(np.float16), name)
    # bfloat16 bit patterns, round to nearest even from float32, in raw_data.
    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    t = TensorProto(name=name, data_type=TensorProto.BFLOAT16, dims=values.shape)
    t.raw_data = bits.tobytes()
    return t


def main():
    out = sys.argv[1]
    bf16 = "--bf16" in sys.argv[2:]
    dtype = TensorProto.BFLOAT16 if bf16 else TensorProto.FLOAT16
    rng = np.random.default_rng(19)
    inits = [
        half_initializer("w1", rng.normal(0, 0.3, (8, 3, 3, 3)), bf16),
        half_initializer("b1", rng.normal(0, 0.1, (8,)), bf16),
        half_initializer("w2", rng.normal(0, 0.2, (8 * 4 * 4, 10)), bf16),
        half_initializer("b2", rng.normal(0, 0.1, (10,)), bf16),
        half_initializer("g", rng.normal(1, 0.1, (10,)), bf16),
        half_initializer("beta", rng.normal(0, 0.1, (10,)), bf16),
        numpy_helper.from_array(np.array([1, 8 * 4 * 4], dtype=np.int64), "flat"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Reshape", ["p", "flat"], ["f"]),
        helper.make_node("Gemm", ["f", "w2", "b2"], ["logits"]),
        helper.make_node("LayerNormalization", ["logits", "g", "beta"], ["n"], axis=-1),
        helper.make_node("Softmax", ["n"], ["probs"], axis=-1),
        helper.make_node("ReduceMean", ["p"], ["pooled"], axes=[2, 3], keepdims=0),
    ]
    graph = helper.make_graph(
        nodes, "half_classifier", [helper.make_tensor_value_info("x", dtype, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("probs", dtype, [1, 10]),
         helper.make_tensor_value_info("logits", dtype, [1, 10]),
         helper.make_tensor_value_info("pooled", dtype, [1, 8])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, out)


if __name__ == "__main__":
    main()
