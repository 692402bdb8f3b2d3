#!/usr/bin/python3
"""Export the small reference models used by dprun's tests and benchmarks.

Run with Debian's interpreter (it has torch, onnx and numpy):

    /usr/bin/python3 models/export_models.py

Writes, next to this script, for each model <name> in (mlp, cnn, transformer):
    <name>.onnx                     opset 17, dynamic "batch" axis on every input/output
    <name>.input.<inputname>.npy    batch-4 reference input(s)
    <name>.output.<outputname>.npy  PyTorch output(s) for those inputs
Everything is deterministic (torch.manual_seed(0) before building each model).
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

OPSET = 17
HERE = os.path.dirname(os.path.abspath(__file__))


# --------------------------------------------------------------------------- MLP
class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 256)
        self.fc2 = nn.Linear(256, 128)
        self.fc3 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


# --------------------------------------------------------------------------- CNN
class CNN(nn.Module):
    """Conv-BN-ReLU, MaxPool, Conv(stride 2)-BN-ReLU, two-branch residual Add,
    global average pool, flatten, linear.

    Note: in eval mode torch.onnx folds a BatchNorm that directly follows a
    Conv into the Conv weights, so bn1/bn2/bn3 disappear from the graph (their
    random stats are baked into the Conv initializers).  The second residual
    branch is a standalone BatchNorm (bn4, input is a ReLU output) so that the
    exported graph still contains a real BatchNormalization node."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(16, 32, 3, stride=2)
        self.bn2 = nn.BatchNorm2d(32)
        # residual block: branch a = conv3x3-BN-ReLU, branch b = BN(x)
        self.conv3 = nn.Conv2d(32, 32, 3, padding=1)
        self.bn3 = nn.BatchNorm2d(32)
        self.bn4 = nn.BatchNorm2d(32)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))      # [B,16,32,32]
        x = self.pool(x)                         # [B,16,16,16]
        x = F.relu(self.bn2(self.conv2(x)))      # [B,32,7,7]
        y = F.relu(self.bn3(self.conv3(x)))      # branch a [B,32,7,7]
        z = self.bn4(x)                          # branch b [B,32,7,7] (not foldable)
        x = F.relu(y + z)                        # residual Add
        x = self.gap(x)                          # [B,32,1,1]
        x = torch.flatten(x, 1)                  # [B,32]
        return self.fc(x)


def randomize_bn(model):
    """Give every BatchNorm non-trivial affine params and running stats."""
    g = torch.Generator().manual_seed(1234)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            c = m.num_features
            with torch.no_grad():
                m.running_mean.copy_(torch.randn(c, generator=g) * 0.5)
                m.running_var.copy_(torch.rand(c, generator=g) * 1.5 + 0.25)
                m.weight.copy_(torch.rand(c, generator=g) + 0.5)
                m.bias.copy_(torch.randn(c, generator=g) * 0.2)


# ------------------------------------------------------------------- Transformer
class EncoderLayer(nn.Module):
    """Post-norm encoder layer equivalent to nn.TransformerEncoderLayer(
    d_model, nhead, dim_feedforward, activation="gelu", batch_first=True,
    dropout=0, norm_first=False), written explicitly so that the exported
    graph only contains plain ONNX ops (MatMul, Softmax, LayerNormalization,
    Erf, ...) and no fused attention."""

    def __init__(self, d_model=64, nhead=4, dim_ff=128):
        super().__init__()
        self.d_model = d_model
        self.nhead = nhead
        self.head_dim = d_model // nhead
        self.q = nn.Linear(d_model, d_model)
        self.k = nn.Linear(d_model, d_model)
        self.v = nn.Linear(d_model, d_model)
        self.out = nn.Linear(d_model, d_model)
        self.ln1 = nn.LayerNorm(d_model)
        self.ff1 = nn.Linear(d_model, dim_ff)
        self.ff2 = nn.Linear(dim_ff, d_model)
        self.ln2 = nn.LayerNorm(d_model)

    def split_heads(self, t):
        # [B,S,D] -> [B,H,S,hd]
        b, s = t.shape[0], t.shape[1]
        return t.reshape(b, s, self.nhead, self.head_dim).transpose(1, 2)

    def forward(self, x, add_mask):
        # x: [B,S,D]; add_mask: [B,1,1,S] additive (0 keep, -1e4 pad)
        b, s = x.shape[0], x.shape[1]
        q = self.split_heads(self.q(x))
        k = self.split_heads(self.k(x))
        v = self.split_heads(self.v(x))
        scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))
        scores = scores + add_mask
        probs = torch.softmax(scores, dim=-1)
        ctx = torch.matmul(probs, v)                       # [B,H,S,hd]
        ctx = ctx.transpose(1, 2).reshape(b, s, self.d_model)
        x = self.ln1(x + self.out(ctx))
        h = F.gelu(self.ff1(x))                            # exact (erf) GELU
        x = self.ln2(x + self.ff2(h))
        return x


