#!/usr/bin/python3
"""NonMaxSuppression, NonZero and Unique through Consensor and ONNX Runtime on random inputs
(DETERMINISM.md 6.8c: Consensor folds them at import, so every input is given with --bind).
NonMaxSuppression: boxes on a coarse grid (many equal IoUs and boxes), scores with ties, both
box formats, with and without score_threshold, several iou thresholds and box limits.
NonZero: f32 with zeros and -0, i32. Unique: f32 with repeats and -0, with and without an
axis, sorted and not. Prints one row per case; integer outputs must be equal.
The running and comparing is scripts/ort_compare.py's.

usage: /usr/bin/python3 bench/data_shape_vs_ort.py BUILD_DIR   (Debian's python3-onnx; node on PATH)
"""
import itertools
import os
import sys
import tempfile

import numpy as np
from onnx import TensorProto, helper
import onnx

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(SOURCE, "scripts"))
import ort_compare  # noqa: E402


def model(node, inputs, outputs, opset):
    graph = helper.make_graph([node], "m", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(o, t, None) for o, t in outputs])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def nms_cases(rng):
    f32, i64 = TensorProto.FLOAT, TensorProto.INT64
    for center, with_threshold, iou, limit in itertools.product([0, 1], [False, True], [0.0, 0.25, 0.5], [3, 50]):
        b, c, n = 2, 3, 40
        if center:
            boxes = np.concatenate([rng.integers(0, 16, (b, n, 2)), rng.integers(1, 8, (b, n, 2))], axis=2) / 4
        else:
            # corners in either order: y1, x1, y2, x2
            boxes = rng.integers(0, 16, (b, n, 4)) / 4
        boxes = boxes.astype(np.float32)
        scores = (rng.integers(0, 8, (b, c, n)) / 8).astype(np.float32)
        values = {"boxes": boxes, "scores": scores, "max": np.array([limit], np.int64),
                  "iou": np.array([iou], np.float32)}
        names = ["boxes", "scores", "max", "iou"]
        if with_threshold:
            values["thr"] = np.array([0.3], np.float32)
            names.append("thr")
        node = helper.make_node("NonMaxSuppression", names, ["y"], center_point_box=center)
        types = {"boxes": f32, "scores": f32, "max": i64, "iou": f32, "thr": f32}
        inputs = [(k, types[k], values[k].shape) for k in names]
        yield (f"NonMaxSuppression center_point_box={center} score_threshold={'0.3' if with_threshold else 'none'} "
               f"iou={iou} max={limit}", model(node, inputs, [("y", i64)], 11), values)


def other_cases(rng):
    x = rng.integers(-2, 3, (4, 5, 6)).astype(np.float32)
    x[x == -2] = -0.0
    node = helper.make_node("NonZero", ["x"], ["y"])
    yield "NonZero f32 [4, 5, 6]", model(node, [("x", TensorProto.FLOAT, x.shape)], [("y", TensorProto.INT64)], 13), {
        "x": x}
    xi = rng.integers(-1, 2, (7, 3)).astype(np.int32)
    yield "NonZero i32 [7, 3]", model(node, [("x", TensorProto.INT32, xi.shape)], [("y", TensorProto.INT64)], 13), {
        "x": xi}
    u = rng.integers(-2, 3, (3, 8, 2)).astype(np.float32)
    u[u == -2] = -0.0
    outs = [("Y", TensorProto.FLOAT), ("indices", TensorProto.INT64), ("inverse", TensorProto.INT64),
            ("counts", TensorProto.INT64)]
    for axis, sort in itertools.product([None, 1, -1], [0, 1]):
        attrs = {"sorted": sort}
        if axis is not None:
            attrs["axis"] = axis
        node = helper.make_node("Unique", ["x"], [o for o, _ in outs], **attrs)
        yield f"Unique axis={axis} sorted={sort}", model(node, [("x", TensorProto.FLOAT, u.shape)], outs, 11), {"x": u}


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    consensor = os.path.join(sys.argv[1], "node", "consensor")
    work = tempfile.mkdtemp(prefix="consensor-data-shape-ort-")
    rng = np.random.default_rng(19)
    print("| case | outputs | agrees |")
    print("|---|---|---|")
    for name, m, values in itertools.chain(nms_cases(rng), other_cases(rng)):
        case_dir = tempfile.mkdtemp(dir=work)
        path = os.path.join(case_dir, "m.onnx")
        onnx.save(m, path)
        inputs = {}
        for key, value in values.items():
            inputs[key] = os.path.join(case_dir, key + ".npy")
            np.save(inputs[key], value)
        try:
            rows = ort_compare.compare(path, inputs, consensor, [], 0.0, 0.0, case_dir, tuple(values))
        except ort_compare.Failure as e:
            print(f"| {name} | fails: {e} | |")
            continue
        bad = [f"{out}: {why}" for out, _, _, _, why in rows if why is not None]
        shapes = ", ".join(f"{out}" for out, *_ in rows)
        print(f"| {name} | {shapes} | {'yes' if not bad else '; '.join(bad)} |")


if __name__ == "__main__":
    main()
