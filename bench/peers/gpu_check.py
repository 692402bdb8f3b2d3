#!/usr/bin/env python3
"""Verify and time dprun on a GPU machine, from an unpacked tools/gpu-bundle.sh archive.

    python3 bench/peers/gpu_check.py --bundle /tmp/gpu-bundle --models DIR --out DIR
                                     [--device cuda:0] [--steps tests,conformance,...]

Run from the repository root, with PyTorch, torchvision, onnx and onnxruntime importable.
DIR holds the zoo models made by `weightless.py strip` (resnet18, mobilenet_v2,
encoder_base); they get random weights here. Steps (all by default):

  tests        dprun_cuda_tests, every test (none skips where a GPU is present), and the
               device-parameterized unit tests on CUDA (*/cuda)
  conformance  dprun conformance --device DEV against tests/conformance_expected.txt
  models       the bundled models against their PyTorch outputs; the zoo models against
               ONNX Runtime on the CPU, same file and inputs
  precision    --precision float16 and bfloat16: the bundled models against PyTorch's float32
               outputs within 16 bits' error, and the zoo models' throughput
  train        every models/training/*.args case on DEV against PyTorch's losses and
               trained weights (a multi-device case against dprun on cpu:0: see step_train)
  distributed  dprun train --distributed, one rank without mpirun (gradients summed by NCCL
               on a GPU), against the same run without --distributed: bit for bit
  bench        dprun bench on DEV against PyTorch eager on the same GPU, float32 (TF32 off)
               and with TF32 allowed in both; PyTorch's host-to-GPU copy rates
  profile      dprun bench --profile (time per op type, the device waited for around each
               node) for each zoo model, into OUT/profile.log

Writes OUT/summary.txt (one line per check, written as each ends, so a run cut short still
says how far it got) and OUT/<step>.log. --device cpu:0 runs the same checks on the host,
which is how this script itself is tested where there is no GPU.
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

ZOO = {  # name: bench arguments
    "resnet18": ["--batch", "64"],
    "mobilenet_v2": ["--batch", "64"],
    "encoder_base": ["--batch", "64", "--symbol", "seq=128"],
}


class Check:
    def __init__(self, args):
        self.args = args
        self.run_sh = os.path.join(args.bundle, "run.sh")
        os.makedirs(args.out, exist_ok=True)
        self.summary = open(os.path.join(args.out, "summary.txt"), "a", buffering=1)

    def say(self, line):
        print(line, flush=True)
        self.summary.write(line + "\n")

    def dprun(self, program, argv, log, timeout, env=None):
        """Runs a bundle program, with `env` added to the environment; returns (exit status,
        output). The output goes to `log`."""
        start = time.time()
        try:
            p = subprocess.run([self.run_sh, program] + argv, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=timeout,
                               env=dict(os.environ, **(env or {})))
            rc, out = p.returncode, p.stdout
        except subprocess.TimeoutExpired as e:
            # The partial output comes back as bytes even where the run asked for text.
            partial = e.stdout or b""
            rc, out = 124, partial.decode(errors="replace") if isinstance(partial, bytes) else partial
            out += f"\n[timed out after {timeout} s]\n"
        prefix = " ".join(f"{k}={v}" for k, v in (env or {}).items())
        with open(os.path.join(self.args.out, log), "a") as f:
            f.write(f"$ {prefix + ' ' if prefix else ''}{program} {' '.join(argv)}\n{out}\n"
                    f"[rc {rc}, {time.time() - start:.1f} s]\n")
        return rc, out


def last_lines(text, n=3):
    return " | ".join(line for line in text.strip().splitlines()[-n:])


def step_tests_and_conformance(c, steps):
    """The CUDA tests and the conformance suite run at once: each uses the GPU lightly."""
    jobs = {}
    if "tests" in steps and c.args.device.startswith("cuda"):
        jobs["tests"] = ("dprun_cuda_tests", ["--gtest_brief=1"])
        jobs["accelerator_tests"] = ("dprun_unit_tests", ["--gtest_brief=1",
                                                          "--gtest_filter=*/cuda"])
    if "conformance" in steps:
        jobs["conformance"] = ("dprun", ["conformance", "--device", c.args.device, "--data",
                                         os.path.join(c.args.bundle, "data"), "--expected",
                                         "tests/conformance_expected.txt", "--verbose"])
    procs = {}
    for name, (program, argv) in jobs.items():
        log = open(os.path.join(c.args.out, name + ".log"), "w")
        procs[name] = (subprocess.Popen([c.run_sh, program] + argv, stdout=log,
                                        stderr=subprocess.STDOUT), log, time.time())
    for name, (proc, log, start) in procs.items():
        try:
            rc = proc.wait(timeout=max(1, c.args.step_timeout - (time.time() - start)))
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = 124
        log.close()
        text = open(os.path.join(c.args.out, name + ".log"), errors="replace").read()
        if name in ("tests", "accelerator_tests"):
            failed = re.findall(r"^\[  FAILED  \] (\S+)", text, re.M)
            passed = re.search(r"\[  PASSED  \] (\d+) tests?", text)
            skipped = re.search(r"\[  SKIPPED \] (\d+) tests?", text)
            c.say(f"{name}: rc {rc} in {time.time() - start:.0f} s; passed "
                  f"{passed.group(1) if passed else '?'}, skipped "
                  f"{skipped.group(1) if skipped else 0}, failed {len(set(failed))}"
                  + (f": {' '.join(sorted(set(failed)))}" if failed else ""))
        else:
            fails = re.findall(r"^FAIL (\S+?):", text, re.M)
            regress = re.findall(r"^\S+ (\S+?):.*\[REGRESSION", text, re.M)
            totals = re.search(r"^total .*$", text, re.M)
            c.say(f"conformance on {c.args.device}: rc {rc} in {time.time() - start:.0f} s; "
                  f"{totals.group(0) if totals else last_lines(text)}; "
                  f"{len(regress)} expected to pass did not"
                  + (f": {' '.join(regress[:40])}" if regress else "")
                  + (f"; failing (not expected): {len(fails) - len(regress)}" if fails else ""))


def compare(got, want):
    """(max abs difference, max |want|, whether within 1e-4 of the output's largest value;
    random weights can leave a deep network's outputs tiny, so the bound is relative only)."""
    if got.shape != want.shape:
        return None
    diff = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) if got.size else 0
    scale = float(np.max(np.abs(want))) if want.size else 0
    return diff, scale, diff <= 1e-4 * scale


