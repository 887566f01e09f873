#!/usr/bin/python3
"""Runs any ONNX model on Consensor and on ONNX Runtime with the same inputs and reports, per
output, the largest absolute and relative difference.

usage: /usr/bin/python3 scripts/ort_compare.py MODEL.onnx [--input NAME=FILE.npy]...
           [--bind NAME=FILE.npy]... [--shape NAME=D0,D1,...]... [--seed N] [--rtol R]
           [--atol A] [--keep DIR]
           [--consensor PATH] [-- EXTRA `consensor run` FLAGS...]

Inputs not given as .npy files are random with a fixed seed (numpy's default_rng(seed), one
stream per input in the model's input order): floats uniform in [-1, 1), integers uniform in
[0, 4), bools fair coins. Their shapes come from the model, or from --shape for symbolic
dimensions. A --bind input is fed to ONNX Runtime as it is and fixed at import on Consensor's
side (`consensor run --bind`: an If on it, such as Silero VAD's sample rate, is folded).
ONNX Runtime is bench/models/ort_run.js over onnxruntime-node (scripts/setup.sh
installs it); Consensor is `consensor run MODEL --input ... --out DIR` (build/node/consensor
unless --consensor is given). Flags after `--` go to `consensor run` (--threads 2,
--isa portable, --backend cuda-emu, ...).

An output agrees when numpy.allclose(consensor, ort, rtol, atol) holds (default rtol 1e-3,
atol 1e-5) and dtype and shape are equal; integer and bool outputs must be equal. Exit code 0
when every output agrees, 1 when one does not or a runtime fails, 2 for bad usage.
Needs Debian's python3 with numpy and onnx (/usr/bin/python3).
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORT_RUN = os.path.join(SOURCE_DIR, "bench", "models", "ort_run.js")
RUN_TIMEOUT = 300

# ONNX TensorProto element types that both runtimes can take as .npy inputs.
ONNX_TO_NUMPY = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64,
                 9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64}


class Failure(Exception):
    pass


def file_name(output_name):
    """The .npy file name that both `consensor run --out` and ort_run.js give an output."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", output_name) + ".npy"


def model_inputs(model_path):
    """[(name, numpy dtype, [dim or symbolic name])] of the graph inputs that are not initializers."""
    import onnx  # Debian's python3-onnx; imported here so that --help works without it
    model = onnx.load(model_path, load_external_data=False)
    initializers = {i.name for i in model.graph.initializer}
    inputs = []
    for v in model.graph.input:
        if v.name in initializers:
            continue
        tt = v.type.tensor_type
        if tt.elem_type not in ONNX_TO_NUMPY:
            raise Failure("input '%s' has ONNX element type %d, which this script cannot generate"
                          % (v.name, tt.elem_type))
        dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in tt.shape.dim]
        inputs.append((v.name, ONNX_TO_NUMPY[tt.elem_type], dims))
    return inputs


def random_input(rng, dtype, shape):
    if np.issubdtype(dtype, np.floating):
        return rng.uniform(-1.0, 1.0, size=shape).astype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    return rng.integers(0, 4, size=shape).astype(dtype)


def make_inputs(model_path, given, shapes, seed, work):
    """Writes an .npy for every input not in `given`; returns {name: path} for all inputs."""
    files = dict(given)
    declared = model_inputs(model_path)
    for name in files:
        if name not in [d[0] for d in declared]:
            raise Failure("the model has no input named '%s'" % name)
    streams = np.random.SeedSequence(seed).spawn(max(len(declared), 1))
    for (name, dtype, dims), child in zip(declared, streams):
        if name in files:
            continue
        shape = shapes.get(name)
        if shape is None:
            symbolic = [d for d in dims if not isinstance(d, int) or d <= 0]
            if symbolic:
                raise Failure("input '%s' has symbolic dimensions %s; give --shape %s=D0,D1,... or --input"
                              % (name, dims, name))
            shape = dims
        path = os.path.join(work, "input_" + file_name(name))
        np.save(path, random_input(np.random.default_rng(child), dtype, shape))
        files[name] = path
    return files


