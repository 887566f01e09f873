#!/usr/bin/python3
"""Exports a few small, real PyTorch models to ONNX for Consensor's importer tests.

usage: /usr/bin/python3 scripts/export_torch_models.py OUT_DIR

Needs Debian's python3-torch (1.13) and python3-onnx (1.12), hence /usr/bin/python3.

For every model it writes OUT_DIR/<model>/ with
  model.onnx              torch.onnx.export, opset 17, constant folding, static shapes, eval mode
  input_<name>.npy        one per ONNX graph input (float32 or int64), <name> = the input's name
  expected_<name>.npy     the float32 outputs of the PyTorch module itself (not of an ONNX runtime)
and OUT_DIR/manifest.json:
  {"models": [{"name", "dir", "inputs": {onnx_input: file}, "outputs": {onnx_output: file},
               "ops": [...], "rtol", "atol"}]}
where the files are relative to the model's directory, and a comparison passes with numpy's
allclose semantics: |got - expected| <= atol + rtol * |expected|.

Everything is seeded (torch.manual_seed per model) and single-threaded, so two runs write the
same inputs and references. The tolerances are sized to float32 rounding (see TIGHT below): the
script also runs every model in float64 and prints how far PyTorch's own float32 result lies
from it, which is the size of error a different (but correct) float32 summation order gives.
"""
import json
import os
import sys
import warnings

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F

OPSET = 17

# Tolerances, numpy allclose semantics: |got - expected| <= atol + rtol * |expected|.
# float32 has a 6e-8 unit roundoff; PyTorch's own float32 outputs lie this far from float64
# (printed by this script): mlp 1e-8, cnn 4e-8, transformer 3.7e-7 absolute. A correct float32
# evaluation with other summation orders and ~1 ULP exp/erf (Consensor) measured 1.5e-8,
# 4.5e-8 and 4.8e-7 from PyTorch's. Each model gets the tightest power-of-ten pair that leaves
# a wide (>= 30x) margin over that, so another correct summation order, or PyTorch's kernels on
# another CPU, cannot fail the test, while a wrong lowering (errors of 1e-4 and up) does: the
# MLP and the CNNs use under 3% of rtol 1e-5 / atol 1e-6; the transformer (layer norms,
# attention softmax, 32- and 64-term dot products, logits up to ~3 with cancellation near 0)
# would use 20% of that, so it gets rtol 1e-4 / atol 1e-5, of which it uses 2%.
TIGHT = {"rtol": 1e-5, "atol": 1e-6}
TRANSFORMER_TOL = {"rtol": 1e-4, "atol": 1e-5}


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(64, 128), nn.GELU(),  # exact (erf) GELU
            nn.Linear(128, 64), nn.ReLU(),
            nn.Linear(64, 10), nn.Softmax(dim=-1))

    def forward(self, x):
        return self.net(x)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.pool1 = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=1, padding=1)
        # count_include_pad=False changes nothing without padding, but torch 1.13 exports the
        # default (True) as an all-zero Pad followed by AveragePool, and Pad is not an op the
        # importer supports.
        self.pool2 = nn.AvgPool2d(2, count_include_pad=False)
        self.gap = nn.AdaptiveAvgPool2d(1)  # exports as GlobalAveragePool
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.pool1(torch.relu(self.bn(self.conv1(x))))
        x = self.pool2(torch.relu(self.conv2(x)))
        x = torch.flatten(self.gap(x), 1)
        return self.fc(x)


class TinyTransformer(nn.Module):
    """Token + learned positional embedding, one post-norm encoder layer, a vocabulary head.
    Token id 0 is padding: a key-padding mask computed from the ids inside the model keeps
    attention off those positions (exports as Equal / Reshape / Expand / Cast / Where)."""
    PAD = 0

    def __init__(self, vocab=100, d_model=32, seq=8):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.randn(1, seq, d_model) * 0.1)
        self.encoder = nn.TransformerEncoderLayer(d_model=d_model, nhead=4, dim_feedforward=64, dropout=0.0,
                                                  activation="gelu", batch_first=True)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, tokens):
        pad_mask = tokens == self.PAD
        x = self.embed(tokens) + self.pos
        x = self.encoder(x, src_key_padding_mask=pad_mask)
        return self.head(x)


class UpsamplingNet(nn.Module):
    """A small segmentation-style decoder: convolutions between the three interpolations PyTorch
    models use (bilinear, nearest, bicubic with align_corners), each exported as a Resize."""

    def __init__(self):
        super().__init__()
        self.enc = nn.Conv2d(3, 6, 3, stride=2, padding=1)
        self.mid = nn.Conv2d(6, 6, 3, padding=1)
        self.head = nn.Conv2d(6, 2, 1)

    def forward(self, x):
        x = torch.relu(self.enc(x))
        x = F.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=False)
        x = torch.relu(self.mid(x))
        x = F.interpolate(x, scale_factor=2.0, mode="nearest")
        x = F.interpolate(x, size=(20, 28), mode="bicubic", align_corners=True)
        return self.head(x)