BUNDLED = ("mlp", "cnn", "transformer")


def bundled_files(model, kind):
    """models/MODEL.KIND.NAME.npy (KIND input or output) by NAME, sorted."""
    return {re.sub(rf"^models/{model}\.{kind}\.(.*)\.npy$", r"\1", p): p
            for p in sorted(glob.glob(f"models/{model}.{kind}.*.npy"))}


def run_outputs(c, model, inputs, folder, log, extra=()):
    argv = [model, "--devices", c.args.device, "--output-dir", folder] + list(extra)
    for name, path in inputs.items():
        argv += ["--input", f"{name}={path}"]
    return c.dprun("dprun", argv, log, 300)


def step_models(c, zoo_dir):
    for model in BUNDLED:
        with tempfile.TemporaryDirectory() as folder:
            rc, out = run_outputs(c, f"models/{model}.onnx", bundled_files(model, "input"), folder,
                                  "models.log")
            if rc:
                c.say(f"model {model} on {c.args.device}: rc {rc}: {last_lines(out, 1)}")
                continue
            parts = []
            for name, ref in bundled_files(model, "output").items():
                r = compare(np.load(os.path.join(folder, name + ".npy")), np.load(ref))
                parts.append(f"{name} max |diff| {r[0]:.3g} (max |ref| {r[1]:.3g}) "
                             f"{'ok' if r[2] else 'MISMATCH'}" if r else f"{name} wrong shape")
            c.say(f"model {model} on {c.args.device} vs PyTorch: " + "; ".join(parts))
    rc, out = c.dprun("dprun", ["models/cnn.onnx", "--devices", "all", "--batch", "8"],
                      "models.log", 120)
    c.say(f"dprun models/cnn.onnx --devices all: rc {rc}: "
          + " | ".join(line.strip() for line in out.splitlines() if "cuda" in line or
                       "cpu:" in line)[:300])
    try:
        import onnxruntime as ort
    except ImportError:
        ort = None
    rng = np.random.default_rng(1)
    for model in c.zoo:
        path = os.path.join(zoo_dir, model + ".onnx")
        if model == "encoder_base":
            feeds = {"input_ids": rng.integers(0, 30522, (4, 128), dtype=np.int64),
                     "attention_mask": np.ones((4, 128), np.float32)}
            feeds["attention_mask"][1, 100:] = 0
        else:
            feeds = {"input": rng.standard_normal((4, 3, 224, 224)).astype(np.float32)}
        with tempfile.TemporaryDirectory() as folder:
            files = {}
            for name, value in feeds.items():
                files[name] = os.path.join(folder, name + ".in.npy")
                np.save(files[name], value)
            if ort:
                session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
                want = session.run(None, feeds)
                names = [o.name for o in session.get_outputs()]
                reference = "ONNX Runtime (CPU)"
            else:  # where ONNX Runtime is missing (Debian 12), dprun on cpu:0
                cpu = os.path.join(folder, "cpu")
                os.makedirs(cpu)
                rc, out = c.dprun("dprun", [path, "--devices", "cpu:0", "--output-dir", cpu] +
                                  [a for n, f in files.items() for a in ("--input", f"{n}={f}")],
                                  "models.log", 300)
                names = sorted(f[:-4] for f in os.listdir(cpu))
                want = [np.load(os.path.join(cpu, n + ".npy")) for n in names]
                reference = "dprun on cpu:0"
            rc, out = run_outputs(c, path, files, folder, "models.log")
            if rc:
                c.say(f"zoo {model} on {c.args.device}: rc {rc}: {last_lines(out, 1)}")
                continue
            parts = []
            for name, ref in zip(names, want):
                r = compare(np.load(os.path.join(folder, name + ".npy")), ref)
                parts.append(f"{name} max |diff| {r[0]:.3g} (max |ref| {r[1]:.3g}) "
                             f"{'ok' if r[2] else 'MISMATCH'}" if r else f"{name} wrong shape")
            c.say(f"zoo {model} batch 4 on {c.args.device} vs {reference}: " + "; ".join(parts))


