#!/usr/bin/env python3
"""Verify and time dprun on a GPU machine, from an unpacked tools/gpu-bundle.sh archive.

    /tmp/gpu-bundle/run.sh check [--quick] [--out DIR] [--budget SECONDS] [--stages A,B]
                                 [--dry-run] [--device cuda:0]

(run.sh check runs this file with python3 from the bundle's check/ folder; it works from the
bundle's src/, which holds the bundled models and tests/conformance_expected.txt.) Needs
numpy, and PyTorch with torchvision for the `torch` stage; nothing else, and no network.

Stages, in order, each with a share of the time (--quick / full; the whole run stops at
--budget, 450 s with --quick, 3600 s without; a subprocess is killed at its stage's end):

  plugin        a CPU run of models/mlp.onnx maps no CUDA library (LD_DEBUG=libs); cuda:0
                opens the bundle's lib/libdprun_cuda.so (without a GPU: its one error)
  tests         dprun_cuda_tests and `dprun conformance --device cuda:0` at once; --quick
                runs the tests that are not op cases and one op case in OP_CASE_SAMPLE
  dataparallel  models/cnn.onnx and models/transformer.onnx with `--devices all` against
                cuda:0 alone and cpu:0, same seeded inputs
  nccl          the NCCL collectives and 2-rank process group tests (two GPUs or more; else
                said SKIPPED), and `dprun train --distributed` as one rank, bit for bit
  streams       reported NOT AVAILABLE as a stage of its own: stream ordering by events runs in
                the tests stage (CudaCachingAllocator.*, record_stream) and the dataparallel
                and nccl stages (no host wait at a run's end)
  cuda_graphs   DPRUN_CUDA_GRAPHS=1: dprun_unit_tests *CudaGraphs*/cuda and dprun_cuda_tests
                CudaGraphsOnAGpu.* (replays bit for bit against plain runs, training steps
                included), then models/cnn.onnx and the transformer at batch 1 benched
                without and with graphs
  torch         ResNet-18, MobileNetV2 and a BERT-base-sized encoder made by PyTorch (seed 0)
                and exported here: batch-4 inference against PyTorch on the GPU (TF32 off),
                two SGD steps of `dprun train` against PyTorch's losses, throughput
  train         models/training cases against PyTorch's losses and weights (--quick: 3)
  precision     full mode: --precision float16 and bfloat16 against PyTorch's float32

Writes OUT/report.md and OUT/report.json (a row per stage: pass, fail, skipped with its
reason, or not available, its seconds and its lines), OUT/summary.txt (each check's line as it
ends, so a run cut short still says how far it got) and OUT/<stage>.log. Exit status: 0 all
ran and passed, 1 a check failed, 3 no GPU (the GPU stages skipped; the rest passed), 2 usage.
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
except ImportError:  # the plan and the stages a machine without a GPU runs need none
    np = None

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
        self.deadline = float("inf")  # the running stage's end (time.time())
        self.lines = []  # the running stage's lines
        self.failures = 0  # the running stage's failed checks

    def say(self, line, failed=None):
        """Prints and keeps one check's line; `failed` None judges it by its words."""
        print(line, flush=True)
        self.summary.write(line + "\n")
        self.lines.append(line)
        if failed is None:
            failed = bool(FAILED_WORDS.search(line))
        self.failures += bool(failed)

    def left(self):
        return self.deadline - time.time()

    def dprun(self, program, argv, log, timeout, env=None):
        """Runs a bundle program, with `env` added to the environment; returns (exit status,
        output). The output goes to `log`."""
        start = time.time()
        timeout = max(1, min(timeout, self.deadline - start))
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


# Words that the checks' lines use for a failure.
FAILED_WORDS = re.compile(r"MISMATCH|OUTSIDE|DIFFER|wrong shape|itself failed|: rc [1-9]|"
                          r"rc 124|timed out")



