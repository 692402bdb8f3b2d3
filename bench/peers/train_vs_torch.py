#!/usr/bin/python3
"""The PyTorch side of bench/peers/train_vs_torch.sh (run with Debian's /usr/bin/python3).

    train_vs_torch.py export MODEL DIR BATCH
        Builds MODEL (one of those below) with a fixed seed, exports it to DIR/MODEL.onnx in
        training mode with do_constant_folding=False (initializers keep PyTorch's names), and
        writes a data set DIR/MODEL.x.npy, DIR/MODEL.target.npy of 8 batches. The MLP has a
        dynamic batch dim; ResNet-18 is exported with a static batch of BATCH.
    train_vs_torch.py time MODEL DIR BATCH THREADS STEPS WARMUP
        Trains the same model (same seed, same data, batch k = rows k*BATCH.., wrapping round)
        with the model's optimizer for WARMUP + STEPS steps on THREADS threads (torch's and the
        BLAS's: OPENBLAS_NUM_THREADS and OMP_NUM_THREADS default to THREADS) and prints one JSON
        line: samples_per_s over the STEPS steps after the warm-up, the same from the median
        step time (median_step_samples_per_s), every step's seconds, and the peak resident
        memory over the process's own before the model was built (peak_resident_bytes: VmHWM
        less VmRSS then, as `dprun train --json` reports it).

Models:
    mlp       Linear(784,512)-GELU-Linear(512,256)-GELU-Linear(256,10)-LogSoftmax, nll loss,
              SGD lr 0.01 momentum 0.9
    resnet18  torchvision resnet18 (random init, 1000 classes) on 3x224x224, cross entropy,
              SGD lr 0.01 momentum 0.9
    lstm_lm   Embedding(1000, 128) - 2-layer bidirectional LSTM(128, 128, batch_first) -
              Linear(256, 1000) at every position, on token sequences of length 32: logits
              [N, 32, 1000], cross entropy over the last dim against the next tokens, SGD lr
              0.01 momentum 0.9 (exported at a fixed sequence length: dprun unrolls the
              recurrence over it for the gradient)
    vit       torchvision VisionTransformer on 3x32x32 images: patch 4 (65 tokens), 4 layers,
              hidden 256, 4 heads, MLP 512, 10 classes; cross entropy, SGD lr 0.01 momentum
              0.9; exported at opset 15 (LayerNorm, GELU and attention decomposed)
    vit17     the same exported at opset 17 (LayerNormalization as one op)
    vit_small the same with patch 8 (17 tokens), 2 layers, hidden 64, 4 heads, MLP 128, opset 15
    gpt       a GPT decoder language model: token and position embeddings, 4 pre-norm blocks
              (hidden 256, 4 heads, causal mask, MLP 1024 with GELU), final LayerNorm, the head
              tied to the token embedding (vocab 8192), weights drawn as GPT-2's (normal, std
              0.02, zero biases), on sequences of 128 tokens; cross
              entropy over the last dim against the next tokens, AdamW lr 1e-3 weight decay
              0.01; exported at opset 15
    gpt17     the same exported at opset 17
"""
import json
import os
import sys
import time

if len(sys.argv) > 5 and sys.argv[1] == "time":
    # torch.set_num_threads does not reach the BLAS behind Debian's torch (OpenBLAS, which
    # starts a thread per core); it must be told before it is loaded.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", sys.argv[5])
    os.environ.setdefault("OMP_NUM_THREADS", sys.argv[5])

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

BATCHES = 8
LM_VOCAB, LM_SEQ = 1000, 32
GPT_VOCAB, GPT_SEQ = 8192, 128


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 512)
        self.fc2 = nn.Linear(512, 256)
        self.fc3 = nn.Linear(256, 10)

    def forward(self, x):
        x = F.gelu(self.fc1(x))
        x = F.gelu(self.fc2(x))
        return F.log_softmax(self.fc3(x), dim=1)


class LSTMLM(nn.Module):
    def __init__(self, vocab=LM_VOCAB, d=128, hidden=128):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.lstm = nn.LSTM(d, hidden, num_layers=2, bidirectional=True, batch_first=True)
        self.head = nn.Linear(2 * hidden, vocab)

    def forward(self, idx):
        y, _ = self.lstm(self.emb(idx))
        return self.head(y)


class GPTBlock(nn.Module):
    """Pre-norm decoder block: x + attn(ln1(x)), then x + mlp(ln2(x))."""

    def __init__(self, d, n_head):
        super().__init__()
        self.n_head = n_head
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.fc_out = nn.Linear(4 * d, d)

    def forward(self, x):
        b, s, d = x.shape
        def heads(t):  # [B, H, S, d / H]
            return t.reshape(b, s, self.n_head, d // self.n_head).transpose(1, 2)

        q, k, v = (heads(t) for t in self.qkv(self.ln1(x)).split(d, dim=-1))
        att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / (d // self.n_head) ** 0.5)
        pos = torch.arange(s, device=x.device)
        att = att.masked_fill(pos.unsqueeze(0) > pos.unsqueeze(1), float("-inf"))
        y = torch.matmul(torch.softmax(att, dim=-1), v).transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(y)
        return x + self.fc_out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab=GPT_VOCAB, d=256, layers=4, n_head=4, max_seq=GPT_SEQ):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_seq, d)
        self.blocks = nn.Sequential(*[GPTBlock(d, n_head) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight  # tied
        # GPT-2's initialization: with the default N(0, 1) embedding the tied head's logits have
        # a standard deviation of 16, and softmax's probabilities underflow into subnormals.
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, 0.0, 0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device).unsqueeze(0)
        return self.head(self.ln_f(self.blocks(self.tok(idx) + self.pos(pos))))


def lm_loss(logits, target):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))


