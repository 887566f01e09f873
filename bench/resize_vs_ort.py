#!/usr/bin/python3
"""Resize through Consensor and ONNX Runtime (bench/models, onnxruntime-node) on one random input:
every mode x coordinate_transformation_mode x nearest_mode (x exclude_outside for cubic), with
scales that enlarge, shrink by a non-integer factor, and sizes. Prints the largest absolute
difference per case. Not a test: the two runtimes legitimately differ where docs/ONNX.md says.
The running is scripts/ort_compare.py's (one copy of those helpers).

usage: /usr/bin/python3 bench/resize_vs_ort.py BUILD_DIR   (Debian's python3-onnx; node on PATH)
"""
import itertools
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(SOURCE, "scripts"))
import ort_compare  # noqa: E402


def model(mode, coords, nearest_mode, exclude, scales, sizes):
    inits, inputs = [], ["x", ""]
    if scales:
        inits.append(numpy_helper.from_array(np.array(scales, np.float32), "scales"))
        inputs.append("scales")
    else:
        inits.append(numpy_helper.from_array(np.array(sizes, np.int64), "sizes"))
        inputs += ["", "sizes"]
    node = helper.make_node("Resize", inputs, ["y"], mode=mode, coordinate_transformation_mode=coords,
                            nearest_mode=nearest_mode, exclude_outside=exclude)
    graph = helper.make_graph([node], "resize", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5, 7])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def main():
    consensor, work = ort_compare.bench_setup(__doc__, "consensor-resize-ort-")
    x = np.random.default_rng(19).standard_normal((1, 2, 5, 7)).astype(np.float32)
    for mode, coords in itertools.product(["nearest", "linear", "cubic"],
                                          ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"]):
        for scales, sizes in (([1, 1, 1.6, 0.6], None), ([1, 1, 2.0, 3.0], None), (None, [1, 2, 9, 4])):
            modes = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"] if mode == "nearest" else ["floor"]
            for nearest_mode, exclude in itertools.product(modes, [0, 1] if mode == "cubic" else [0]):
                path, inputs = ort_compare.write_case(work, model(mode, coords, nearest_mode, exclude, scales, sizes),
                                                      {"x": x})
                ref, outputs = ort_compare.run_both(path, inputs, consensor, [], work)
                ort = ref["y"].astype(np.float64)
                got = outputs["y"].astype(np.float64)
                diff = float(np.abs(ort - got).max()) if ort.shape == got.shape else float("inf")
                print("%-8s %-19s %-19s exclude_outside=%d %-18s -> %-15s max_abs %.3g" %
                      (mode, coords, nearest_mode if mode == "nearest" else "-", exclude, scales or sizes,
                       got.shape, diff))


if __name__ == "__main__":
    main()