# The error --precision may add, relative to an output's largest value: 16-bit rounding of
# every layer (measured on the CPU: float16 1.0e-3, bfloat16 1.4e-2 for the bundled models).
PRECISION_BOUNDS = {"float16": 3e-3, "bfloat16": 3e-2}


def step_precision(c, zoo_dir):
    """--precision float16 and bfloat16: the bundled models against PyTorch's float32 outputs
    within 16 bits' error, and the zoo models' throughput against float32."""
    for precision, bound in PRECISION_BOUNDS.items():
        for model in BUNDLED:
            with tempfile.TemporaryDirectory() as folder:
                rc, out = run_outputs(c, f"models/{model}.onnx", bundled_files(model, "input"),
                                      folder, "precision.log", ["--precision", precision])
                if rc:
                    c.say(f"{precision} {model} on {c.args.device}: rc {rc}: {last_lines(out, 1)}")
                    continue
                parts = []
                for name, ref in bundled_files(model, "output").items():
                    r = compare(np.load(os.path.join(folder, name + ".npy")), np.load(ref))
                    parts.append(f"{name} max |diff| / max |ref| {r[0] / r[1]:.3g} "
                                 f"{'ok' if r[0] <= bound * r[1] else 'MISMATCH'}"
                                 if r else f"{name} wrong shape")
                c.say(f"{precision} {model} on {c.args.device} vs PyTorch float32 (bound "
                      f"{bound}): " + "; ".join(parts))
    iters = ["--iters", str(c.args.iters), "--warmup", "5", "--rounds", "3"]
    for name in c.zoo:
        for precision in PRECISION_BOUNDS:
            bench_once(c, os.path.join(zoo_dir, name + ".onnx"), name, ZOO[name], iters,
                       extra_flags=["--precision", precision], label=precision)


def trained_weights(path):
    import onnx
    from onnx import numpy_helper
    return {i.name: numpy_helper.to_array(i) for i in onnx.load(path).graph.initializer}


def train_once(c, name, argv, device, folder, tag=""):
    """Runs one training case on `device`; (losses, trained weights) or the error line."""
    saved = os.path.join(folder, device + tag + ".onnx")
    report = os.path.join(folder, device + tag + ".json")
    rc, out = c.dprun("dprun", ["train", f"models/training/{name}.onnx"] + argv +
                      ["--devices", device, "--save", saved, "--json", report], "train.log", 300)
    if rc:
        return f"rc {rc}: {last_lines(out, 1)}"
    return np.array(json.load(open(report))["losses"]), trained_weights(saved)


