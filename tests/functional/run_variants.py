"""Runs one model through `consensor run` in every execution variant and checks what it printed.

Shared by torch_models_test.py (PyTorch's outputs as the reference) and published_models_test.py
(ONNX Runtime's). The variants must agree bit for bit: graph id, result root, every printed
output hash and the bytes of every written .npy. Each output is also checked against the
reference by the caller's `compare` function.
"""
import os
import re
import subprocess

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
RUN_TIMEOUT = 300

# Output names may hold spaces (openWakeWord's timer model names its output with a JSON map).
OUTPUT_LINE = re.compile(r"^output\s+(.+?)\s+(\w+)\[([0-9, ]*)\]\s+sha256:([0-9a-f]{64})\s*$")
RESULT_LINE = re.compile(r"^result\s+([0-9a-f]{64})\s*$")
GRAPH_LINE = re.compile(r"^graph\s+([0-9a-f]+)\s*$")
BACKEND_LINE = re.compile(r"^backend\s+(.*?)\s*$")


class Failure(Exception):
    pass


def file_name(output_name):
    """The .npy file name `consensor run --out` gives an output."""
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


def check_variants(consensor, name, work, args_for, expected, compare, reference, skipped, refused=()):
    """Runs `consensor` once per variant and returns the first variant's rows.

    args_for(flags, out_dir) gives the command line; expected maps each output name to the
    reference array; compare(got, ref) returns a row of error figures or raises Failure (with
    the reason, without the model and variant, which are added here). Returns
    [(output, row, result root)] of the first variant. A variant in OPTIONAL that the build
    lacks is appended to `skipped` as (name, variant, why). A variant in `refused` must refuse
    the model with exit code 1 and a "does not support" message (the CUDA backends and f64)."""
    runs, rows = {}, []
    for variant, flags in VARIANTS:
        out_dir = os.path.join(work, variant)
        args = args_for(flags, out_dir)
        rc, stdout, stderr = run_consensor(consensor, args)
        if variant in refused:
            message = tail(stderr or stdout)
            if variant in OPTIONAL and UNAVAILABLE.search(message):
                skipped.append((name, variant, message.splitlines()[-1]))
                continue
            if rc != 1 or "does not support" not in message:
                how = "signal %d" % -rc if rc < 0 else "exit code %d" % rc
                raise Failure("%s/%s: expected a refusal (exit code 1, does not support), got %s:\n%s"
                              % (name, variant, how, message))
            print("  %-13s %-9s refused as documented: %s" % (name, variant, message.splitlines()[-1][:100]))
            skipped.append((name, variant, "refused as documented"))
            continue
        if rc != 0:
            message = tail(stderr or stdout)
            if variant in OPTIONAL and UNAVAILABLE.search(message):
                print("  %-13s %-9s SKIPPED (backend unavailable): %s" % (name, variant, message.splitlines()[-1]))
                skipped.append((name, variant, message.splitlines()[-1]))
                continue
            how = "signal %d" % -rc if rc < 0 else "exit code %d" % rc
            raise Failure("%s/%s: consensor %s failed (%s):\n%s" % (name, variant, " ".join(args), how, message))
        parsed = parse_run(stdout)
        print("  %-13s %-9s ok  backend %-16s result %s" % (name, variant, parsed["backend"], parsed["result"]))
        if set(parsed["outputs"]) != set(expected):
            raise Failure("%s/%s: outputs %s, %s has %s"
                          % (name, variant, sorted(parsed["outputs"]), reference, sorted(expected)))
        files = {}
        for out, ref in expected.items():
            dtype, shape, digest = parsed["outputs"][out]
            path = os.path.join(out_dir, file_name(out))
            if not os.path.exists(path):
                raise Failure("%s/%s: --out did not write %s" % (name, variant, path))
            with open(path, "rb") as f:
                files[out] = f.read()
            got = np.load(path)
            if shape != got.shape:
                raise Failure("%s/%s: output %s printed shape %s, the .npy has %s"
                              % (name, variant, out, list(shape), list(got.shape)))
            if tensor_hash(got) != digest:
                raise Failure("%s/%s: output %s printed sha256 %s, the .npy hashes to %s"
                              % (name, variant, out, digest, tensor_hash(got)))
            try:
                row = compare(got, ref)
            except Failure as e:
                raise Failure("%s/%s: output %s differs from %s: %s" % (name, variant, out, reference, e))
            if variant == VARIANTS[0][0]:
                rows.append((out, row, parsed["result"]))
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
    return rows


def available_variants(skipped):
    return [v for v, _ in VARIANTS if all(s[1] != v for s in skipped)]