class Decoder(nn.Module):
    """An upsampling decoder (segmentation / autoencoder style): Conv, then two ConvTranspose
    layers (grouped with output_padding, then a 4x4 stride-2 one), and the 5 largest
    activations of each image (TopK values)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.up1 = nn.ConvTranspose2d(8, 8, 3, stride=2, padding=1, output_padding=1, groups=2)
        self.up2 = nn.ConvTranspose2d(8, 3, 4, stride=2, padding=1)

    def forward(self, x):
        y = self.up2(torch.relu(self.up1(torch.relu(self.conv(x)))))
        return y, torch.topk(torch.flatten(y, 1), 5).values


class SequenceTagger(nn.Module):
    """A bidirectional two-layer LSTM over a sequence, a per-step linear head; also returns the
    final hidden and cell states (each exported LSTM layer gives Y, Y_h and Y_c)."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 16, num_layers=2, bidirectional=True)
        self.head = nn.Linear(32, 5)

    def forward(self, x):
        y, (h, c) = self.lstm(x)
        return self.head(y), h, c


class GruEncoder(nn.Module):
    """A batch-first GRU started from a given state (PyTorch exports linear_before_reset=1),
    then a linear layer on the last step."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(6, 12, batch_first=True)
        self.head = nn.Linear(12, 3)

    def forward(self, x, h0):
        y, h = self.gru(x, h0)
        return self.head(y[:, -1]), h


class ReluRnn(nn.Module):
    """A bidirectional Elman RNN with ReLU (ONNX RNN with activations Relu, Relu)."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.RNN(4, 10, nonlinearity="relu", bidirectional=True)

    def forward(self, x):
        y, h = self.rnn(x)
        return y, h


def build_mlp():
    torch.manual_seed(1)
    model = MLP().eval()
    x = torch.randn(4, 64)
    return model, {"x": x}, ["probs"]


def build_cnn():
    torch.manual_seed(2)
    model = CNN()
    # Non-trivial running statistics: a few training-mode passes on shifted, scaled data.
    model.train()
    with torch.no_grad():
        for _ in range(4):
            model(torch.randn(8, 3, 16, 16) * 1.5 + 0.3)
        model.bn.weight.copy_(torch.rand(8) + 0.5)
        model.bn.bias.copy_(torch.randn(8) * 0.1)
    model.eval()
    image = torch.randn(2, 3, 16, 16)
    return model, {"image": image}, ["logits"]


def build_decoder():
    torch.manual_seed(4)
    model = Decoder().eval()
    return model, {"x": torch.randn(2, 3, 8, 8)}, ["image", "top"]


def build_lstm():
    torch.manual_seed(5)
    model = SequenceTagger().eval()
    return model, {"x": torch.randn(12, 2, 8)}, ["tags", "h", "c"]


def build_gru():
    torch.manual_seed(6)
    model = GruEncoder().eval()
    return model, {"x": torch.randn(3, 9, 6), "h0": torch.randn(1, 3, 12) * 0.5}, ["logits", "h"]


def build_rnn_relu():
    torch.manual_seed(7)
    model = ReluRnn().eval()
    with torch.no_grad():
        # Small recurrent weights keep the ReLU recurrence from growing over the steps.
        model.rnn.weight_hh_l0.mul_(0.5)
        model.rnn.weight_hh_l0_reverse.mul_(0.5)
    return model, {"x": torch.randn(7, 2, 4)}, ["y", "h"]


def build_transformer():
    torch.manual_seed(3)
    model = TinyTransformer()
    with torch.no_grad():
        # PyTorch initialises the attention biases and the layer norms to 0 / 1; perturb them so
        # every parameter matters (and constant folding cannot merge equal initializers).
        for name, p in model.named_parameters():
            if "bias" in name or "norm" in name:
                p.add_(torch.randn_like(p) * 0.05)
    model.eval()
    tokens = torch.randint(1, 100, (2, 8), dtype=torch.int64)
    tokens[1, 5:] = TinyTransformer.PAD  # the second sequence is 5 tokens long
    return model, {"tokens": tokens}, ["logits"]


def build_upsample():
    torch.manual_seed(4)
    model = UpsamplingNet().eval()
    image = torch.randn(1, 3, 12, 16)
    return model, {"image": image}, ["mask"]


