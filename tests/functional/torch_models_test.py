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
import shutil
import subprocess
import sys
import tempfile

import numpy as np
from run_variants import Failure, available_variants, check_variants, run_consensor, tail


def compare_with_torch(rtol, atol):
    def compare(got, ref):
        if got.dtype != ref.dtype or got.shape != ref.shape:
            raise Failure("consensor gives %s%s, PyTorch %s%s"
                          % (got.dtype, list(got.shape), ref.dtype, list(ref.shape)))
        if not np.isfinite(got).all():
            raise Failure("non-finite values")
        abs_err = np.abs(got.astype(np.float64) - ref.astype(np.float64))
        rel_err = abs_err / np.maximum(np.abs(ref.astype(np.float64)), np.finfo(np.float32).tiny)
        # The error that decides allclose: how much of its allowance each element uses.
        used = float((abs_err / (atol + rtol * np.abs(ref.astype(np.float64)))).max())
        if not np.allclose(got, ref, rtol=rtol, atol=atol):
            worst = np.unravel_index(np.argmax(abs_err - rtol * np.abs(ref)), ref.shape)
            raise Failure("beyond rtol %g atol %g: max_abs_err %.3g max_rel_err %.3g; worst at %s: consensor %r, "
                          "torch %r" % (rtol, atol, abs_err.max(), rel_err.max(), list(worst), float(got[worst]),
                                        float(ref[worst])))
        return float(abs_err.max()), float(rel_err.max()), used
    return compare


def check_model(consensor, export_dir, work, entry, table, skipped):
    name = entry["name"]
    model_dir = os.path.join(export_dir, entry["dir"])
    model = os.path.join(model_dir, "model.onnx")
    input_args = []
    for input_name, fname in entry["inputs"].items():
        input_args += ["--input", "%s=%s" % (input_name, os.path.join(model_dir, fname))]
    expected = {out: np.load(os.path.join(model_dir, fname)) for out, fname in entry["outputs"].items()}
    model_work = os.path.join(work, name)
    os.makedirs(model_work)  # consensor creates --out DIR, not its parents
    rows = check_variants(consensor, name, model_work,
                          lambda flags, out_dir: ["run", model] + input_args + ["--out", out_dir] + flags,
                          expected, compare_with_torch(entry["rtol"], entry["atol"]), "PyTorch", skipped)
    for out, row, root in rows:
        table.append((name, out) + row + (root,))


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
              % (len(manifest["models"]), ", ".join(available_variants(skipped))))
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
