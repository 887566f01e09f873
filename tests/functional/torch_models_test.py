#!/usr/bin/python3
"""Real PyTorch models through Consensor's ONNX importer.

scripts/export_torch_models.py exports a few small PyTorch models (an MLP, a CNN with and without
its BatchNorm folded, a transformer encoder with a key-padding mask, a decoder with bilinear,
nearest and bicubic upsampling, an upsampling decoder with ConvTranspose and TopK, a two-layer
bidirectional LSTM, a GRU from a given state and a bidirectional ReLU RNN) to ONNX
opset 17, with their inputs and the PyTorch module's own outputs. For every model this test runs

    consensor run model.onnx --input NAME=input_NAME.npy ... --out DIR  with
      threads1   --threads 1
      threads2   --threads 2
      portable   --isa portable
      cuda-emu   --backend cuda-emu   (reported as skipped when that backend is not built)

and checks that every output is within the manifest's tolerance of PyTorch's (numpy allclose
semantics), that each printed sha256 is the canonical tensor hash of the written .npy, and that
the graph id, the result root, every output's hash and the .npy files are identical in all
variants. A truncated model.onnx must fail cleanly: exit code 1 and an "error:" message.

usage: /usr/bin/python3 torch_models_test.py SOURCE_DIR BINARY_DIR   (Debian's python3-torch/onnx)
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
from tensor_hash import tensor_hash

VARIANTS = [
    ("threads1", ["--threads", "1"]),
    ("threads2", ["--threads", "2"]),
    ("portable", ["--isa", "portable"]),
    ("cuda-emu", ["--backend", "cuda-emu"]),
]
# Variants that may be missing from a build; anything else failing is a test failure.
OPTIONAL = {"cuda-emu"}
UNAVAILABLE = re.compile(r"not built|unavailable|not available|not compiled|not supported in this build", re.I)
RUN_TIMEOUT = 180

OUTPUT_LINE = re.compile(r"^output\s+(\S+)\s+(\w+)\[([0-9, ]*)\]\s+sha256:([0-9a-f]{64})\s*$")
RESULT_LINE = re.compile(r"^result\s+([0-9a-f]{64})\s*$")
GRAPH_LINE = re.compile(r"^graph\s+([0-9a-f]+)\s*$")
BACKEND_LINE = re.compile(r"^backend\s+(.*?)\s*$")

class Failure(Exception):
    pass


def file_name(output_name):
    return re.sub(r"[^A-Za-z0-9._-]", "_", output_name) + ".npy"


def tail(text, lines=15):
    return "\n".join(text.strip().splitlines()[-lines:])


def run_consensor(consensor, args):
    try:
        proc = subprocess.run([consensor] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise Failure("consensor %s timed out after %d s" % (" ".join(args), RUN_TIMEOUT))
    return proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")


def parse_run(stdout):
    parsed = {"graph": None, "backend": None, "result": None, "outputs": {}}
    for line in stdout.splitlines():
        m = OUTPUT_LINE.match(line)
        if m:
            name, dtype, shape, digest = m.groups()
            parsed["outputs"][name] = (dtype, tuple(int(d) for d in shape.split(",") if d), digest)
            continue
        for key, pattern in (("graph", GRAPH_LINE), ("backend", BACKEND_LINE), ("result", RESULT_LINE)):
            m = pattern.match(line)
            if m:
                parsed[key] = m.group(1)
    if parsed["result"] is None or not parsed["outputs"]:
        raise Failure("could not parse `consensor run` output:\n" + stdout)
    return parsed


def check_model(consensor, export_dir, work, entry, table, skipped):
    name = entry["name"]
    model_dir = os.path.join(export_dir, entry["dir"])
    model = os.path.join(model_dir, "model.onnx")
    input_args = []
    for input_name, fname in entry["inputs"].items():
        input_args += ["--input", "%s=%s" % (input_name, os.path.join(model_dir, fname))]
    expected = {out: np.load(os.path.join(model_dir, fname)) for out, fname in entry["outputs"].items()}
    rtol, atol = entry["rtol"], entry["atol"]

    runs = {}
    os.makedirs(os.path.join(work, name))  # consensor creates --out DIR, not its parents
    for variant, flags in VARIANTS:
        out_dir = os.path.join(work, name, variant)
        args = ["run", model] + input_args + ["--out", out_dir] + flags
        rc, stdout, stderr = run_consensor(consensor, args)
        if rc != 0:
            message = tail(stderr or stdout)
            if variant in OPTIONAL and UNAVAILABLE.search(message):
                print("  %-12s %-9s SKIPPED (backend unavailable): %s" % (name, variant, message.splitlines()[-1]))
                skipped.append((name, variant, message.splitlines()[-1]))
                continue
            how = "signal %d" % -rc if rc < 0 else "exit code %d" % rc
            raise Failure("%s/%s: consensor %s failed (%s):\n%s" % (name, variant, " ".join(args), how, message))
        parsed = parse_run(stdout)
        print("  %-12s %-9s ok  backend %-16s result %s" % (name, variant, parsed["backend"], parsed["result"]))

        if set(parsed["outputs"]) != set(expected):
            raise Failure("%s/%s: outputs %s, the ONNX graph has %s"
                          % (name, variant, sorted(parsed["outputs"]), sorted(expected)))
        files = {}
        for out, ref in expected.items():
            dtype, shape, digest = parsed["outputs"][out]
            path = os.path.join(out_dir, file_name(out))
            if not os.path.exists(path):
                raise Failure("%s/%s: --out did not write %s" % (name, variant, path))
            with open(path, "rb") as f:
                files[out] = f.read()
            got = np.load(path)
            if got.dtype != ref.dtype or got.shape != ref.shape:
                raise Failure("%s/%s: output %s is %s%s, PyTorch's is %s%s"
                              % (name, variant, out, got.dtype, list(got.shape), ref.dtype, list(ref.shape)))
            if shape != got.shape:
                raise Failure("%s/%s: output %s printed shape %s, the .npy has %s"
                              % (name, variant, out, list(shape), list(got.shape)))
            if tensor_hash(got) != digest:
                raise Failure("%s/%s: output %s printed sha256 %s, the .npy hashes to %s"
                              % (name, variant, out, digest, tensor_hash(got)))
            if not np.isfinite(got).all():
                raise Failure("%s/%s: output %s has non-finite values" % (name, variant, out))
            abs_err = np.abs(got.astype(np.float64) - ref.astype(np.float64))
            rel_err = abs_err / np.maximum(np.abs(ref.astype(np.float64)), np.finfo(np.float32).tiny)
            ok = np.allclose(got, ref, rtol=rtol, atol=atol)
            # The error that decides allclose: how much of its allowance each element uses.
            used = float((abs_err / (atol + rtol * np.abs(ref.astype(np.float64)))).max())
            if variant == VARIANTS[0][0]:
                table.append((name, out, float(abs_err.max()), float(rel_err.max()), used, parsed["result"]))
            if not ok:
                worst = np.unravel_index(np.argmax(abs_err - rtol * np.abs(ref)), ref.shape)
                raise Failure("%s/%s: output %s differs from PyTorch beyond rtol %g atol %g: max_abs_err %.3g "
                              "max_rel_err %.3g; worst at %s: consensor %r, torch %r"
                              % (name, variant, out, rtol, atol, abs_err.max(), rel_err.max(), list(worst),
                                 float(got[worst]), float(ref[worst])))
        runs[variant] = (parsed, files)

    base_variant = VARIANTS[0][0]
    base, base_files = runs[base_variant]
    for variant, (parsed, files) in runs.items():
        for key in ("graph", "result"):
            if parsed[key] != base[key]:
                raise Failure("%s: %s line differs: %s %s, %s %s"
                              % (name, key, base_variant, base[key], variant, parsed[key]))
        for out in expected:
            if parsed["outputs"][out] != base["outputs"][out]:
                raise Failure("%s: output %s differs: %s %s, %s %s" % (name, out, base_variant,
                              base["outputs"][out], variant, parsed["outputs"][out]))
            if files[out] != base_files[out]:
                raise Failure("%s: %s .npy files of %s and %s are not byte-identical"
                              % (name, file_name(out), base_variant, variant))


def check_truncated_model(consensor, export_dir, work):
    with open(os.path.join(export_dir, "mlp", "model.onnx"), "rb") as f:
        head = f.read(100)
    truncated = os.path.join(work, "truncated.onnx")
    with open(truncated, "wb") as f:
        f.write(head)
    x = os.path.join(export_dir, "mlp", "input_x.npy")
    rc, stdout, stderr = run_consensor(consensor, ["run", truncated, "--input", "x=" + x,
                                                   "--out", os.path.join(work, "truncated-out")])
    if rc < 0:
        raise Failure("truncated model.onnx: consensor died with signal %d:\n%s" % (-rc, tail(stderr)))
    if rc != 1 or "error:" not in stderr:
        raise Failure("truncated model.onnx: expected exit code 1 and an error: message, got exit code %d:\n"
                      "stdout: %s\nstderr: %s" % (rc, tail(stdout), tail(stderr)))
    print("  truncated model.onnx (100 bytes): exit code 1, %s" % stderr.strip().splitlines()[-1])


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: torch_models_test.py SOURCE_DIR BINARY_DIR")
    source_dir, binary_dir = sys.argv[1], sys.argv[2]
    consensor = os.path.join(binary_dir, "node", "consensor")
    if not os.access(consensor, os.X_OK):
        sys.exit("FAIL: %s not found; build the consensor target" % consensor)
    work = tempfile.mkdtemp(prefix="consensor-torch-models-")
    try:
        export_dir = os.path.join(work, "models")
        export = subprocess.run([sys.executable, os.path.join(source_dir, "scripts", "export_torch_models.py"),
                                 export_dir], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
        print(export.stdout.decode("utf-8", "replace").rstrip())
        if export.returncode != 0:
            raise Failure("scripts/export_torch_models.py failed with exit code %d" % export.returncode)
        with open(os.path.join(export_dir, "manifest.json")) as f:
            manifest = json.load(f)

        table, skipped, failures = [], [], []
        for entry in manifest["models"]:
            try:
                check_model(consensor, export_dir, work, entry, table, skipped)
            except Failure as e:
                failures.append(str(e))
                print("  FAIL " + str(e).splitlines()[0])
        try:
            check_truncated_model(consensor, export_dir, work)
        except Failure as e:
            failures.append(str(e))
            print("  FAIL " + str(e).splitlines()[0])

        print()
        print("%-12s %-8s %12s %12s %9s  %s" % ("model", "output", "max_abs_err", "max_rel_err", "tol_used",
                                               "result root"))
        for name, out, max_abs, max_rel, used, root in table:
            print("%-12s %-8s %12.3g %12.3g %9.3f  %s" % (name, out, max_abs, max_rel, used, root))
        tolerances = sorted({(m["rtol"], m["atol"]) for m in manifest["models"]})
        print("tolerance (numpy allclose): " + ", ".join("rtol %g atol %g" % t for t in tolerances)
              + "; tol_used = max |err| / (atol + rtol*|ref|), must be <= 1")
        for name, variant, why in skipped:
            print("skipped: %s/%s: %s" % (name, variant, why))
        if failures:
            print()
            for failure in failures:
                print("FAIL: " + failure)
            print("FAIL: %d of %d checks failed" % (len(failures), len(manifest["models"]) + 1))
            return 1
        print("PASS: %d models bit-identical across %s, within tolerance of PyTorch"
              % (len(manifest["models"]), ", ".join(v for v, _ in VARIANTS
                                                    if all(s[1] != v for s in skipped))))
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