def step_train(c):
    """Each case against PyTorch; a case whose reference ran on several devices (batch
    statistics per replica) against the same arguments on cpu:0, since one GPU is one device."""
    for args_file in sorted(glob.glob("models/training/*.args")):
        name = os.path.basename(args_file)[:-5]
        argv = open(args_file).read().split()
        devices = "cpu:0"
        if "--devices" in argv:
            at = argv.index("--devices")
            devices = argv[at + 1]
            del argv[at:at + 2]
        with tempfile.TemporaryDirectory() as folder:
            got = train_once(c, name, argv, c.args.device, folder)
            if isinstance(got, str):
                c.say(f"train {name} on {c.args.device}: {got}")
                continue
            if "," in devices:
                want = train_once(c, name, argv, "cpu:0", folder)
                if isinstance(want, str):
                    c.say(f"train {name} on cpu:0: {want}")
                    continue
                against = "dprun on cpu:0 (PyTorch's reference is for " + devices + ")"
            else:
                want = (np.load(f"models/training/{name}.losses.npy"),
                        trained_weights(f"models/training/{name}.trained.onnx"))
                against = "PyTorch"
            ref = want[0].astype(np.float64)
            loss_rel = float(np.max(np.abs(got[0] - ref) / np.maximum(np.abs(ref), 1e-6)))
            worst = max(float(np.max(np.abs(got[1][k] - w) / (1e-6 + 1e-4 * np.abs(w))))
                        for k, w in want[1].items() if w.size and w.dtype.kind == "f")
            c.say(f"train {name} on {c.args.device} vs {against}: losses max rel diff "
                  f"{loss_rel:.2g}; weights worst |diff| / (1e-6 + 1e-4 |ref|) {worst:.3g} "
                  f"{'ok' if loss_rel <= 1e-4 and worst <= 1 else 'OUTSIDE 1e-4'}")
            # Mixed precision: the same case in bfloat16 and in float16 (a loss scale no
            # gradient of these models overflows), its losses against the float32 ones within
            # 5% and 0.5% (tests/cli/train_references_test.cpp holds the CPU to the same).
            for precision, extra, bound in (("bfloat16", [], 0.05),
                                            ("float16", ["--loss-scale", "1024"], 0.005)):
                half = train_once(c, name, argv + ["--precision", precision] + extra,
                                  c.args.device, folder, "-" + precision)
                if isinstance(half, str):
                    c.say(f"train {name} on {c.args.device} in {precision}: {half}")
                    continue
                half_rel = float(np.max(np.abs(half[0] - ref) / np.maximum(np.abs(ref), 1e-6)))
                c.say(f"train {name} on {c.args.device} in {precision} vs {against} in float32: "
                      f"losses max rel diff {half_rel:.2g} "
                      f"{'ok' if half_rel <= bound else f'OUTSIDE {bound:.1%}'}")


def step_distributed(c):
    """`dprun train --distributed` as a job of one rank (started without mpirun), whose
    gradients a GPU sums with NCCL (--dist-backend's default there; MPI elsewhere), against the
    same training without --distributed: one rank's sum is its own gradients, so the two must
    agree bit for bit."""
    name = "mlp_sgd"
    argv = open(f"models/training/{name}.args").read().split()
    at = argv.index("--devices")
    del argv[at:at + 2]
    with tempfile.TemporaryDirectory() as plain_dir, tempfile.TemporaryDirectory() as dist_dir:
        plain = train_once(c, name, argv, c.args.device, plain_dir)
        dist = train_once(c, name, argv + ["--distributed"], c.args.device, dist_dir)
        if isinstance(plain, str) or isinstance(dist, str):
            c.say(f"distributed {name} on {c.args.device}: plain {plain if isinstance(plain, str) else 'ok'}; "
                  f"--distributed {dist if isinstance(dist, str) else 'ok'}")
            return
        backend = json.load(open(os.path.join(dist_dir, c.args.device + ".json")))["ranks"]["backend"]
        same = np.array_equal(plain[0], dist[0]) and all(
            np.array_equal(w, dist[1][k]) for k, w in plain[1].items())
        c.say(f"distributed {name} on {c.args.device}, 1 rank over {backend}: losses and weights "
              f"{'bit for bit those of the plain run' if same else 'DIFFER from the plain run'}")


