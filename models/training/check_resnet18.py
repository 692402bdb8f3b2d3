#!/usr/bin/python3
"""Trains torchvision's ResNet-18 with PyTorch and with `dprun train`, and compares them.

Run from the repository root with Debian's interpreter, after building dprun:

    /usr/bin/python3 models/training/check_resnet18.py [--image-size 224] [--batch 8] ...

A ResNet-18 is about 45 MB, too big to keep as a reference case, so this script makes one
in a temporary directory: torchvision's resnet18 (random initialization, fixed seed, 1000
classes) exported in training mode (BatchNorm in training mode, opset 15, dynamic batch)
exactly as models/training/make_references.py exports its cases, random images and labels,
then PyTorch trains it for a few steps with SGD (momentum 0.9, weight decay 1e-4) on a
simulated DataParallel over --devices (torch.chunk split, each replica's mean loss weighted
by its share of the rows, BatchNorm running statistics from replica 0), and
`build/dprun train` trains the exported model with the same settings.

Compared, as tests/cli/train_references_test.cpp does: the loss of each step and every
initializer of the saved model (parameters and BatchNorm running statistics), each within
1e-4 relative + 1e-6 absolute of PyTorch's. The last line is

    check_resnet18: PASS|FAIL ...

with the max relative error (|dprun - torch| / max(|torch|, 0.01): below 0.01 the absolute
floor is what the tolerance allows) and the worst value as a fraction of the tolerance.
Exit status 0 for PASS, 1 for FAIL.

--dtype float64 trains both in float64 (the model exported in float64, dprun's float64
kernels): a check of the math itself, free of rounding. In float32 (the default) the line
also gives how far PyTorch's own float32 result is from its float64 result, and how far
dprun's is, as fractions of the same tolerance (--no-float64 skips that extra PyTorch run).
ResNet-18 amplifies float32 rounding, so in float32 the comparison fails on a few weights,
and by about as much as PyTorch's own float32 result misses its float64 one: at 224x224,
batch 8, PyTorch's float32 conv1.weight is 17 times the tolerance away from float64 after
one step and about 1000 times after three. Gradients that are long sums of mostly
cancelling products (conv1's weight gradient sums 8 x 112 x 112 of them per weight), and
ReLU inputs within rounding of 0 that switch sides, make float32 results depend on the
summation order, and the steps that follow grow the difference.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnx.numpy_helper
import torch
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_references as refs  # noqa: E402  (the same export, DataParallel step and optimizer)

REL, ABS = 1e-4, 1e-6


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dprun", default="build/dprun", help="the dprun binary (default build/dprun)")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--rows", type=int, default=16, help="rows of data (default 16: two batches)")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--devices", default="cpu:0,cpu:1")
    p.add_argument("--seed", type=int, default=18)
    p.add_argument("--dtype", choices=["float32", "float64"], default="float32",
                   help="the precision both train in (default float32)")
    p.add_argument("--no-float64", action="store_true",
                   help="in float32, skip PyTorch's float64 run (how far rounding moves it)")
    p.add_argument("--keep", metavar="DIR", help="work in DIR and keep the files")
    return p.parse_args()


def make_model(seed):
    torch.manual_seed(seed)
    return torchvision.models.resnet18(weights=None)


def make_data(seed, rows, size):
    g = torch.Generator().manual_seed(seed + 1000)
    x = torch.randn(rows, 3, size, size, generator=g)
    y = torch.randint(0, 1000, (rows,), generator=g)
    return x, y


def torch_train(args, dtype):
    model = make_model(args.seed)
    x, y = make_data(args.seed, args.rows, args.image_size)
    if dtype == torch.float64:
        model, x = model.double(), x.double()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
    n_devices = len(args.devices.split(","))
    losses = refs.train(model, opt, [x], y, refs.make_loss("cross_entropy"), args.batch,
                        args.steps, n_devices)
    state = {k: v.detach().double().numpy() for k, v in model.state_dict().items()
             if not k.endswith("num_batches_tracked")}
    return losses, state


def compare(got, want):
    """(max relative error, worst fraction of the tolerance, name of the worst, values)."""
    max_rel, worst, worst_name, count = 0.0, 0.0, "", 0
    for name, w in want.items():
        g = np.asarray(got[name], dtype=np.float64)
        w = np.asarray(w, dtype=np.float64)
        if g.shape != w.shape:
            return float("inf"), float("inf"), f"{name} (shape {g.shape} vs {w.shape})", count
        d = np.abs(g - w)
        max_rel = max(max_rel, float((d / np.maximum(np.abs(w), ABS / REL)).max(initial=0)))
        frac = float((d / (ABS + REL * np.abs(w))).max(initial=0))
        if frac > worst:
            worst, worst_name = frac, name
        count += w.size
    return max_rel, worst, worst_name, count


def main():
    args = parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    if not os.path.exists(args.dprun):
        raise SystemExit(f"check_resnet18: FAIL: {args.dprun} not found (build dprun first)")
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
        return check(args, args.keep)
    with tempfile.TemporaryDirectory(prefix="check_resnet18_") as work:
        return check(args, work)


def check(args, work):
    model_path = os.path.join(work, "resnet18.onnx")

    dtype = torch.float64 if args.dtype == "float64" else torch.float32
    model = make_model(args.seed).to(dtype)
    x, y = make_data(args.seed, args.rows, args.image_size)
    x = x.to(dtype)
    refs.export(model, model_path, [x[:2]], ["x"], ["logits"],
                {"x": {0: "batch"}, "logits": {0: "batch"}}, 15)
    np.save(os.path.join(work, "x.npy"), x.numpy())
    np.save(os.path.join(work, "target.npy"), y.numpy())

    t0 = time.time()
    losses, state = torch_train(args, dtype)
    t_torch = time.time() - t0
    print(f"PyTorch {args.dtype}: losses {[round(v, 6) for v in losses]} ({t_torch:.1f} s)", flush=True)

    cmd = [args.dprun, "train", model_path, "--input", f"x={work}/x.npy",
           "--target", f"{work}/target.npy", "--loss", "cross_entropy", "--optimizer", "sgd",
           "--lr", f"{args.lr:g}", "--momentum", "0.9", "--weight-decay", "0.0001",
           "--batch", str(args.batch), "--steps", str(args.steps), "--no-shuffle",
           "--devices", args.devices, "--save", f"{work}/trained.onnx",
           "--json", f"{work}/run.json"]
    t0 = time.time()
    run = subprocess.run(cmd, capture_output=True, text=True)
    t_dprun = time.time() - t0
    if run.returncode != 0:
        print(run.stdout + run.stderr)
        print(f"check_resnet18: FAIL: dprun train exited with {run.returncode}")
        return 1
    dprun_losses = np.array(json.load(open(f"{work}/run.json"))["losses"], dtype=np.float64)
    print(f"dprun: losses {[round(v, 6) for v in dprun_losses]} ({t_dprun:.1f} s)", flush=True)
    trained = {i.name: onnx.numpy_helper.to_array(i)
               for i in onnx.load(f"{work}/trained.onnx").graph.initializer}
    missing = sorted(set(state) - set(trained))
    if missing:
        print(f"check_resnet18: FAIL: the saved model lacks {missing[:5]}")
        return 1

    max_rel, worst, worst_name, count = compare(trained, state)
    l_rel, l_worst, _, _ = compare({"loss": dprun_losses}, {"loss": losses})
    if l_worst > worst:
        worst, worst_name = l_worst, "the losses"
    max_rel = max(max_rel, l_rel)
    conditioning = ""
    if dtype == torch.float32 and not args.no_float64:
        _, state64 = torch_train(args, torch.float64)
        _, torch_off, torch_name, _ = compare(state, state64)
        _, dprun_off, dprun_name, _ = compare(trained, state64)
        conditioning = (f"; against PyTorch float64, PyTorch float32 is {torch_off:.3g} of the "
                        f"tolerance off ({torch_name}) and dprun {dprun_off:.3g} ({dprun_name})")
    ok = worst <= 1.0 and len(dprun_losses) == len(losses)
    n_params = sum(1 for _ in model.named_parameters())
    print(f"check_resnet18: {'PASS' if ok else 'FAIL'}: {args.dtype}, batch {args.batch}, "
          f"{args.image_size}x{args.image_size}, {args.steps} steps on {args.devices}: "
          f"{args.steps} losses and {len(state)} initializers ({n_params} parameters, "
          f"{len(state) - n_params} running statistics, {count} values) within {REL:g} relative "
          f"+ {ABS:g} absolute; max relative error {max_rel:.2g}, worst {worst:.3g} of the "
          f"tolerance ({worst_name}){conditioning}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
