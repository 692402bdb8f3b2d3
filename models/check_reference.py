#!/usr/bin/python3
"""Check an exported model and print its op histogram and I/O signature.

    /usr/bin/python3 models/check_reference.py mlp [cnn transformer ...]
    /usr/bin/python3 models/check_reference.py            # all three

Runs onnx.checker.check_model (full check), prints opset, inputs/outputs with
symbolic shapes, the op histogram, and the shapes/dtypes of the reference
.npy files found next to the model.
"""
import collections
import glob
import os
import sys

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))


def dims(vi):
    t = vi.type.tensor_type
    out = []
    for d in t.shape.dim:
        out.append(d.dim_param if d.dim_param else str(d.dim_value))
    return f"{onnx.TensorProto.DataType.Name(t.elem_type).lower()}[{', '.join(out)}]"


def check(name):
    path = os.path.join(HERE, f"{name}.onnx")
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    print(f"== {name}: {path} ({os.path.getsize(path)} bytes) checker OK")
    print("   opset:", ", ".join(f"{o.domain or 'ai.onnx'}:{o.version}" for o in model.opset_import))
    for vi in model.graph.input:
        print(f"   input  {vi.name}: {dims(vi)}")
    for vi in model.graph.output:
        print(f"   output {vi.name}: {dims(vi)}")
    hist = collections.Counter(
        (n.domain + "::" if n.domain else "") + n.op_type for n in model.graph.node)
    print(f"   nodes: {len(model.graph.node)}, initializers: {len(model.graph.initializer)}")
    print("   op histogram:", ", ".join(f"{k} {v}" for k, v in sorted(hist.items())))
    nonstd = [k for k in hist if "::" in k]
    if nonstd:
        print("   NON-STANDARD ops:", nonstd)
    for f in sorted(glob.glob(os.path.join(HERE, f"{name}.input.*.npy")) +
                    glob.glob(os.path.join(HERE, f"{name}.output.*.npy"))):
        a = np.load(f)
        print(f"   {os.path.basename(f)}: {a.dtype}{list(a.shape)}")
    return not nonstd


def main(argv):
    names = argv[1:] or ["mlp", "cnn", "transformer"]
    ok = all([check(n) for n in names])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
