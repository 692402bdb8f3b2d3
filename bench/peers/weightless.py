#!/usr/bin/python3
"""Carry a large ONNX model without its weights, and give it random ones where it lands.

    weightless.py strip IN.onnx OUT.onnx    keep the graph and every initializer of at most
                                            4096 elements (biases, shapes, norms); drop the
                                            data of the larger ones, keeping their dims
    weightless.py fill IN.onnx OUT.onnx     give every initializer without data normal values
                                            scaled by sqrt(2 / fan-in), He's scale, so that
                                            activations keep their size through ReLU layers
                                            (numpy seed 0)

The device machine is reached with at most 64 MiB of files, and ResNet-18 alone is 45 MB;
throughput and a comparison of two engines on the same file do not depend on the values.
"""
import sys

import numpy as np
import onnx
from onnx import numpy_helper

KEEP = 4096


def count(init):
    n = 1
    for d in init.dims:
        n *= d
    return n


def strip(model):
    for init in model.graph.initializer:
        if count(init) > KEEP:
            init.ClearField("raw_data")
            init.ClearField("float_data")
            init.ClearField("int64_data")
            init.ClearField("int32_data")
            init.ClearField("double_data")


def has_data(init):
    return (init.HasField("raw_data") or len(init.float_data) or len(init.int64_data) or
            len(init.int32_data) or len(init.double_data) or count(init) == 0)


def fill(model):
    rng = np.random.default_rng(0)
    for i, init in enumerate(model.graph.initializer):
        if has_data(init):
            continue
        if init.data_type != onnx.TensorProto.FLOAT:
            sys.exit(f"weightless.py: '{init.name}' has no data and is not float32")
        dims = list(init.dims)
        fan_in = max(1, count(init) // dims[0]) if dims else 1
        values = (rng.standard_normal(dims) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        model.graph.initializer[i].CopyFrom(numpy_helper.from_array(values, init.name))


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("strip", "fill"):
        sys.exit("usage: weightless.py strip|fill IN.onnx OUT.onnx")
    model = onnx.load(sys.argv[2])
    (strip if sys.argv[1] == "strip" else fill)(model)
    onnx.save(model, sys.argv[3])


if __name__ == "__main__":
    main()
