#!/usr/bin/python3
"""Export a BERT-base-sized encoder (12 layers, d_model 768, 12 heads, feed-forward 3072,
vocabulary 30522, up to 512 positions) built from models/export_models.py's TinyTransformer.

    /usr/bin/python3 bench/peers/export_encoder.py OUT.onnx

Same graph as models/transformer.onnx (plain ONNX ops, no fused attention), inputs input_ids
and attention_mask [batch, seq]; random weights (torch.manual_seed(0)).
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models"))
from export_models import OPSET, TinyTransformer  # noqa: E402


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: export_encoder.py OUT.onnx")
    torch.manual_seed(0)
    model = TinyTransformer(vocab=30522, d_model=768, max_len=512, nhead=12, dim_ff=3072,
                            layers=12).eval()
    ids = torch.randint(0, 30522, (2, 16), dtype=torch.int64)
    mask = torch.ones(2, 16, dtype=torch.float32)
    partial = sys.argv[1] + ".partial"
    with torch.no_grad():
        torch.onnx.export(model, (ids, mask), partial, opset_version=OPSET,
                          input_names=["input_ids", "attention_mask"],
                          output_names=["hidden", "pooled"],
                          dynamic_axes={"input_ids": {0: "batch", 1: "seq"},
                                        "attention_mask": {0: "batch", 1: "seq"},
                                        "hidden": {0: "batch", 1: "seq"},
                                        "pooled": {0: "batch"}})
    os.replace(partial, sys.argv[1])


if __name__ == "__main__":
    main()
