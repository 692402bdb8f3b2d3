#!/usr/bin/env python3
"""A model with Dropout for checking that `dprun train` repeats: Linear(12,16) - ReLU -
Dropout(0.5) - Linear(16,5), exported in training mode (opset 15, Dropout with a constant
training_mode input) to models/training/mlp_dropout.onnx. It trains on mlp_sgd's data. It is
not a reference case: PyTorch's Dropout masks come from its own generator, so dprun's losses
are compared with dprun's own, run against run.

    /usr/bin/python3 models/training/make_dropout_mlp.py
"""
import os

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    torch.manual_seed(150)
    model = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Dropout(0.5), nn.Linear(16, 5))
    model.train()
    path = os.path.join(HERE, "mlp_dropout.onnx")
    torch.onnx.export(model, torch.zeros(2, 12), path, input_names=["x"], output_names=["logits"],
                      dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}}, opset_version=15,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    print("wrote", path)


if __name__ == "__main__":
    main()
