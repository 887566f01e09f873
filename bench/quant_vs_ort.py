#!/usr/bin/python3
"""The quantization ops through Consensor and ONNX Runtime (bench/models, onnxruntime-node): small
f32-in, f32-out models built here with onnx.helper, each quantizing its input, running one of
the integer ops on constant weights and dequantizing (or casting) the result, on random inputs
that include exact rounding ties. Prints, per case, how many output elements differ and the
largest absolute difference. Not a test: docs/DETERMINISM.md 6.6 says where the two may differ.
The running is scripts/ort_compare.py's (one copy of those helpers).

usage: /usr/bin/python3 bench/quant_vs_ort.py BUILD_DIR   (Debian's python3-onnx; node on PATH)
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(SOURCE, "scripts"))
import ort_compare  # noqa: E402

RNG = np.random.default_rng(19)


def const(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


def model(nodes, inits, x_shape, opset=13):
    graph = helper.make_graph(nodes, "quant", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def with_ties(shape, scale):
    """Random values, a quarter of them exactly on a rounding tie of x / scale."""
    x = RNG.standard_normal(shape).astype(np.float32) * np.float32(scale * 60)
    ties = (RNG.integers(-200, 200, size=shape) + 0.5).astype(np.float32) * np.float32(scale)
    mask = RNG.random(shape) < 0.25
    return np.where(mask, ties, x).astype(np.float32)


def cases():
    s = np.float32(0.05)
    q = helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"])
    out = []
    out.append(("QuantizeLinear u8 -> DequantizeLinear",
                model([q, helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["y"])],
                      [const("xs", s), const("xz", np.uint8(128))], [4, 256]), with_ties((4, 256), s)))
    per_axis = [const("xs", np.array([0.05, 0.1, 0.02, 0.5], np.float32)), const("xz", np.array([0, -3, 5, 127], np.int8))]
    out.append(("QuantizeLinear i8 per-axis -> DequantizeLinear",
                model([helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"], axis=0),
                       helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["y"], axis=0)], per_axis, [4, 256]),
                with_ties((4, 256), s)))
    out.append(("DynamicQuantizeLinear -> DequantizeLinear",
                model([helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "ds", "dz"]),
                       helper.make_node("DequantizeLinear", ["xq", "ds", "dz"], ["y"])], [], [8, 64]),
                RNG.standard_normal((8, 64)).astype(np.float32) * 3 + 1))
    w_u8 = RNG.integers(0, 256, size=(96, 40)).astype(np.uint8)
    w_i8 = RNG.integers(-128, 128, size=(96, 40)).astype(np.int8)
    out.append(("MatMulInteger u8 x u8 (zero points 128, 121) -> Cast",
                model([q, helper.make_node("MatMulInteger", ["xq", "w", "xz", "wz"], ["acc"]),
                       helper.make_node("Cast", ["acc"], ["y"], to=TensorProto.FLOAT)],
                      [const("xs", s), const("xz", np.uint8(128)), const("w", w_u8), const("wz", np.uint8(121))],
                      [16, 96]), with_ties((16, 96), s)))
    out.append(("dynamic quantized Linear: DynamicQuantizeLinear -> MatMulInteger i8 weights -> Cast -> Mul",
                model([helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "ds", "dz"]),
                       helper.make_node("MatMulInteger", ["xq", "w", "dz"], ["acc"]),
                       helper.make_node("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
                       helper.make_node("Mul", ["ds", "ws"], ["m"]), helper.make_node("Mul", ["accf", "m"], ["y"])],
                      [const("w", w_i8), const("ws", np.float32(0.01))], [16, 96]),
                RNG.standard_normal((16, 96)).astype(np.float32)))
    out.append(("QLinearMatMul u8 x i8 -> DequantizeLinear",
                model([q, helper.make_node("QLinearMatMul", ["xq", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["yq"]),
                       helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"])],
                      [const("xs", s), const("xz", np.uint8(128)), const("w", w_i8), const("ws", np.float32(0.01)),
                       const("wz", np.int8(0)), const("ys", np.float32(0.37)), const("yz", np.uint8(100))],
                      [16, 96]), with_ties((16, 96), s)))
    wc = RNG.integers(0, 256, size=(6, 2, 3, 3)).astype(np.uint8)
    conv_attrs = dict(group=2, pads=[1, 1, 1, 1], strides=[2, 1])
    out.append(("ConvInteger u8 group 2, pads 1, strides (2, 1) -> Cast",
                model([q, helper.make_node("ConvInteger", ["xq", "w", "xz", "wz"], ["acc"], **conv_attrs),
                       helper.make_node("Cast", ["acc"], ["y"], to=TensorProto.FLOAT)],
                      [const("xs", s), const("xz", np.uint8(131)), const("w", wc), const("wz", np.uint8(120))],
                      [2, 4, 9, 9]), with_ties((2, 4, 9, 9), s)))
    wci = RNG.integers(-128, 128, size=(6, 4, 3, 3)).astype(np.int8)
    out.append(("QLinearConv u8 x i8 per-channel scales, bias -> DequantizeLinear",
                model([q, helper.make_node("QLinearConv", ["xq", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["yq"],
                                           pads=[1, 1, 1, 1]),
                       helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"])],
                      [const("xs", s), const("xz", np.uint8(128)), const("w", wci),
                       const("ws", (RNG.random(6) * 0.02 + 0.001).astype(np.float32)), const("wz", np.int8(0)),
                       const("ys", np.float32(0.4)), const("yz", np.uint8(90)),
                       const("b", RNG.integers(-5000, 5000, size=6).astype(np.int32))], [2, 4, 9, 9]),
                with_ties((2, 4, 9, 9), s)))
    return out


def main():
    consensor, work = ort_compare.bench_setup(__doc__, "consensor-quant-ort-")
    print("| case | elements | differing | max abs difference |")
    print("|---|---|---|---|")
    for name, m, x in cases():
        path, inputs = ort_compare.write_case(work, m, {"x": x})
        ref, outputs = ort_compare.run_both(path, inputs, consensor, [], work)
        ort = ref["y"].astype(np.float64)
        got = outputs["y"].astype(np.float64)
        if ort.shape != got.shape:
            print(f"| {name} | shape {got.shape} vs ONNX Runtime {ort.shape} | - | - |")
            continue
        diff = np.abs(ort - got)
        print(f"| {name} | {got.size} | {int((diff != 0).sum())} | {float(diff.max()):.3g} |")


if __name__ == "__main__":
    main()
