#!/usr/bin/python3
"""Export torchvision models to ONNX for the throughput comparisons in bench/README.md.

    /usr/bin/python3 bench/peers/export_torchvision.py OUT_DIR NAME...

Writes OUT_DIR/NAME.onnx for each torchvision model NAME (resnet18, mobilenet_v2, ...), opset
17, input "input" of shape [batch, 3, 224, 224] with a dynamic batch dim, in eval mode. The
weights are random (torch.manual_seed(0)): this machine cannot download the pretrained ones,
and throughput does not depend on their values. An existing file is kept.
"""
import os
import sys

import torch
import torchvision

OPSET = 17


def export(name, path):
    torch.manual_seed(0)
    builder = getattr(torchvision.models, name, None)
    if builder is None or not callable(builder):
        sys.exit(f"export_torchvision.py: torchvision has no model named '{name}'")
    model = builder(weights=None).eval()
    example = torch.randn(1, 3, 224, 224)
    partial = path + ".partial"
    with torch.no_grad():
        torch.onnx.export(model, example, partial, opset_version=OPSET, input_names=["input"],
                          output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    os.replace(partial, path)  # never leave a half-written model behind


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: export_torchvision.py OUT_DIR NAME...")
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    for name in sys.argv[2:]:
        path = os.path.join(out_dir, name + ".onnx")
        if not os.path.exists(path):
            export(name, path)
        print(path)


if __name__ == "__main__":
    main()