# (name, builder, extra torch.onnx.export arguments, tolerance). In eval mode the exporter folds the
# BatchNorm2d into the Conv before it; cnn_bn is the same network exported with
# TrainingMode.PRESERVE (the module is still in eval mode), which keeps a BatchNormalization
# node (training_mode=0, running statistics) in the graph.
MODELS = [
    ("mlp", build_mlp, {}, TIGHT),
    ("cnn", build_cnn, {}, TIGHT),
    ("cnn_bn", build_cnn, {"training": torch.onnx.TrainingMode.PRESERVE}, TIGHT),
    ("transformer", build_transformer, {}, TRANSFORMER_TOL),
    ("upsample", build_upsample, {}, TIGHT),
    ("decoder", build_decoder, {}, TIGHT),
    ("lstm", build_lstm, {}, TIGHT),
    ("gru", build_gru, {}, TIGHT),
    ("rnn_relu", build_rnn_relu, {}, TIGHT),
]


def reference(model, inputs):
    # With grad enabled and parameters requiring grad, TransformerEncoderLayer takes its plain
    # (documented math) path, not the fused inference fast path; the outputs are detached.
    outs = model(*inputs.values())
    if isinstance(outs, torch.Tensor):
        outs = (outs,)
    return [o.detach() for o in outs]


def export_one(out_dir, name, build, export_kwargs, tol):
    model, inputs, output_names = build()
    model_dir = os.path.join(out_dir, name)
    os.makedirs(model_dir, exist_ok=True)
    path = os.path.join(model_dir, "model.onnx")
    input_names = list(inputs)

    expected = reference(model, inputs)
    # float64 copy of the same model: how far float32 rounding alone moves the outputs.
    model64 = build()[0].double()
    expected64 = reference(model64, {k: (v.double() if v.is_floating_point() else v) for k, v in inputs.items()})

    torch.onnx.export(model, tuple(inputs.values()), path, opset_version=OPSET, do_constant_folding=True,
                      input_names=input_names, output_names=output_names, export_params=True, **export_kwargs)
    proto = onnx.load(path)
    onnx.checker.check_model(proto)
    graph_inputs = [i.name for i in proto.graph.input]
    graph_outputs = [o.name for o in proto.graph.output]
    assert graph_inputs == input_names, (graph_inputs, input_names)
    assert graph_outputs == output_names, (graph_outputs, output_names)
    ops = sorted({n.op_type for n in proto.graph.node})

    entry = {"name": name, "dir": name, "inputs": {}, "outputs": {}, "ops": ops, "rtol": tol["rtol"], "atol": tol["atol"]}
    for key, value in inputs.items():
        array = value.numpy()
        assert array.dtype in (np.float32, np.int64), array.dtype
        fname = "input_%s.npy" % key
        np.save(os.path.join(model_dir, fname), array)
        entry["inputs"][key] = fname
    f64_err = []
    for key, value, value64 in zip(output_names, expected, expected64):
        array = value.numpy()
        assert array.dtype == np.float32 and np.isfinite(array).all(), (key, array.dtype)
        fname = "expected_%s.npy" % key
        np.save(os.path.join(model_dir, fname), array)
        entry["outputs"][key] = fname
        ref64 = value64.numpy()
        abs_err = np.abs(array.astype(np.float64) - ref64)
        f64_err.append((key, float(abs_err.max()), float((abs_err / np.maximum(np.abs(ref64), 1e-30)).max()),
                        bool(np.allclose(array, ref64, rtol=tol["rtol"] / 10, atol=tol["atol"] / 10))))
    print("%-12s ops: %s" % (name, " ".join(ops)))
    for key, max_abs, max_rel, ok in f64_err:
        shape = tuple(np.load(os.path.join(model_dir, entry["outputs"][key])).shape)
        print("%-12s output %s %s: torch f32 vs f64 max_abs %.3g max_rel %.3g (within tol/10: %s)"
              % ("", key, list(shape), max_abs, max_rel, ok))
    return entry


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: export_torch_models.py OUT_DIR")
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    torch.set_num_threads(1)
    # cnn_bn's PRESERVE export warns about constant folding in training mode; the module is in
    # eval mode, so nothing trainable is folded.
    warnings.filterwarnings("ignore", message=".*constant folding be turned off.*")
    # F.interpolate's scale constants trip a harmless exporter shape-inference warning.
    warnings.filterwarnings("ignore", message=".*shape inference of prim::Constant type is missing.*")
    torch.use_deterministic_algorithms(True)
    manifest = {"opset": OPSET, "torch": torch.__version__, "onnx": onnx.__version__,
                "tolerance": "numpy allclose: |got - expected| <= atol + rtol * |expected|", "models": []}
    for name, build, export_kwargs, tol in MODELS:
        manifest["models"].append(export_one(out_dir, name, build, export_kwargs, tol))
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
        f.write("\n")
    print("wrote %s" % os.path.join(out_dir, "manifest.json"))


if __name__ == "__main__":
    main()
