#!/usr/bin/python3
"""The ConvTranspose benchmark model (docs/PERFORMANCE.md): a decoder-style upsampling layer,
ConvTranspose2d(64 -> 32, 4x4, stride 2, padding 1) on x [1, 64, 32, 32] -> [1, 32, 64, 64],
exported by Debian's PyTorch at opset 17.

usage: /usr/bin/python3 bench/export_deconv.py OUT.onnx
"""
import sys

import torch

if len(sys.argv) != 2:
    sys.exit("usage: export_deconv.py OUT.onnx")
torch.manual_seed(0)
model = torch.nn.ConvTranspose2d(64, 32, 4, stride=2, padding=1).eval()
torch.onnx.export(model, torch.randn(1, 64, 32, 32), sys.argv[1], input_names=["x"], output_names=["y"],
                  opset_version=17)
