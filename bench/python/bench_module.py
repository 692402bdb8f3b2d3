#!/usr/bin/python3
"""What the Python module costs beside the library it calls (bench/README.md, "From Python").

Run from the repository root with the build's module on the path, e.g.
`PYTHONPATH=build/python /usr/bin/python3 bench/python/bench_module.py call`:

- `call`: microseconds per `dp(x)` on one row of the tutorial classifier, one thread per device,
  on cpu:0 and on cpu:0,cpu:1: the median of --rounds rounds of --calls calls each. The C++
  figure to set beside it is `BM_DataParallel/classifier` of build/bench/dprun_bench.
- `memory`: the growth of the peak resident memory (ru_maxrss) over one `dp(x)` whose input is
  1 GiB of float32 rows of 64 (a model that sums each row, written with python3-onnx), and, for
  scale, over the same call on the input in Fortran order, which the module copies once.
- `data DIR`: writes the training data of `train`: --rows images 3x32x32 and their labels 0-9,
  random with a fixed seed, as DIR/x.npy and DIR/y.npy.
- `train DIR`: trains models/cnn.onnx on --devices (cpu:0,cpu:1) from a torch DataLoader over those rows as
  in-memory tensors (batch 64, in order or with --shuffle a new order each epoch, num_workers 0),
  SGD lr 0.01 momentum 0.9, for --epochs,
  and prints the samples/s of the loop after its first step and its median step, the time of
  one pass of the loop (the DataLoader's batch and trainer.step). `train --print-cli DIR` prints the
  `dprun train` command of the same rows and batches (with --shuffle, its own orders). --feed chooses how the batches come
  (feeds() below); --step-async calls trainer.step_async, so the DataLoader makes each batch
  while the last one trains; --profile adds how a step's time divides between the DataLoader
  and trainer.step. `steps REPORT` prints the median step of a `dprun train --json REPORT`, which
  times Trainer::step after the batch's rows are gathered.
"""
import argparse
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[2]
CLASSIFIER = REPO / "models/tutorial/classifier.onnx"
CNN = REPO / "models/cnn.onnx"
TRAIN_OPTIONS = ["--loss", "cross_entropy", "--optimizer", "sgd", "--lr", "0.01",
                 "--momentum", "0.9", "--batch", "64"]


def call(args):
    import dprun
    x = np.load(REPO / "models/tutorial/sample.x.npy")[:1].copy()
    for devices in (["cpu:0"], ["cpu:0", "cpu:1"]):
        dp = dprun.DataParallel(dprun.load(CLASSIFIER), devices, threads=1)
        for _ in range(1000):  # warm-up: buffers, kernels, the device threads awake
            dp(x)
        rounds = []
        for _ in range(args.rounds):
            start = time.perf_counter()
            for _ in range(args.calls):
                dp(x)
            rounds.append((time.perf_counter() - start) / args.calls * 1e6)
        print(f"{','.join(devices)}: {statistics.median(rounds):.2f} us per call "
              f"(median of {args.rounds} rounds of {args.calls}; min {min(rounds):.2f})")


ROW_SUMS = """
import resource, sys, numpy as np, dprun
dp = dprun.DataParallel(dprun.load(sys.argv[1]), ['cpu:0', 'cpu:1'])
dp(np.ones((8, 64), np.float32))
order = 'F' if sys.argv[2] == 'copied' else 'C'  # Fortran order: the module copies it once
x = np.ones((1 << 22, 64), np.float32, order=order)  # 1 GiB, touched
peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
before = peak()
y = dp(x)
print(peak() - before, y.nbytes >> 20)
"""


def memory(_args):
    import onnx
    from onnx import TensorProto, helper
    graph = helper.make_graph(
        [helper.make_node("ReduceSum", ["x"], ["y"], axes=[1], keepdims=0)], "row_sums",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch"])])
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "row_sums.onnx"
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)]), path)
        for layout in ("in place", "copied"):
            done = subprocess.run([sys.executable, "-c", ROW_SUMS, str(path), layout.split()[0]],
                                  capture_output=True, text=True, check=True)
            grown, output = done.stdout.split()
            shown = "C-contiguous" if layout == "in place" else "in Fortran order"
            print(f"1 GiB input, {shown}: peak resident memory +{grown} MiB "
                  f"(the output is {output} MiB)")


def data(args):
    rng = np.random.default_rng(0)
    out = pathlib.Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / "x.npy", rng.standard_normal((args.rows, 3, 32, 32), dtype=np.float32))
    np.save(out / "y.npy", rng.integers(0, 10, args.rows).astype(np.int64))


def cli_command(args):
    d = pathlib.Path(args.dir)
    order = [] if args.shuffle else ["--no-shuffle"]
    return ["build/dprun", "train", str(CNN.relative_to(REPO)), "--input", f"image={d}/x.npy",
            "--target", f"{d}/y.npy", *TRAIN_OPTIONS, "--devices", args.devices, "--epochs", str(args.epochs), *order,
            *(["--threads", str(args.threads)] if args.threads else []),
            "--save", f"{d}/cli.onnx"]