def run(cmd, what):
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise Failure("%s timed out after %d s" % (what, RUN_TIMEOUT))
    out, err = proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")
    if proc.returncode != 0:
        how = "signal %d" % -proc.returncode if proc.returncode < 0 else "exit code %d" % proc.returncode
        raise Failure("%s failed (%s): %s" % (what, how, (err or out).strip()[-2000:]))
    return out


def run_ort(model_path, inputs, out_dir):
    """Runs ONNX Runtime once; returns {output name: array} in the model's output order."""
    if not os.path.exists(os.path.join(SOURCE_DIR, "bench", "models", "node_modules", "onnxruntime-node")):
        raise Failure("bench/models/node_modules/onnxruntime-node is missing: run scripts/setup.sh")
    cmd = ["node", ORT_RUN, "--model", model_path, "--out", out_dir]
    for name, path in inputs.items():
        cmd += ["--input", "%s=%s" % (name, path)]
    report = json.loads(run(cmd, "ONNX Runtime (bench/models/ort_run.js)").strip().splitlines()[-1])
    return {name: np.load(o["file"]) for name, o in report["outputs"].items()}


def consensor_args(model_path, inputs, out_dir, extra, bound=()):
    """`consensor run` arguments; the inputs named in `bound` are given with --bind."""
    args = ["run", model_path]
    for name, path in inputs.items():
        args += ["--bind" if name in bound else "--input", "%s=%s" % (name, path)]
    return args + ["--out", out_dir] + list(extra)


def difference(got, ref, rtol, atol):
    """(max |got - ref|, max |got - ref| / |ref|, max |got - ref| / (atol + rtol |ref|)) in float64.

    The last is how much of its allowance the worst element uses (allclose holds when <= 1);
    the relative error alone is huge where ONNX Runtime's value is near zero."""
    if got.size == 0:
        return 0.0, 0.0, 0.0
    # atleast_1d: a rank-0 output (Det of one matrix) indexes like the others.
    g, r = np.atleast_1d(got.astype(np.float64)), np.atleast_1d(ref.astype(np.float64))
    abs_err = np.abs(g - r)
    abs_err[np.isnan(g) & np.isnan(r)] = 0.0
    abs_err[np.isnan(abs_err)] = np.inf
    rel_err = abs_err / np.maximum(np.abs(r), np.finfo(np.float32).tiny)
    with np.errstate(divide="ignore", invalid="ignore"):
        used = np.where(abs_err == 0, 0.0, abs_err / (atol + rtol * np.abs(r)))
    return float(abs_err.max()), float(rel_err.max()), float(used.max())


def agrees(got, ref, rtol, atol):
    """None when `got` agrees with ONNX Runtime's `ref`, else why not."""
    if got.dtype != ref.dtype or got.shape != ref.shape:
        return "consensor gives %s%s, ONNX Runtime %s%s" % (got.dtype, list(got.shape), ref.dtype, list(ref.shape))
    if not np.issubdtype(ref.dtype, np.floating):
        return None if np.array_equal(got, ref) else "integer values differ"
    if not np.allclose(got, ref, rtol=rtol, atol=atol, equal_nan=True):
        return "beyond rtol %g atol %g" % (rtol, atol)
    return None


def bench_setup(usage, prefix):
    """For the bench/*_vs_ort.py scripts: the consensor binary of the BUILD_DIR argument (exits
    with `usage` without one) and a fresh work directory named with `prefix`."""
    if len(sys.argv) != 2:
        sys.exit(usage)
    return os.path.join(sys.argv[1], "node", "consensor"), tempfile.mkdtemp(prefix=prefix)


def write_case(case_dir, model, values):
    """Saves an onnx.ModelProto as case_dir/m.onnx and each input array as case_dir/NAME.npy;
    returns (model path, {name: .npy path}) for compare() and run_both()."""
    import onnx  # Debian's python3-onnx; imported here so that --help works without it
    os.makedirs(case_dir, exist_ok=True)
    path = os.path.join(case_dir, "m.onnx")
    onnx.save(model, path)
    inputs = {}
    for name, value in values.items():
        inputs[name] = os.path.join(case_dir, name + ".npy")
        np.save(inputs[name], value)
    return path, inputs


