#!/usr/bin/env python3
"""PyTorch's eval-mode outputs of a trained reference model, for checking the model that
`dprun train --save` writes for serving.

For `cnn_bn_1dev` (a CNN with two BatchNorms): builds the case's module, loads PyTorch's own
trained weights and running statistics from `cnn_bn_1dev.trained.onnx` (initializers carry
the state_dict names), switches to eval(), and writes the logits of every row of
`cnn_bn_1dev.x.npy`, each row run alone (batch 1), to `cnn_bn_1dev.eval_logits.npy`.

    /usr/bin/python3 models/training/make_eval_reference.py
"""
import os
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_references  # noqa: E402  (the case's module definitions)


def main():
    torch.set_num_threads(1)
    case = os.path.join(HERE, "cnn_bn_1dev")
    model = make_references.CNN()
    trained = onnx.load(case + ".trained.onnx")
    weights = {i.name: torch.from_numpy(numpy_helper.to_array(i).copy())
               for i in trained.graph.initializer}
    state = model.state_dict()
    missing = [k for k in state if k not in weights and not k.endswith("num_batches_tracked")]
    if missing:
        sys.exit("not in the trained model: " + ", ".join(missing))
    model.load_state_dict({k: weights.get(k, v) for k, v in state.items()})
    model.eval()
    x = torch.from_numpy(np.load(case + ".x.npy"))
    with torch.no_grad():
        logits = torch.cat([model(x[i:i + 1]) for i in range(x.shape[0])])
    np.save(case + ".eval_logits.npy", logits.numpy().astype(np.float32))
    print(f"wrote {case}.eval_logits.npy {tuple(logits.shape)}")


if __name__ == "__main__":
    main()
