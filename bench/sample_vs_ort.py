#!/usr/bin/python3
"""GridSample, RoiAlign, MaxUnpool and Det through Consensor and ONNX Runtime on random inputs:
every GridSample mode x padding_mode x align_corners, RoiAlign avg/max x both coordinate
modes, MaxUnpool with and without output_shape, Det of a few shapes. Prints the largest
absolute difference per case. Not a test: docs/ONNX.md says where the runtimes differ.
The running and comparing is scripts/ort_compare.py's (one copy of those helpers).

usage: /usr/bin/python3 bench/sample_vs_ort.py BUILD_DIR   (Debian's python3-onnx; node on PATH)
       /usr/bin/python3 bench/sample_vs_ort.py --bench-models DIR
The second form writes DIR/gs_{bilinear,nearest,bicubic}.onnx and DIR/mu_k{2,3}.onnx (MaxPool ->
MaxUnpool at run-time indices) for build/bench/onnx_bench (which feeds one input): x [1, 32, 64, 64] is sampled at grid = tanh(transpose(x[:, 0:2])), so the
grid is computed in the task, as in a model, not folded at import.
"""
import itertools
import os
import sys
import tempfile

import numpy as np
import onnx
import onnx.numpy_helper
from onnx import TensorProto, helper

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(SOURCE, "scripts"))
import ort_compare  # noqa: E402


def model(node, inputs, opset):
    graph = helper.make_graph([node], "m", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def cases(rng):
    f32 = TensorProto.FLOAT
    x = rng.standard_normal((2, 3, 7, 9)).astype(np.float32)
    grid = rng.uniform(-1.3, 1.3, (2, 5, 6, 2)).astype(np.float32)
    for mode, padding, align in itertools.product(["bilinear", "nearest", "bicubic"], ["zeros", "border", "reflection"],
                                                  [0, 1]):
        node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode, padding_mode=padding,
                                align_corners=align)
        yield (f"GridSample {mode} {padding} align_corners={align}",
               model(node, [("x", f32, x.shape), ("grid", f32, grid.shape)], 16), {"x": x, "grid": grid}, ())
    image = rng.standard_normal((2, 3, 12, 14)).astype(np.float32)
    corners = rng.uniform(-2, 14, (5, 2, 2)).astype(np.float32)
    rois = np.concatenate([corners.min(axis=1), corners.max(axis=1)], axis=1)  # x1, y1, x2, y2
    batch = np.array([0, 1, 1, 0, 1], np.int64)
    for mode, coords in itertools.product(["avg", "max"], ["half_pixel", "output_half_pixel"]):
        node = helper.make_node("RoiAlign", ["x", "rois", "b"], ["y"], mode=mode, coordinate_transformation_mode=coords,
                                output_height=3, output_width=4, sampling_ratio=2, spatial_scale=0.75)
        yield (f"RoiAlign {mode} {coords}",
               model(node, [("x", f32, image.shape), ("rois", f32, rois.shape), ("b", TensorProto.INT64, batch.shape)],
                     16), {"x": image, "rois": rois, "b": batch}, ())
    # sampling_ratio 0: a grid per roi (rois bound at import); sizes from a point to the whole image,
    # and a zero-width roi (an empty grid with half_pixel).
    corners = rng.uniform(-2, 14, (6, 2, 2)).astype(np.float32)
    rois0 = np.concatenate([corners.min(axis=1), corners.max(axis=1)], axis=1)
    rois0[4] = [3.0, 2.0, 3.0, 9.0]
    rois0[5] = [0.0, 0.0, 13.0, 11.0]
    batch0 = np.array([0, 1, 1, 0, 1, 0], np.int64)
    for mode, coords in itertools.product(["avg", "max"], ["half_pixel", "output_half_pixel"]):
        node = helper.make_node("RoiAlign", ["x", "rois", "b"], ["y"], mode=mode, coordinate_transformation_mode=coords,
                                output_height=3, output_width=4, sampling_ratio=0, spatial_scale=0.75)
        yield (f"RoiAlign {mode} {coords} sampling_ratio=0",
               model(node, [("x", f32, image.shape), ("rois", f32, rois0.shape), ("b", TensorProto.INT64, batch0.shape)],
                     16), {"x": image, "rois": rois0, "b": batch0}, ("rois",))
    pooled = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    # Each value's index inside its own 2x2 window of an [2, 3, 8, 10] output, flat over the tensor.
    n, c, h, w = np.indices(pooled.shape)
    dy, dx = rng.integers(0, 2, pooled.shape), rng.integers(0, 2, pooled.shape)
    index = ((n * 3 + c) * 8 + 2 * h + dy) * 10 + 2 * w + dx
    node = helper.make_node("MaxUnpool", ["x", "i"], ["y"], kernel_shape=[2, 2], strides=[2, 2])
    yield ("MaxUnpool 2x2", model(node, [("x", f32, pooled.shape), ("i", TensorProto.INT64, index.shape)], 11),
           {"x": pooled, "i": index.astype(np.int64)}, ("i",))
    # MaxPool's run-time Indices into MaxUnpool (DETERMINISM.md 6.7d), tiling and overlapping windows.
    # Input sizes the unpooled shape reproduces, so MaxPool's indices address it.
    for k, s, p, h, w in [(2, 2, 0, 6, 8), (3, 2, 1, 7, 9)]:
        image = rng.standard_normal((2, 3, h, w)).astype(np.float32)
        nodes = [helper.make_node("MaxPool", ["x"], ["p", "i"], kernel_shape=[k, k], strides=[s, s], pads=[p] * 4),
                 helper.make_node("MaxUnpool", ["p", "i"], ["y"], kernel_shape=[k, k], strides=[s, s], pads=[p] * 4)]
        graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", f32, image.shape)],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
        m.ir_version = 8
        yield f"MaxPool -> MaxUnpool {k}x{k} stride {s} pads {p} (run-time indices)", m, {"x": image}, ()
    for shape in [(3, 3), (4, 5, 5), (2, 1, 1), (2, 8, 8)]:
        a = rng.standard_normal(shape).astype(np.float32)
        node = helper.make_node("Det", ["x"], ["y"])
        yield f"Det {list(shape)}", model(node, [("x", f32, a.shape)], 11), {"x": a}, ()
    singular = np.array([[[1, 2, 3], [2, 4, 6], [0, 1, 1]], [[0, 0, 0], [1, 2, 3], [4, 5, 6]]], np.float32)
    yield "Det singular [2, 3, 3]", model(helper.make_node("Det", ["x"], ["y"]), [("x", f32, singular.shape)], 11), {
        "x": singular}, ()