def build(name):
    torch.manual_seed(0)
    if name == "mlp":
        return MLP(), (784,), 10, F.nll_loss
    if name == "resnet18":
        import torchvision
        return torchvision.models.resnet18(), (3, 224, 224), 1000, F.cross_entropy
    if name == "mobilenet_v2":
        import torchvision
        return torchvision.models.mobilenet_v2(), (3, 224, 224), 1000, F.cross_entropy
    if name == "lstm_lm":
        return LSTMLM(), None, LM_VOCAB, lm_loss
    if name in ("vit", "vit17"):
        from torchvision.models.vision_transformer import VisionTransformer
        return (VisionTransformer(image_size=32, patch_size=4, num_layers=4, num_heads=4,
                                  hidden_dim=256, mlp_dim=512, num_classes=10),
                (3, 32, 32), 10, F.cross_entropy)
    if name == "vit_small":
        from torchvision.models.vision_transformer import VisionTransformer
        return (VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4,
                                  hidden_dim=64, mlp_dim=128, num_classes=10),
                (3, 32, 32), 10, F.cross_entropy)
    if name in ("gpt", "gpt17"):
        return GPT(), None, GPT_VOCAB, lm_loss
    raise SystemExit(f"unknown model {name}")


def data(name, batch):
    _, shape, classes, _ = build(name)
    g = torch.Generator().manual_seed(1)
    if shape is None:  # token sequences; the target is each next token
        seq = GPT_SEQ if name.startswith("gpt") else LM_SEQ
        full = torch.randint(0, classes, (batch * BATCHES, seq + 1), generator=g)
        return full[:, :-1].contiguous(), full[:, 1:].contiguous()
    x = torch.randn((batch * BATCHES,) + shape, generator=g)
    target = torch.randint(0, classes, (batch * BATCHES,), generator=g)
    return x, target


def export(name, out_dir, batch):
    model, shape, _, _ = build(name)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    x, target = data(name, batch)
    dynamic = {"x": {0: "batch"}} if name == "mlp" else None
    path = os.path.join(out_dir, name + ".onnx")
    torch.onnx.export(model, x[:batch], path, input_names=["x"], output_names=["y"],
                      dynamic_axes=dynamic,
                      opset_version=17 if name in ("mlp", "vit17", "gpt17") else 15,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    # Exporting in training mode runs the model once, which updates BatchNorm's running
    # statistics; put the values from before the export back.
    import onnx
    import onnx.numpy_helper
    proto = onnx.load(path)
    for init in proto.graph.initializer:
        if init.name in state:
            init.CopyFrom(onnx.numpy_helper.from_array(state[init.name].numpy(), init.name))
    onnx.save(proto, path)
    np.save(os.path.join(out_dir, name + ".x.npy"), x.numpy())
    np.save(os.path.join(out_dir, name + ".target.npy"), target.numpy())


def resident_bytes():
    """The process's resident memory now (VmRSS)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_resident_bytes():
    """The process's peak resident memory so far (VmHWM)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise SystemExit("no VmHWM in /proc/self/status")


def time_training(name, batch, threads, steps, warmup):
    torch.set_num_threads(threads)
    baseline = resident_bytes()  # torch and its libraries loaded, no model yet
    model, _, _, loss_fn = build(name)
    model.train()
    x, target = data(name, batch)
    if name.startswith("gpt"):
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    seconds = []
    for step in range(warmup + steps):
        k = step % BATCHES
        xb, tb = x[k * batch:(k + 1) * batch], target[k * batch:(k + 1) * batch]
        start = time.perf_counter()
        optimizer.zero_grad()
        loss = loss_fn(model(xb), tb)
        loss.backward()
        optimizer.step()
        seconds.append(time.perf_counter() - start)
    timed = seconds[warmup:]
    median = sorted(timed)[(len(timed) - 1) // 2]
    print(json.dumps({"runtime": "pytorch " + torch.__version__, "model": name, "batch": batch,
                      "threads": threads, "steps": steps, "warmup_steps": warmup,
                      "samples_per_s": batch * len(timed) / sum(timed),
                      "median_step_samples_per_s": batch / median,
                      "step_seconds": seconds, "last_loss": loss.item(),
                      "peak_resident_bytes": peak_resident_bytes() - baseline}))


def main():
    mode, name, out_dir, batch = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    if mode == "export":
        export(name, out_dir, batch)
    elif mode == "time":
        threads, steps, warmup = map(int, sys.argv[5:8])
        time_training(name, batch, threads, steps, warmup)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