class TinyTransformer(nn.Module):
    def __init__(self, vocab=1000, d_model=64, max_len=128, nhead=4, dim_ff=128, layers=2):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        self.layers = nn.ModuleList(EncoderLayer(d_model, nhead, dim_ff) for _ in range(layers))

    def forward(self, input_ids, attention_mask):
        s = input_ids.shape[1]
        pos_ids = torch.arange(s, device=input_ids.device).unsqueeze(0)   # [1,S]
        x = self.tok(input_ids) + self.pos(pos_ids)                         # [B,S,D]
        add_mask = ((1.0 - attention_mask) * -1e4).unsqueeze(1).unsqueeze(2)  # [B,1,1,S]
        for layer in self.layers:
            x = layer(x, add_mask)
        hidden = x
        pooled = hidden.mean(dim=1)                                         # [B,D]
        return hidden, pooled


def randomize_ln(model):
    """Give every LayerNorm non-trivial affine params (defaults are 1/0, which
    would also make torch dedupe them into Identity nodes)."""
    g = torch.Generator().manual_seed(4321)
    for m in model.modules():
        if isinstance(m, nn.LayerNorm):
            n = m.normalized_shape[0]
            with torch.no_grad():
                m.weight.copy_(torch.rand(n, generator=g) + 0.5)
                m.bias.copy_(torch.randn(n, generator=g) * 0.1)


def check_against_torch_layer(model):
    """Sanity check: our explicit layer matches nn.TransformerEncoderLayer."""
    ref = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, activation="gelu",
                                     batch_first=True).eval()
    ours = model.layers[0]
    with torch.no_grad():
        ref.self_attn.in_proj_weight.copy_(torch.cat([ours.q.weight, ours.k.weight, ours.v.weight]))
        ref.self_attn.in_proj_bias.copy_(torch.cat([ours.q.bias, ours.k.bias, ours.v.bias]))
        ref.self_attn.out_proj.weight.copy_(ours.out.weight)
        ref.self_attn.out_proj.bias.copy_(ours.out.bias)
        ref.linear1.load_state_dict(ours.ff1.state_dict())
        ref.linear2.load_state_dict(ours.ff2.state_dict())
        ref.norm1.load_state_dict(ours.ln1.state_dict())
        ref.norm2.load_state_dict(ours.ln2.state_dict())
        x = torch.randn(2, 7, 64)
        keep = torch.ones(2, 7)
        keep[1, 5:] = 0
        add = ((1.0 - keep) * -1e4).unsqueeze(1).unsqueeze(2)
        a = ours(x, add)
        b = ref(x, src_key_padding_mask=(keep == 0))
        # PyTorch's fast path returns zeros for padded positions; compare kept ones
        diff = (a - b)[keep.bool()].abs().max().item()
    if diff > 1e-4:
        raise SystemExit(f"explicit encoder layer differs from nn.TransformerEncoderLayer: {diff}")
    return diff


# ----------------------------------------------------------------------- export
def export(name, model, inputs, input_names, output_names, dynamic_axes):
    model.eval()
    path = os.path.join(HERE, f"{name}.onnx")
    with torch.no_grad():
        outputs = model(*inputs)
        if isinstance(outputs, torch.Tensor):
            outputs = (outputs,)
        torch.onnx.export(
            model, tuple(inputs), path,
            export_params=True, opset_version=OPSET, do_constant_folding=True,
            input_names=input_names, output_names=output_names,
            dynamic_axes=dynamic_axes,
        )
    for n, t in zip(input_names, inputs):
        np.save(os.path.join(HERE, f"{name}.input.{n}.npy"), np.ascontiguousarray(t.numpy()))
    for n, t in zip(output_names, outputs):
        np.save(os.path.join(HERE, f"{name}.output.{n}.npy"), np.ascontiguousarray(t.numpy()))
    size = os.path.getsize(path)
    if size >= 4 * 1024 * 1024:
        raise SystemExit(f"{path} is {size} bytes (limit 4 MB)")
    print(f"wrote {path} ({size} bytes)")


def main():
    B = 4

    torch.manual_seed(0)
    mlp = MLP().eval()
    x = torch.randn(B, 784)
    export("mlp", mlp, [x], ["input"], ["logits"],
           {"input": {0: "batch"}, "logits": {0: "batch"}})

    torch.manual_seed(0)
    cnn = CNN()
    randomize_bn(cnn)
    cnn.eval()
    img = torch.randn(B, 3, 32, 32)
    export("cnn", cnn, [img], ["image"], ["logits"],
           {"image": {0: "batch"}, "logits": {0: "batch"}})

    torch.manual_seed(0)
    tr = TinyTransformer()
    randomize_ln(tr)
    tr.eval()
    diff = check_against_torch_layer(tr)
    print(f"explicit encoder layer vs nn.TransformerEncoderLayer: max abs diff {diff:.3g}")
    S = 16
    ids = torch.randint(0, 1000, (B, S), dtype=torch.int64)
    mask = torch.ones(B, S, dtype=torch.float32)
    mask[1, 12:] = 0.0   # padded tail
    mask[2, 9:] = 0.0
    mask[3, 4:] = 0.0
    export("transformer", tr, [ids, mask], ["input_ids", "attention_mask"], ["hidden", "pooled"],
           {"input_ids": {0: "batch", 1: "seq"},
            "attention_mask": {0: "batch", 1: "seq"},
            "hidden": {0: "batch", 1: "seq"},
            "pooled": {0: "batch"}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
