"""Exports the tutorial's classifier from PyTorch to ONNX, with its data.

usage: /usr/bin/python3 docs/examples/export_classifier.py [OUT_DIR]   (default models/tutorial)

Writes, deterministically (re-running gives the same bytes):
  classifier.onnx        eval mode, for `dprun run`, `bench` and serving
  classifier.train.onnx  training mode, for `dprun train`
  train.x.npy train.y.npy val.x.npy val.y.npy   512 and 128 rows: 16 features, 4 classes
  sample.x.npy sample.logits.npy                8 rows and PyTorch's eval outputs for them
"""
import os
import sys

import numpy as np
import torch
from torch import nn


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 64)
        self.norm = nn.LayerNorm(64)
        self.fc2 = nn.Linear(64, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.norm(self.fc1(x))))


def export(model, out):
    x = torch.zeros(1, 16)  # an example input: 1 row of 16 features
    batch = {"x": {0: "batch"}, "logits": {0: "batch"}}  # dim 0 of x and logits: any size

    model.eval()  # for dprun run, bench and serving
    torch.onnx.export(model, (x,), f"{out}/classifier.onnx", input_names=["x"],
                      output_names=["logits"], dynamic_axes=batch, opset_version=17)

    model.train()  # for dprun train: BatchNorm on batch statistics, Dropout on
    torch.onnx.export(model, (x,), f"{out}/classifier.train.onnx", input_names=["x"],
                      output_names=["logits"], dynamic_axes=batch, opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)


def make_data(rows, generator):
    """Points labelled by a fixed random linear teacher: a learnable 4-class problem."""
    teacher = torch.randn(16, 4, generator=torch.Generator().manual_seed(7))
    x = torch.randn(rows, 16, generator=generator)
    return x, (x @ teacher).argmax(dim=1)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "models/tutorial"
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model = Classifier()
    export(model, out)

    generator = torch.Generator().manual_seed(1)
    for name, rows in (("train", 512), ("val", 128)):
        x, y = make_data(rows, generator)
        np.save(f"{out}/{name}.x.npy", x.numpy())
        np.save(f"{out}/{name}.y.npy", y.numpy())
    sample, _ = make_data(8, generator)
    np.save(f"{out}/sample.x.npy", sample.numpy())
    with torch.no_grad():
        np.save(f"{out}/sample.logits.npy", model.eval()(sample).numpy())


if __name__ == "__main__":
    main()
