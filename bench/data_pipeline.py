"""What augmenting uint8 images costs `dprun train`: a ResNet-20 for 32x32 images (He et al.'s
CIFAR network: 3 stages of 3 basic blocks, 16/32/64 channels) at batch 128 on cpu:0,cpu:1,
trained from uint8 NHWC images with `--layout x=nhwc --normalize ... --augment hflip,crop:4`
against the same run on float32 NCHW images transformed beforehand (layout and normalization
only), the samples/s of each (the time steps waited for their batches included).

    /usr/bin/python3 bench/data_pipeline.py export DIR        # model and data (needs torch)
    /usr/bin/python3 bench/data_pipeline.py run DIR [--rounds N] [--steps S]

`run` alternates the two runs N times (default 5) and prints each round's samples/s, the
medians, their ratio, and the median time a step waited for its batches."""
import argparse
import json
import pathlib
import statistics
import subprocess
import sys

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]
ROWS = 4096
BATCH = 128
MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)


def resnet20():
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.b1 = nn.BatchNorm2d(cout)
            self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.b2 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU()
            self.short = (nn.Sequential() if stride == 1 and cin == cout else nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)))

        def forward(self, x):
            y = self.relu(self.b1(self.c1(x)))
            return self.relu(self.b2(self.c2(y)) + self.short(x))

    layers = [nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU()]
    cin = 16
    for cout, stride in ((16, 1), (32, 2), (64, 2)):
        for i in range(3):
            layers.append(Block(cin, cout, stride if i == 0 else 1))
            cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)]
    return nn.Sequential(*layers)


def export(args):
    import torch
    out = pathlib.Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = resnet20()
    torch.onnx.export(model, torch.zeros(BATCH, 3, 32, 32), str(out / "resnet20.onnx"),
                      input_names=["x"], output_names=["logits"], opset_version=15,
                      dynamic_axes={"x": {0: "batch"}},
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(ROWS, 32, 32, 3), dtype=np.uint8)
    np.save(out / "x.uint8.npy", images)
    np.save(out / "y.npy", rng.integers(0, 10, size=ROWS).astype(np.int64))
    # What --layout and --normalize make of the images: ToTensor's scaling, then Normalize.
    floats = (images.transpose(0, 3, 1, 2).astype(np.float32) / np.float32(255)
              - np.array(MEAN, np.float32)[:, None, None]) / np.array(STD, np.float32)[:, None, None]
    np.save(out / "x.float.npy", floats.astype(np.float32))
    print(f"wrote {out}/resnet20.onnx and {ROWS} images as uint8 NHWC and float32 NCHW")


def train(directory, augmented, steps):
    d = pathlib.Path(directory)
    common = ["--target", str(d / "y.npy"), "--loss", "cross_entropy", "--optimizer", "sgd",
              "--lr", "0.05", "--momentum", "0.9", "--batch", str(BATCH), "--steps", str(steps),
              "--devices", "cpu:0,cpu:1", "--threads", "1", "--seed", "1",
              "--save", str(d / "trained.onnx"), "--json", str(d / "run.json")]
    mean = ",".join(map(str, MEAN))
    std = ",".join(map(str, STD))
    data = (["--input", f"x={d / 'x.uint8.npy'}", "--layout", "x=nhwc",
             "--normalize", f"x={mean}/{std}", "--augment", "x=hflip,crop:4"] if augmented
            else ["--input", f"x={d / 'x.float.npy'}"])
    subprocess.run([str(REPO / "build" / "dprun"), "train", str(d / "resnet20.onnx"), *data,
                    *common], check=True, stdout=subprocess.DEVNULL)
    report = json.loads((d / "run.json").read_text())
    return report["samples_per_s"], statistics.median(report["data_wait_seconds"][1:])


def run(args):
    rates = {"augmented": [], "float": []}
    waits = {"augmented": [], "float": []}
    for round_ in range(args.rounds):
        for name in ("augmented", "float"):
            rate, wait = train(args.dir, name == "augmented", args.steps)
            rates[name].append(rate)
            waits[name].append(wait)
        print(f"round {round_ + 1}: augmented {rates['augmented'][-1]:.1f}, "
              f"float {rates['float'][-1]:.1f} samples/s", flush=True)
    a, f = statistics.median(rates["augmented"]), statistics.median(rates["float"])
    print(f"median samples/s: uint8 + augment {a:.1f}, pre-transformed float {f:.1f}, "
          f"ratio {a / f:.3f}; median wait for data per step: "
          f"{statistics.median(waits['augmented']) * 1e3:.3f} ms and "
          f"{statistics.median(waits['float']) * 1e3:.3f} ms")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("export", help="write the model and the data")
    p.add_argument("dir")
    p.set_defaults(func=export)
    p = sub.add_parser("run", help="time the two runs in turn")
    p.add_argument("dir")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=12)
    p.set_defaults(func=run)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    sys.exit(main())
