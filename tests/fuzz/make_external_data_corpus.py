#!/usr/bin/python3
"""Writes the external-data models of the onnx_loader fuzz corpus (tests/fuzz/corpus/onnx_loader/
external_*.onnx). Each refers to a file of the folder tests/fuzz/fuzz_onnx_loader.cpp lays out
beside the model: some that load (w.bin, weights/w.bin, the link inside.bin), and every way out
(.., an absolute path, link.bin and up/, which lead outside), plus malformed offsets and lengths.
Run with Debian's python3-onnx: /usr/bin/python3 tests/fuzz/make_external_data_corpus.py"""
import os

import onnx
from onnx import TensorProto, helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "onnx_loader")


def external(name, location, **keys):
    tensor = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=[2])
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in [("location", location)] + sorted(keys.items()):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    return tensor


def add_model(weight, extra_nodes=()):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    nodes = [helper.make_node("Add", ["x", "w"], ["y"])] + list(extra_nodes)
    graph = helper.make_graph(nodes, "g", [x], [y], initializer=[weight])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def if_model(branch_weight):
    cond = helper.make_tensor("cond", TensorProto.BOOL, [], [True])
    branches = {}
    for name in ("then_branch", "else_branch"):
        out = helper.make_tensor_value_info("c", TensorProto.FLOAT, [2])
        branches[name] = helper.make_graph([], name, [], [out], initializer=[branch_weight])
    node = helper.make_node("If", ["cond"], ["z"], **branches)
    model = add_model(external("w", "w.bin"), [node])
    model.graph.initializer.append(cond)
    return model


def constant_model(value):
    return add_model(external("w", "w.bin"), [helper.make_node("Constant", [], ["c"], value=value)])


MODELS = {
    "inside": add_model(external("w", "w.bin")),
    "subfolder": add_model(external("w", "weights/w.bin", offset="8", length="8")),
    "inside_link": add_model(external("w", "inside.bin")),
    "dotdot": add_model(external("w", "../secret.bin")),
    "dotdot_deep": add_model(external("w", "weights/../../secret.bin")),
    "absolute": add_model(external("w", "/etc/passwd")),
    "link_out": add_model(external("w", "link.bin")),
    "folder_link_out": add_model(external("w", "up/secret.bin")),
    "folder": add_model(external("w", "weights")),
    "offset_negative": add_model(external("w", "w.bin", offset="-8")),
    "offset_text": add_model(external("w", "w.bin", offset="eight")),
    "offset_past_end": add_model(external("w", "w.bin", offset="60")),
    "length_huge": add_model(external("w", "w.bin", length="18446744073709551615")),
    "constant_out": constant_model(external("c", "../secret.bin")),
    "constant_inside": constant_model(external("c", "w.bin", offset="4")),
    "if_branch_out": if_model(external("c", "up/secret.bin")),
}

for name, model in MODELS.items():
    with open(os.path.join(OUT, f"external_{name}.onnx"), "wb") as f:
        f.write(model.SerializeToString())
print(f"wrote {len(MODELS)} models to {OUT}")
