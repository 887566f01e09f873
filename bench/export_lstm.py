#!/usr/bin/python3
"""The LSTM benchmark model (docs/PERFORMANCE.md): one LSTM layer, nn.LSTM(64 -> 128), over a
sequence of 50 steps with batch 1, x [50, 1, 64] -> y [50, 1, 128], exported by Debian's
PyTorch at opset 17 (one ONNX LSTM node, unrolled by the importer into 50 steps).

usage: /usr/bin/python3 bench/export_lstm.py OUT.onnx
"""
import sys

import torch


class Lstm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(64, 128)

    def forward(self, x):
        return self.lstm(x)[0]


if len(sys.argv) != 2:
    sys.exit("usage: export_lstm.py OUT.onnx")
torch.manual_seed(0)
model = Lstm().eval()
torch.onnx.export(model, torch.randn(50, 1, 64), sys.argv[1], input_names=["x"], output_names=["y"],
                  opset_version=17)