def gtest_summary(text):
    """A GoogleTest program's output as "passed N, skipped N, failed N: NAMES" and the failed
    tests' names."""
    failed = sorted(set(re.findall(r"^\[  FAILED  \] (\S+)", text, re.M)))
    passed = re.search(r"\[  PASSED  \] (\d+) tests?", text)
    skipped = re.search(r"\[  SKIPPED \] (\d+) tests?", text)
    return (f"passed {passed.group(1) if passed else '?'}, skipped "
            f"{skipped.group(1) if skipped else 0}, failed {len(failed)}"
            + (f": {' '.join(failed)}" if failed else "")), failed

def last_lines(text, n=3):
    return " | ".join(line for line in text.strip().splitlines()[-n:])


def step_tests_and_conformance(c, steps):
    """The CUDA tests and the conformance suite run at once: each uses the GPU lightly. --quick
    runs the tests that are not op cases and one op case in OP_CASE_SAMPLE (gtest's shards)."""
    jobs = {}
    if "tests" in steps and c.args.device.startswith("cuda"):
        if c.args.quick:
            jobs["tests"] = ("dprun_cuda_tests", ["--gtest_brief=1", "--gtest_filter=-Ops/*"],
                             {})
            jobs["op_case_sample"] = ("dprun_cuda_tests", ["--gtest_brief=1",
                                                           "--gtest_filter=Ops/*"],
                                      {"GTEST_TOTAL_SHARDS": str(OP_CASE_SAMPLE),
                                       "GTEST_SHARD_INDEX": "0"})
        else:
            jobs["tests"] = ("dprun_cuda_tests", ["--gtest_brief=1"], {})
            jobs["accelerator_tests"] = ("dprun_unit_tests", ["--gtest_brief=1",
                                                              "--gtest_filter=*/cuda"], {})
    if "conformance" in steps:
        jobs["conformance"] = ("dprun", ["conformance", "--device", c.args.device, "--data",
                                         os.path.join(c.args.bundle, "data"), "--expected",
                                         "tests/conformance_expected.txt", "--verbose"], {})
    procs = {}
    for name, (program, argv, env) in jobs.items():
        log = open(os.path.join(c.args.out, name + ".log"), "w")
        procs[name] = (subprocess.Popen([c.run_sh, program] + argv, stdout=log,
                                        stderr=subprocess.STDOUT, env=dict(os.environ, **env)),
                       log, time.time())
    for name, (proc, log, start) in procs.items():
        try:
            rc = proc.wait(timeout=max(1, c.left()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            rc = 124
        log.close()
        text = open(os.path.join(c.args.out, name + ".log"), errors="replace").read()
        if name != "conformance":
            summary, failed = gtest_summary(text)
            c.say(f"{name}: rc {rc} in {time.time() - start:.0f} s; {summary}",
                  failed=rc != 0 or failed)
        else:
            fails = re.findall(r"^FAIL (\S+?):", text, re.M)
            regress = re.findall(r"^\S+ (\S+?):.*\[REGRESSION", text, re.M)
            totals = re.search(r"^total .*$", text, re.M)
            c.say(f"conformance on {c.args.device}: rc {rc} in {time.time() - start:.0f} s; "
                  f"{totals.group(0) if totals else last_lines(text)}; "
                  f"{len(regress)} expected to pass did not"
                  + (f": {' '.join(regress[:40])}" if regress else "")
                  + (f"; failing (not expected): {len(fails) - len(regress)}" if fails else ""),
                  failed=rc != 0 or regress)


# --quick runs one op case in this many on the GPU (all of them run on the simulated device
# in CI).
OP_CASE_SAMPLE = 8


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
    if zoo_dir is None:  # the larger models are checked against PyTorch by stage_torch
        return
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


def step_train(c, limit=None, mixed=True):
    """Each case against PyTorch; a case whose reference ran on several devices (batch
    statistics per replica) against the same arguments on cpu:0, since one GPU is one device.
    `limit` takes the first cases only; `mixed` adds bfloat16 and float16."""
    for args_file in sorted(glob.glob("models/training/*.args"))[:limit]:
        if c.left() < 10:
            c.say("train: the stage's time is spent; the remaining cases did not run")
            break
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
                                            ("float16", ["--loss-scale", "1024"], 0.005)
                                            )[:2 if mixed else 0]:
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


def torch_model(name, device="cuda"):
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
    return m.eval().to(device), feeds


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


def gpu_count():
    """The GPUs the CUDA driver reports (libcuda through ctypes, as dprun's `all` counts
    them); 0 without a driver."""
    import ctypes
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        count = ctypes.c_int(0)
        if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return 0
        return count.value
    except OSError:
        return 0


CUDA_LIBRARIES = re.compile(r"/(libcuda|libcudart|libcublas|libcublasLt|libcudnn\w*|libnccl|"
                            r"libdprun_cuda)\.so[.\d]*$")


def libraries_opened(c, argv, log):
    """(exit status, output, the CUDA libraries the run initialized): LD_DEBUG=libs lists
    each library the dynamic loader initializes, dlopen'ed ones included."""
    rc, out = c.dprun("dprun", argv, log, 120, {"LD_DEBUG": "libs"})
    opened = sorted({m.group(0).lstrip("/") + "  " + line.split("calling init: ")[1].strip()
                     for line in out.splitlines() if "calling init: " in line
                     for m in [CUDA_LIBRARIES.search(line.strip())] if m})
    return rc, out, opened


def stage_plugin(c):
    """A CPU run maps no CUDA library; cuda:0 opens the bundle's libdprun_cuda.so (with a
    GPU) or says that no GPU is present (without)."""
    rc, out, opened = libraries_opened(c, ["models/mlp.onnx", "--devices", "cpu:0"], "plugin.log")
    c.say(f"plugin: a CPU run of models/mlp.onnx: rc {rc}; CUDA libraries opened: "
          f"{', '.join(opened) if opened else 'none'}", failed=rc != 0 or opened)
    rc, out, opened = libraries_opened(c, ["models/mlp.onnx", "--devices", "cuda:0"],
                                       "plugin.log")
    plugin_at = plugin[0].split("  ")[1] if (plugin := [o for o in opened
                                                        if o.startswith("libdprun_cuda")]) else None
    bundled = os.path.join(c.args.bundle, "lib", "libdprun_cuda.so")
    if c.gpus:
        c.say(f"plugin: cuda:0: rc {rc}; libdprun_cuda.so opened from {plugin_at or 'nowhere'}",
              failed=rc != 0 or plugin_at != bundled)
    else:
        # Without a GPU, cuda:0 gives its one error; the plugin may have been opened to ask.
        said = [line for line in out.splitlines() if line.startswith("dprun: error")]
        c.say(f"plugin: cuda:0 without a GPU: rc {rc}: {said[-1] if said else last_lines(out, 1)}"
              f"; libdprun_cuda.so opened from {plugin_at or 'nowhere'}",
              failed=rc == 0 or not said or plugin_at not in (None, bundled))


def stage_dataparallel(c):
    """`dprun MODEL --devices all` (DataParallel over every GPU) against cuda:0 alone and
    against cpu:0, on the same seeded inputs."""
    for model in ("cnn", "transformer"):
        extra = ["--batch", str(8 * max(c.gpus, 1))] + (
            ["--symbol", "seq=32"] if model == "transformer" else [])
        got = {}
        with tempfile.TemporaryDirectory() as folder:
            for devices in ("all", c.args.device, "cpu:0"):
                out_dir = os.path.join(folder, devices.replace(":", ""))
                rc, out = c.dprun("dprun", [f"models/{model}.onnx", "--devices", devices,
                                            "--output-dir", out_dir] + extra,
                                  "dataparallel.log", 120)
                if rc:
                    c.say(f"dataparallel {model} --devices {devices}: rc {rc}: "
                          f"{last_lines(out, 1)}")
                    break
                got[devices] = {f[:-4]: np.load(os.path.join(out_dir, f))
                                for f in sorted(os.listdir(out_dir)) if f.endswith(".npy")}
        if len(got) < 2 or "all" not in got:
            continue
        parts = []
        for against in (c.args.device, "cpu:0"):
            for name, want in got[against].items():
                r = compare(got["all"][name], want) if name in got["all"] else None
                parts.append(f"{name} vs {against}: max |diff| {r[0]:.3g} (max |ref| "
                             f"{r[1]:.3g}) {'ok' if r[2] else 'MISMATCH'}" if r
                             else f"{name} vs {against}: wrong shape")
        c.say(f"dataparallel {model} {' '.join(extra)} over {c.gpus} GPU(s): " + "; ".join(parts))


def stage_nccl(c):
    """NCCL: the device collectives and a 2-rank process group (two GPUs at least), and
    `dprun train --distributed` as one rank whose gradients NCCL sums."""
    if c.gpus >= 2:
        rc, out = c.dprun("dprun_cuda_tests", ["--gtest_brief=1",
                                               "--gtest_filter=NcclProcessGroup.*:"
                                               "CudaCollectives.*"], "nccl.log", 180)
        summary, failed = gtest_summary(out)
        c.say(f"nccl: 2-rank process group and collectives over {c.gpus} GPUs: rc {rc}; "
              f"{summary}", failed=rc != 0 or failed)
    else:
        c.say("nccl: 2-rank process group SKIPPED: one GPU (it needs two)", failed=False)
        c.skipped.append("2-rank process group: one GPU")
    step_distributed(c)


# The larger models, made here from PyTorch (seed 0) and exported to ONNX: name, the input
# feeds of a batch of 4, the output the training step's loss reads.
def zoo_models(c):
    import torch
    folder = os.path.join(c.args.out, "zoo")
    os.makedirs(folder, exist_ok=True)
    made = {}
    for name in c.zoo:
        if c.left() < 20:
            c.say(f"torch: the stage's time is spent before {name}")
            break
        model, feeds = torch_model(name, "cpu")  # batch 64
        model = model.float().eval()
        # Norm layers start as ones and zeros, and the exporter merges initializers of equal
        # values into one, which training would then update as one: made distinct first.
        with torch.no_grad():
            generator = torch.Generator().manual_seed(1)
            for param in model.parameters():
                if param.dim() == 1:
                    param.add_(torch.rand(param.shape, generator=generator) * 0.01)
        small = {k: v[:4].clone() for k, v in feeds.items()}
        if name == "encoder_base":
            small["mask"][1, 100:] = 0
        names = (["input_ids", "attention_mask"] if name == "encoder_base" else ["input"])
        outputs = ["hidden", "pooled"] if name == "encoder_base" else ["output"]
        path = os.path.join(folder, name + ".onnx")
        if not os.path.exists(path):
            kwargs = {}
            import inspect
            if "dynamo" in inspect.signature(torch.onnx.export).parameters:
                kwargs["dynamo"] = False  # the TorchScript exporter, as the bundled models
            axes = {n: {0: "batch"} for n in names + outputs}
            if name == "encoder_base":
                for n in names + ["hidden"]:
                    axes[n] = {0: "batch", 1: "seq"}
            # The model's parameters as they are, so that dprun train updates what PyTorch's
            # SGD updates: no BatchNormalization folded into its Conv (PRESERVE keeps eval
            # mode without the eval-mode fusions), no scale or transpose folded into a weight.
            with torch.no_grad():
                torch.onnx.export(model, tuple(small.values()), path + ".partial",
                                  opset_version=17, input_names=names, output_names=outputs,
                                  dynamic_axes=axes, training=torch.onnx.TrainingMode.PRESERVE,
                                  do_constant_folding=False, **kwargs)
            os.replace(path + ".partial", path)
        made[name] = (model, dict(zip(names, small.values())), outputs)
    return made


def stage_torch(c):
    """ResNet-18, MobileNetV2 and the BERT-base-sized encoder from PyTorch: inference on
    cuda:0 against PyTorch on the same GPU (TF32 off), one training step (two SGD updates'
    losses) against PyTorch's, and (full mode, or --quick with a few iterations) throughput."""
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    made = zoo_models(c)
    for name, (model, feeds, outputs) in made.items():
        if c.left() < 15:
            c.say(f"torch: the stage's time is spent before checking {name}")
            break
        path = os.path.join(c.args.out, "zoo", name + ".onnx")
        gpu = model.to(c.torch_device)
        with torch.no_grad():
            want = gpu(*[v.to(c.torch_device) for v in feeds.values()])
        want = [w.float().cpu().numpy() for w in (want if isinstance(want, tuple) else (want,))]
        with tempfile.TemporaryDirectory() as folder:
            files = {}
            for n, v in feeds.items():
                files[n] = os.path.join(folder, n + ".in.npy")
                np.save(files[n], v.numpy())
            rc, out = run_outputs(c, path, files, folder, "torch.log")
            if rc:
                c.say(f"torch {name} inference on {c.args.device}: rc {rc}: {last_lines(out, 1)}")
            else:
                parts = []
                for n, w in zip(outputs, want):
                    r = compare(np.load(os.path.join(folder, n + ".npy")), w)
                    ok = r and r[0] <= 1e-3 * r[1]
                    parts.append(f"{n} max |diff| {r[0]:.3g} (max |ref| {r[1]:.3g}) "
                                 f"{'ok' if ok else 'MISMATCH'}" if r else f"{n} wrong shape")
                c.say(f"torch {name} batch 4 inference on {c.args.device} vs PyTorch on "
                      f"{c.torch_device} (bound 1e-3 of max |ref|): " + "; ".join(parts))
            train_step_vs_torch(c, name, gpu, feeds, outputs, path, folder)
        model.cpu()
        if c.torch_device == "cuda":
            torch.cuda.empty_cache()
    if c.torch_device != "cuda":
        return
    if c.args.quick:
        iters = ["--iters", "10", "--warmup", "3", "--rounds", "1"]
        for name in made:
            if c.left() < 30:
                break
            bench_once(c, os.path.join(c.args.out, "zoo", name + ".onnx"), name, ZOO[name], iters)
            m, feeds = torch_model(name)
            c.say(f"bench torch {name} batch 64 on cuda: "
                  f"{torch_bench(m, feeds, 10, 3, True):.1f} samples/s, inputs copied from "
                  f"pinned host memory each step")
            del m
            torch.cuda.empty_cache()
    else:
        step_bench(c, os.path.join(c.args.out, "zoo"))


def train_step_vs_torch(c, name, gpu_model, feeds, outputs, path, folder):
    """`dprun train` (cross-entropy on the first output, encoder: `pooled`; SGD, lr 0.01, two
    steps, no shuffle) against the same two steps in PyTorch (the model in eval mode, so
    BatchNormalization uses its running statistics as the exported graph does)."""
    import torch
    classes = 768 if name == "encoder_base" else 1000
    target = torch.arange(4) * 7 % classes
    np.save(os.path.join(folder, "target.npy"), target.numpy())
    loss_output = "pooled" if name == "encoder_base" else outputs[0]
    report = os.path.join(folder, "train.json")
    argv = ["train", path, "--target", os.path.join(folder, "target.npy"), "--loss",
            "cross_entropy", "--output", loss_output, "--optimizer", "sgd", "--lr", "0.01",
            "--batch", "4", "--steps", "2", "--no-shuffle", "--devices", c.args.device,
            "--json", report, "--save", os.path.join(folder, "trained.onnx")]
    for n in feeds:
        argv += ["--input", f"{n}={os.path.join(folder, n + '.in.npy')}"]
    rc, out = c.dprun("dprun", argv, "torch.log", 240)
    if rc:
        c.say(f"torch {name} training step on {c.args.device}: rc {rc}: {last_lines(out, 1)}")
        return
    got = np.array(json.load(open(report))["losses"], dtype=np.float64)
    model = gpu_model.train(False)
    xs = [v.to(c.torch_device) for v in feeds.values()]
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    want = []
    for _ in range(2):
        opt.zero_grad()
        out = model(*xs)
        logits = out[outputs.index(loss_output)] if isinstance(out, tuple) else out
        loss = torch.nn.functional.cross_entropy(logits, target.to(c.torch_device))
        loss.backward()
        opt.step()
        want.append(float(loss))
    rel = float(np.max(np.abs(got - want) / np.maximum(np.abs(want), 1e-6))) \
        if got.shape == (2,) else float("inf")
    c.say(f"torch {name} training, 2 SGD steps on {c.args.device} vs PyTorch on {c.torch_device}: losses "
          f"{' '.join(f'{g:.6g}' for g in got)} vs {' '.join(f'{w:.6g}' for w in want)}, max "
          f"rel diff {rel:.2g} {'ok' if rel <= 1e-3 else 'OUTSIDE 1e-3'}")


def stage_train(c):
    step_train(c, limit=3 if c.args.quick else None, mixed=not c.args.quick)


def stage_streams(c):
    c.say("streams: NOT AVAILABLE as a stage of its own: stream ordering by events runs in the "
          "tests stage (CudaCachingAllocator.*, record_stream) and the dataparallel and nccl "
          "stages (runs end without a host wait)", failed=False)
    c.skipped.append("streams: covered by the tests, dataparallel and nccl stages")


def stage_cuda_graphs(c):
    """DPRUN_CUDA_GRAPHS=1: the graph tests on the GPU (the bundled models, data-parallel
    replicas and training steps replayed bit for bit against plain runs; the pool and a capture
    that fails), then models/cnn.onnx and the transformer at batch 1, where a run is mostly
    kernel launches, benched without and with graphs."""
    for program, tests in (("dprun_unit_tests", "*CudaGraphs*/cuda"),
                           ("dprun_cuda_tests", "CudaGraphsOnAGpu.*")):
        rc, out = c.dprun(program, ["--gtest_brief=1", f"--gtest_filter={tests}"],
                          "cuda_graphs.log", 120)
        summary, failed = gtest_summary(out)
        c.say(f"cuda_graphs {program} {tests}: {summary}", failed=rc != 0 or bool(failed))
    iters = ["--iters", str(c.args.iters), "--warmup", "5", "--rounds", "3"]
    for path, name, extra in (("models/cnn.onnx", "cnn", ["--batch", "1"]),
                              ("models/transformer.onnx", "transformer",
                               ["--batch", "1", "--symbol", "seq=16"])):
        for label, env in (("plain", None), ("DPRUN_CUDA_GRAPHS=1", {"DPRUN_CUDA_GRAPHS": "1"})):
            bench_once(c, path, name, extra, iters, env=env, label=label)



# name: (what it runs, seconds in --quick, seconds in full, needs a GPU, needs PyTorch)
STAGES = {
    "plugin": ("a CPU run maps no CUDA library (LD_DEBUG=libs); cuda:0 opens the bundle's "
               "lib/libdprun_cuda.so", 20, 30, False, False),
    "tests": ("dprun_cuda_tests (--quick: all but the op cases, and 1 op case in "
              f"{OP_CASE_SAMPLE}) and `dprun conformance --device cuda:0`", 150, 900, True,
              False),
    "models": ("the bundled models (mlp, cnn, transformer) on cuda:0 vs their PyTorch outputs",
               20, 60, True, False),
    "dataparallel": ("models/cnn.onnx and models/transformer.onnx with --devices all vs "
                     "cuda:0 alone vs cpu:0", 40, 120, True, False),
    "nccl": ("NCCL collectives and a 2-rank process group (two GPUs or more), and "
             "`dprun train --distributed` as one rank", 40, 120, True, False),
    "streams": ("stream ordering by events: in the tests, dataparallel and nccl stages", 0, 0,
                False, False),
    "cuda_graphs": ("DPRUN_CUDA_GRAPHS=1: the graph tests on the GPU, and batch-1 runs benched "
                    "without and with graphs", 20, 60, True, False),
    "torch": ("ResNet-18, MobileNetV2, BERT-base encoder: inference and two training steps "
              "vs PyTorch on the GPU, throughput", 120, 900, True, True),
    "train": ("models/training cases vs PyTorch's losses and weights (--quick: 3 cases, "
              "float32 only)", 40, 600, True, False),
    "precision": ("--precision float16 and bfloat16 vs PyTorch float32 (full mode only)",
                  0, 300, True, False),
}
STAGE_FUNCTIONS = {
    "plugin": stage_plugin,
    "tests": lambda c: step_tests_and_conformance(c, ["tests", "conformance"]),
    "models": lambda c: step_models(c, None),
    "dataparallel": stage_dataparallel,
    "nccl": stage_nccl,
    "streams": stage_streams,
    "cuda_graphs": stage_cuda_graphs,
    "torch": stage_torch,
    "train": stage_train,
    "precision": lambda c: step_precision(c, os.path.join(c.args.out, "zoo")),
}


def write_report(c, results, total):
    with open(os.path.join(c.args.out, "report.json"), "w") as f:
        json.dump({"gpus": c.gpus, "quick": c.args.quick, "budget_s": c.args.budget,
                   "seconds": round(total, 1), "stages": results}, f, indent=1)
    with open(os.path.join(c.args.out, "report.md"), "w") as f:
        f.write(f"# dprun GPU check ({'quick' if c.args.quick else 'full'}, {c.gpus} GPU(s), "
                f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})\n\n"
                "| stage | status | seconds | budget | detail |\n|---|---|---|---|---|\n")
        for r in results:
            detail = "<br>".join(r["lines"]) if r["lines"] else r.get("reason", "")
            f.write(f"| {r['stage']} | {r['status']} | {r['seconds']} | {r['budget_s']} | "
                    f"{detail.replace('|', '/')} |\n")
        f.write(f"\nall: {total:.0f} s of a {c.args.budget} s budget\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bundle", default=os.path.dirname(os.path.dirname(os.path.abspath(
        __file__))), help="the unpacked bundle (default: the folder above this script's)")
    p.add_argument("--out", default="gpu-check-report")
    p.add_argument("--device", default="cuda:0", help="cuda:0, or cpu:0 or sim:0 to run the "
                   "GPU stages on the host (how the check itself is tested without a GPU)")
    p.add_argument("--quick", action="store_true",
                   help="fewer tests and iterations: under 8 minutes on one H100 or H200")
    p.add_argument("--budget", type=int, help="seconds for the whole check (default: 450 "
                   "with --quick, 3600 without); a stage gets its own share at most")
    p.add_argument("--stages", default=",".join(STAGES))
    p.add_argument("--dry-run", action="store_true", help="print the plan and exit")
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--zoo", default=",".join(ZOO), help="the larger models to check and time")
    args = p.parse_args()
    args.budget = args.budget or (450 if args.quick else 3600)
    args.out = os.path.abspath(args.out)
    args.bundle = os.path.abspath(args.bundle)
    if os.path.isdir(os.path.join(args.bundle, "src")):  # the bundle's models and expectations
        os.chdir(os.path.join(args.bundle, "src"))
    stages = [s for s in args.stages.split(",") if s]
    unknown = [s for s in stages if s not in STAGES]
    if unknown:
        p.error(f"unknown stage {', '.join(unknown)}; stages: {', '.join(STAGES)}")
    gpus = gpu_count()
    try:
        import torch  # noqa: F401
        has_torch = True
    except ImportError:
        has_torch = False
    mode = "quick" if args.quick else "full"
    print(f"dprun GPU check, {mode}: {gpus} GPU(s), PyTorch {'present' if has_torch else 'absent'}, "
          f"budget {args.budget} s, report in {args.out}/report.md and report.json")
    for name in stages:
        what, quick_s, full_s, needs_gpu, needs_torch = STAGES[name]
        print(f"  {name:13} {quick_s if args.quick else full_s:4d} s  {what}")
    if args.dry_run:
        return 0
    on_gpu = args.device.startswith("cuda")
    c = Check(args)
    c.gpus = gpus
    c.torch_device = "cuda" if on_gpu else "cpu"
    c.zoo = [m for m in args.zoo.split(",") if m]
    start = time.time()
    # run.sh looks for the machine's CUDA libraries once (a search of the file system) and
    # keeps the folders in the bundle: done here, before any stage's time counts.
    c.deadline = start + 120
    rc, out = c.dprun("dprun", ["--version"], "setup.log", 120)
    c.say(f"setup: {last_lines(out, 1)} (rc {rc}, {time.time() - start:.0f} s)", failed=False)
    if rc:
        print("the bundle's dprun does not start: see setup.log")
        return 1
    results = []
    for name in stages:
        what, quick_s, full_s, needs_gpu, needs_torch = STAGES[name]
        share = quick_s if args.quick else full_s
        c.lines, c.failures, c.skipped = [], 0, []
        result = {"stage": name, "what": what, "budget_s": share, "seconds": 0}
        reason = None
        left = args.budget - (time.time() - start)
        if needs_gpu and not gpus and on_gpu:
            reason = "no GPU"
        elif name == "nccl" and not on_gpu:
            reason = f"NCCL needs a GPU; --device {args.device}"
        elif needs_torch and not has_torch:
            reason = "PyTorch is not importable"
        elif needs_gpu and np is None:
            reason = "numpy is not importable"
        elif share == 0 and name != "streams":
            reason = f"not in {mode} mode"
        elif left < 10:
            reason = "the time budget is spent"
        if reason:
            print(f"{name}: SKIPPED: {reason}", flush=True)
            result.update(status="skipped", reason=reason, lines=[])
            results.append(result)
            continue
        t = time.time()
        c.deadline = t + min(share or 30, left)
        try:
            STAGE_FUNCTIONS[name](c)
        except Exception as e:  # a broken stage must not hide the others' results
            c.say(f"{name}: the check itself failed: {type(e).__name__}: {e}")
        result.update(seconds=round(time.time() - t, 1), lines=c.lines,
                      status="fail" if c.failures else
                      ("not available" if name == "streams" else
                       "pass" + (" (part skipped)" if c.skipped else "")))
        if c.skipped:
            result["reason"] = "; ".join(c.skipped)
        c.say(f"[{name}: {result['status']} in {result['seconds']:.0f} s of {share} s]",
              failed=False)
        results.append(result)
    total = time.time() - start
    write_report(c, results, total)
    print(f"\n{'stage':13} {'status':22} {'seconds':>7}")
    for r in results:
        print(f"{r['stage']:13} {r['status'] + (': ' + r['reason'] if r.get('reason') and r['status'] == 'skipped' else ''):22} {r['seconds']:7}")
    failed = [r["stage"] for r in results if r["status"] == "fail"]
    print(f"all: {total:.0f} s; report: {os.path.join(args.out, 'report.md')}")
    if failed:
        print(f"FAILED: {', '.join(failed)}")
        return 1
    if not gpus and on_gpu:
        print("NO GPU: the stages that need one did not run (exit 3)")
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