def torch_bench(model, feeds, iters, warmup, from_host):
    """Samples/s of `model` (eval, no grad) on cuda:0, the best of three rounds. from_host
    copies the inputs from pinned host memory each step, as `dprun bench` does (its inputs are
    pinned where a device is a GPU); the outputs stay on the GPU in both."""
    import torch
    batch = next(iter(feeds.values())).shape[0]
    on_gpu = [f.cuda() for f in feeds.values()]
    host = [f.pin_memory() for f in feeds.values()]
    best = 0
    with torch.no_grad():
        for _ in range(warmup):
            model(*on_gpu)
        for _ in range(3):
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(iters):
                xs = [h.cuda(non_blocking=True) for h in host] if from_host else on_gpu
                model(*xs)
            torch.cuda.synchronize()
            best = max(best, batch * iters / (time.perf_counter() - start))
    return best


def torch_model(name):
    import torch
    import torchvision
    sys.path.insert(0, "models")
    from export_models import TinyTransformer
    torch.manual_seed(0)
    if name == "encoder_base":
        m = TinyTransformer(vocab=30522, d_model=768, max_len=512, nhead=12, dim_ff=3072,
                            layers=12)
        feeds = {"ids": torch.randint(0, 30522, (64, 128)), "mask": torch.ones(64, 128)}
    elif name == "transformer":
        m = TinyTransformer()
        feeds = {"ids": torch.randint(0, 1000, (64, 128)), "mask": torch.ones(64, 128)}
    else:
        m = getattr(torchvision.models, name)(weights=None)
        feeds = {"x": torch.randn(64, 3, 224, 224)}
    return m.eval().cuda(), feeds


# What each graph-level change gains, measured by turning it off (float32): op fusion and
# shape arithmetic on the host (README.md, CUDA).
ABLATIONS = {"without fusion": {"DPRUN_NO_FUSION": "1"},
             "without shape arithmetic on the host": {"DPRUN_NO_SHAPE_ARITHMETIC": "1"}}


def bench_once(c, path, name, extra, iters, tf32=False, env=None, label="", extra_flags=()):
    with tempfile.TemporaryDirectory() as folder:
        report = os.path.join(folder, "b.json")
        argv = ["bench", path, "--devices", c.args.device, "--json", report] + extra + \
            iters + (["--allow-tf32"] if tf32 else []) + list(extra_flags)
        rc, out = c.dprun("dprun", argv, "bench.log", 300, env)
        tag = f"{name}{' tf32' if tf32 else ''}{' ' + label if label else ''}"
        if rc:
            c.say(f"bench {tag}: rc {rc}: {last_lines(out, 1)}")
            return
        b = json.load(open(report))
        c.say(f"bench dprun {tag} {' '.join(extra)} on {c.args.device}: "
              f"{b['samples_per_s']:.1f} samples/s, median step {b['step_ms']['median']:.3f} ms")


def step_bench(c, zoo_dir):
    cases = [(os.path.join(zoo_dir, m + ".onnx"), m, ZOO[m]) for m in c.zoo]
    cases.append(("models/transformer.onnx", "transformer",
                  ["--batch", "64", "--symbol", "seq=128"]))
    iters = ["--iters", str(c.args.iters), "--warmup", "5", "--rounds", "3"]
    for path, name, extra in cases:
        for tf32 in (False, True):
            bench_once(c, path, name, extra, iters, tf32)
        if "--symbol" in extra:  # the transformers, where both changes apply
            for label, env in ABLATIONS.items():
                bench_once(c, path, name, extra, iters, env=env, label=label)
        with tempfile.TemporaryDirectory() as folder:
            report = os.path.join(folder, "run.json")
            rc, out = c.dprun("dprun", [path, "--devices", c.args.device, "--json", report] +
                              extra, "bench.log", 300)
            if rc == 0:
                peak = json.load(open(report)).get("peak_bytes")
                c.say(f"memory dprun {name} {' '.join(extra)} on {c.args.device}: peak bytes "
                      f"{peak}")
    if not c.args.device.startswith("cuda"):
        return
    import torch
    if torch.cuda.device_count() > 1:  # DataParallel across the GPUs: 1, 2, .. N of them
        for path, name, extra in cases[:1]:
            batch = str(64 * torch.cuda.device_count())
            rc, out = c.dprun("dprun", ["bench", path, "--devices", "all", "--sweep", "--batch",
                                        batch, "--iters", str(c.args.iters), "--rounds", "3"],
                              "bench.log", 300)
            c.say(f"scaling dprun {name} batch {batch} over {torch.cuda.device_count()} GPUs: "
                  f"rc {rc}: " + " | ".join(out.strip().splitlines()[-torch.cuda.device_count()
                                                                     - 2:]))
    torch_copy_rates(c)
    for name in [n for _, n, _ in cases]:
        model, feeds = torch_model(name)
        for tf32 in (False, True):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            torch.backends.cudnn.allow_tf32 = tf32
            rates = [torch_bench(model, feeds, c.args.iters, 5, h) for h in (False, True)]
            c.say(f"bench torch {name} batch 64 on cuda{' tf32' if tf32 else ''}: "
                  f"{rates[0]:.1f} samples/s with inputs on the GPU, {rates[1]:.1f} with "
                  f"inputs copied from pinned host memory each step")
        del model
        torch.cuda.empty_cache()