def run_both(model_path, inputs, consensor, extra, work, bound=()):
    """Runs ONNX Runtime, then `consensor run`; returns ({output: ORT's array}, {output: Consensor's
    array, or None when it wrote none}) in the model's output order."""
    ref = run_ort(model_path, inputs, os.path.join(work, "ort"))
    out_dir = os.path.join(work, "consensor")
    run([consensor] + consensor_args(model_path, inputs, out_dir, extra, bound), "consensor run")
    got = {}
    for name in ref:
        path = os.path.join(out_dir, file_name(name))
        got[name] = np.load(path) if os.path.exists(path) else None
    return ref, got


def compare(model_path, inputs, consensor, extra, rtol, atol, work, bound=()):
    """Runs both runtimes; returns [(output, max_abs, max_rel, tol_used, why-not-or-None)]."""
    ref, outputs = run_both(model_path, inputs, consensor, extra, work, bound)
    rows = []
    for name, r in ref.items():
        got = outputs[name]
        if got is None:
            rows.append((name, float("nan"), float("nan"), float("nan"), "consensor wrote no " + file_name(name)))
            continue
        why = agrees(got, r, rtol, atol)
        nan3 = (float("nan"),) * 3
        rows.append((name,) + (difference(got, r, rtol, atol) if got.shape == r.shape else nan3) + (why,))
    return rows


def usage_error(message):
    print("error: " + message, file=sys.stderr)
    sys.exit(2)


def parse_named(specs, flag):
    named = {}
    for spec in specs:
        name, eq, value = spec.partition("=")
        if not eq or not name:
            usage_error("%s takes NAME=VALUE, got '%s'" % (flag, spec))
        named[name] = value
    return named


def main(argv):
    extra = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model")
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy")
    p.add_argument("--bind", action="append", default=[], metavar="NAME=FILE.npy")
    p.add_argument("--shape", action="append", default=[], metavar="NAME=D0,D1,...")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rtol", type=float, default=1e-3)
    p.add_argument("--atol", type=float, default=1e-5)
    p.add_argument("--keep", metavar="DIR", help="write inputs and both runtimes' outputs here and keep them")
    p.add_argument("--consensor", default=os.path.join(SOURCE_DIR, "build", "node", "consensor"))
    a = p.parse_args(argv)
    given = parse_named(a.input, "--input")
    bound = parse_named(a.bind, "--bind")
    for name in bound:
        if name in given:
            usage_error("input '%s' has both --input and --bind" % name)
    given.update(bound)
    shapes = {}
    for name, dims in parse_named(a.shape, "--shape").items():
        try:
            shapes[name] = [int(d) for d in dims.split(",") if d.strip()]
        except ValueError:
            usage_error("--shape %s=%s: dimensions must be integers" % (name, dims))
    if not os.path.exists(a.model):
        usage_error("%s does not exist" % a.model)
    if not os.access(a.consensor, os.X_OK):
        usage_error("%s not found; build the consensor target or give --consensor" % a.consensor)

    work = a.keep or tempfile.mkdtemp(prefix="consensor-ort-compare-")
    os.makedirs(work, exist_ok=True)
    try:
        inputs = make_inputs(a.model, given, shapes, a.seed, work)
        rows = compare(a.model, inputs, a.consensor, extra, a.rtol, a.atol, work, set(bound))
    except Failure as e:
        print("error: %s" % e, file=sys.stderr)
        return 1
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    print("%-32s %12s %12s %9s  %s" % ("output", "max_abs_err", "max_rel_err", "tol_used", "verdict"))
    for name, max_abs, max_rel, used, why in rows:
        print("%-32s %12.3g %12.3g %9.3f  %s" % (name[:32], max_abs, max_rel, used, why or "ok"))
    print("tol_used = max |err| / (atol + rtol*|ort|), at most 1 for agreement")
    bad = [r for r in rows if r[4]]
    print("%s: %d of %d outputs agree with ONNX Runtime (rtol %g, atol %g)"
          % ("FAIL" if bad else "PASS", len(rows) - len(bad), len(rows), a.rtol, a.atol))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