def feeds(how, x, y, shuffle):
    """The batches of 64 rows, in order (with `shuffle`, a new permutation of the rows each
    epoch): "dataloader" a DataLoader that collates each batch from its rows (PyTorch's default),
    "batched" a DataLoader whose sampler gives each batch's indices at once (one gather per
    tensor), "sliced" a DataLoader whose sampler gives each batch's slice (a view of each tensor,
    as `dprun train --no-shuffle` reads its rows), "slices" views of the tensors, no DataLoader."""
    from torch.utils.data import (BatchSampler, DataLoader, RandomSampler, SequentialSampler,
                                  TensorDataset)
    data = TensorDataset(x, y)
    if how == "dataloader":
        return DataLoader(data, batch_size=64, shuffle=shuffle, num_workers=0)
    if how == "batched":
        rows = RandomSampler(data) if shuffle else SequentialSampler(data)
        batches = BatchSampler(rows, batch_size=64, drop_last=False)
        return DataLoader(data, batch_size=None, sampler=batches, num_workers=0)
    if shuffle:
        sys.exit(f"--feed {how} takes consecutive rows: it cannot --shuffle")
    if how == "sliced":
        batches = [slice(i, i + 64) for i in range(0, len(x), 64)]
        return DataLoader(data, batch_size=None, sampler=batches, num_workers=0)
    return [(x[i:i + 64], y[i:i + 64]) for i in range(0, len(x), 64)]


def train(args):
    if args.print_cli:
        print(" ".join(cli_command(args)))
        return
    import torch
    import dprun
    torch.set_num_threads(1)
    d = pathlib.Path(args.dir)
    x, y = torch.from_numpy(np.load(d / "x.npy")), torch.from_numpy(np.load(d / "y.npy"))
    loader = feeds(args.feed, x, y, args.shuffle)
    threads = {"threads": args.threads} if args.threads else {}
    trainer = dprun.Trainer(dprun.load(CNN), args.devices.split(","), loss="cross_entropy",
                            optimizer="sgd", lr=0.01, momentum=0.9, **threads)
    loading = stepping = 0.0
    samples, seconds, steps, times = 0, 0.0, 0, []
    for _ in range(args.epochs):
        batches = iter(loader)
        while True:
            start = time.perf_counter()
            try:
                xb, yb = next(batches)
            except StopIteration:
                break
            fed = time.perf_counter()
            if args.step_async:  # waits for the last batch's step, starts this one's
                pending = trainer.step_async(xb, target=yb)
            else:
                loss = trainer.step(xb, target=yb)
            done = time.perf_counter()
            steps += 1
            if steps == 1:  # the warm-up step, left out as dprun train leaves it out
                continue
            loading += fed - start
            stepping += done - fed
            seconds += done - start
            samples += len(xb)
            times.append(done - start)
    if args.step_async:
        waiting = time.perf_counter()
        loss = pending.result()
        seconds += time.perf_counter() - waiting
    print(f"last batch loss {loss:.6f}, {samples / seconds:.1f} samples/s after 1 warm-up step "
          f"({steps} steps); median step {statistics.median(times) * 1e3:.3f} ms")
    if args.profile:
        print(f"per step: DataLoader {loading / (steps - 1) * 1e3:.3f} ms, "
              f"trainer.step {stepping / (steps - 1) * 1e3:.3f} ms "
              f"({samples / stepping:.1f} samples/s in trainer.step)")


def steps(args):
    """The median step of a `dprun train --json` report, after its first."""
    import json
    with open(args.report) as f:
        seconds = json.load(f)["step_seconds"][1:]
    print(f"median step {statistics.median(seconds) * 1e3:.3f} ms")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("call")
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--calls", type=int, default=20000)
    p.set_defaults(run=call)
    sub.add_parser("memory").set_defaults(run=memory)
    p = sub.add_parser("data")
    p.add_argument("dir")
    p.add_argument("--rows", type=int, default=4096)
    p.set_defaults(run=data)
    p = sub.add_parser("train")
    p.add_argument("dir")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--feed", choices=["dataloader", "batched", "sliced", "slices"],
                   default="dataloader")
    p.add_argument("--shuffle", action="store_true",
                   help="a new order of the rows each epoch (the CLI command: without "
                        "--no-shuffle; the orders differ, so the losses do)")
    p.add_argument("--devices", default="cpu:0,cpu:1")
    p.add_argument("--threads", type=int, default=0, help="per device (0: the core share)")
    p.add_argument("--step-async", action="store_true",
                   help="trainer.step_async: each batch made while the last one trains")
    p.add_argument("--profile", action="store_true")
    p.add_argument("--print-cli", action="store_true")
    p.set_defaults(run=train)
    p = sub.add_parser("steps")
    p.add_argument("report")
    p.set_defaults(run=steps)
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