def step_profile(c, zoo_dir):
    for name in c.zoo:
        rc, out = c.dprun("dprun", ["bench", os.path.join(zoo_dir, name + ".onnx"), "--devices",
                                    c.args.device, "--iters", "5", "--warmup", "3", "--profile"]
                          + ZOO[name], "profile.log", 300)
        c.say(f"profile {name} on {c.args.device}: rc {rc}: {last_lines(out, 1)}")


def torch_copy_rates(c):
    """PyTorch's host-to-GPU copy rate for a ResNet batch of 64 (38.5 MB), pageable and pinned."""
    import torch
    x = torch.randn(64, 3, 224, 224)
    rates = []
    for host in (x, x.pin_memory()):
        host.cuda()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(10):
            host.cuda()
        torch.cuda.synchronize()
        rates.append(10 * x.numel() * 4 / (time.perf_counter() - start) / 1e9)
    c.say(f"copy host to GPU, 38.5 MB, through PyTorch: {rates[0]:.1f} GB/s pageable, "
          f"{rates[1]:.1f} GB/s pinned")


def fill_zoo(c):
    """The zoo models with random weights, in a folder of their own."""
    folder = os.path.join(tempfile.gettempdir(), "gpu_check_zoo")
    os.makedirs(folder, exist_ok=True)
    here = os.path.dirname(os.path.abspath(__file__))
    for model in c.zoo:
        target = os.path.join(folder, model + ".onnx")
        if not os.path.exists(target):
            subprocess.run([sys.executable, os.path.join(here, "weightless.py"), "fill",
                            os.path.join(c.args.models, model + ".onnx"), target], check=True)
    return folder


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bundle", required=True)
    p.add_argument("--models", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--steps",
                   default="tests,conformance,models,precision,train,distributed,bench,profile")
    p.add_argument("--step-timeout", type=int, default=240)
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--zoo", default=",".join(ZOO), help="zoo models to check and time")
    args = p.parse_args()
    steps = args.steps.split(",")
    c = Check(args)
    c.zoo = [m for m in args.zoo.split(",") if m]
    start = time.time()
    zoo = {}
    # The zoo's weights are made on the host while the tests use the GPU.
    filler = threading.Thread(target=lambda: zoo.update(folder=fill_zoo(c)))
    filler.start()
    if {"tests", "conformance"} & set(steps):
        step_tests_and_conformance(c, steps)
    filler.join()
    zoo = zoo.get("folder")
    for name, fn in (("models", lambda: step_models(c, zoo)),
                     ("precision", lambda: step_precision(c, zoo)),
                     ("train", lambda: step_train(c)),
                     ("distributed", lambda: step_distributed(c)),
                     ("bench", lambda: step_bench(c, zoo)),
                     ("profile", lambda: step_profile(c, zoo))):
        if name in steps:
            t = time.time()
            try:
                fn()
            except Exception as e:  # a broken step must not hide the others' results
                c.say(f"{name}: the check itself failed: {type(e).__name__}: {e}")
            c.say(f"[{name} took {time.time() - t:.0f} s]")
    c.say(f"[all took {time.time() - start:.0f} s]")


if __name__ == "__main__":
    main()