def write_bench_models(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    inits = [onnx.numpy_helper.from_array(np.array(v, np.int64), n) for n, v in [("st", [0]), ("en", [2]), ("ax", [1])]]
    for mode in ["bilinear", "nearest", "bicubic"]:
        nodes = [helper.make_node("Slice", ["x", "st", "en", "ax"], ["s"]),
                 helper.make_node("Transpose", ["s"], ["t"], perm=[0, 2, 3, 1]),
                 helper.make_node("Tanh", ["t"], ["grid"]),
                 helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode, padding_mode="zeros")]
        graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 64, 64])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
        m.ir_version = 8
        onnx.save(m, os.path.join(out_dir, "gs_%s.onnx" % mode))
    # MaxPool's run-time Indices into MaxUnpool: tiling 2x2 stride 2 and overlapping 3x3 stride 2 pads 1.
    for name, k, s, p in [("mu_k2", 2, 2, 0), ("mu_k3", 3, 2, 1)]:
        nodes = [helper.make_node("MaxPool", ["x"], ["p", "i"], kernel_shape=[k, k], strides=[s, s], pads=[p] * 4),
                 helper.make_node("MaxUnpool", ["p", "i"], ["y"], kernel_shape=[k, k], strides=[s, s], pads=[p] * 4)]
        size = 64 if k == 2 else 63  # the unpooled shape is the input's
        graph = helper.make_graph(nodes, "m",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, size, size])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
        m.ir_version = 8
        onnx.save(m, os.path.join(out_dir, name + ".onnx"))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--bench-models":
        write_bench_models(sys.argv[2])
        return
    consensor, work = ort_compare.bench_setup(__doc__, "consensor-sample-ort-")
    print("| case | max abs difference | max relative difference | agrees (rtol 1e-3, atol 1e-5) |")
    print("|---|---|---|---|")
    for name, m, values, bound in cases(np.random.default_rng(19)):
        case_dir = tempfile.mkdtemp(dir=work)
        path, inputs = ort_compare.write_case(case_dir, m, values)
        try:
            rows = ort_compare.compare(path, inputs, consensor, [], 1e-3, 1e-5, case_dir, bound)
        except ort_compare.Failure as e:
            print(f"| {name} | fails: {e} | | |")
            continue
        for _, max_abs, max_rel, _, why in rows:
            print(f"| {name} | {max_abs:.3g} | {max_rel:.3g} | {'yes' if why is None else why} |")


if __name__ == "__main__":
    main()
