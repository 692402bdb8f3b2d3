"""dprun.Trainer against `dprun train`: the same losses and final parameters, bit for bit, on the
same batches, for the default run and with each option; accumulate, lr, evaluate, save,
checkpoints and resume, Ctrl-C, and a keyword for every training option of the CLI."""
import _thread
import json
import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import (BASE, BASE_FLAGS, CLASSIFIER, MODELS, TUTORIAL, X, Y, cli_path,
                      initializers, run_cli, same_bits, train_cli)


def train_python(tmp_path, model, inputs, target, batch, steps, device_ids, name="py",
                 **options):
    """A Trainer fed rows [i*batch, (i+1)*batch) of the arrays for `steps` calls; returns (the
    losses step() returned, the initializers of trainer.save)."""
    import dprun
    trainer = dprun.Trainer(dprun.load(model), device_ids, **options)
    losses = []
    for i in range(steps):
        rows = slice(i * batch, (i + 1) * batch)
        feeds = {name_: array[rows] for name_, array in inputs.items()}
        loss = trainer.step(**feeds, target=None if target is None else target[rows])
        if loss is not None:
            losses.append(loss)
    trainer.save(tmp_path / f"{name}.onnx")
    return losses, initializers(tmp_path / f"{name}.onnx")


def assert_same_run(python, cli):
    (py_losses, py_params), (cli_losses, cli_params) = python, cli
    assert py_losses == cli_losses  # exact doubles
    assert sorted(py_params) == sorted(cli_params)
    for name in cli_params:
        assert same_bits(py_params[name], cli_params[name]), name


def test_losses_and_parameters_equal_the_clis(tmp_path):
    cli = train_cli(tmp_path, CLASSIFIER, {"x": X}, Y,
                    [*BASE_FLAGS, "--momentum", "0.9", "--devices", "cpu:0,cpu:1"], 4, 32)
    python = train_python(tmp_path, CLASSIFIER, {"x": X}, Y, 32, 4, ["cpu:0", "cpu:1"],
                          momentum=0.9, **BASE)
    assert_same_run(python, cli)
    assert len(python[0]) == 4


def test_a_dataloader_with_augmentation_feeds_it(tmp_path):
    torch = pytest.importorskip("torch", reason="needs PyTorch (python3-torch)")
    import dprun
    # The augmentation (noise from a seeded generator) is applied here and written for the CLI.
    generator = torch.Generator().manual_seed(0)
    noisy = torch.from_numpy(X) + 0.01 * torch.randn(X.shape, generator=generator)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(noisy, torch.from_numpy(Y)), batch_size=32, shuffle=False)
    trainer = dprun.Trainer(dprun.load(CLASSIFIER), ["cpu:0", "cpu:1", "cpu:2"], momentum=0.9,
                            **BASE)
    losses = [trainer.step(xb, target=yb) for xb, yb in loader]
    trainer.save(tmp_path / "py.onnx")
    cli = train_cli(tmp_path, CLASSIFIER, {"x": noisy.numpy()}, Y,
                    [*BASE_FLAGS, "--momentum", "0.9", "--devices", "cpu:0,cpu:1,cpu:2"], 4, 32)
    assert_same_run((losses, initializers(tmp_path / "py.onnx")), cli)


def test_accumulate_updates_on_every_nth_call(tmp_path):
    import dprun
    trainer = dprun.Trainer(CLASSIFIER, ["cpu:0", "cpu:1"], accumulate=2, **BASE)
    before = trainer.parameters()
    assert trainer.step(X[:16], target=Y[:16]) is None
    assert trainer.pending == 1 and trainer.steps == 0
    assert all(same_bits(v, before[k]) for k, v in trainer.parameters().items())
    assert isinstance(trainer.step(X[16:32], target=Y[16:32]), float)
    assert trainer.pending == 0 and trainer.steps == 1


# Each option: the Python run equals the CLI's with the flag, and (unless it only changes where
# the work runs) differs from the run without it. (keywords, flags, changes the parameters)
OPTIONS = {
    "momentum": ({"momentum": 0.5}, ["--momentum", "0.5"], True),
    "nesterov": ({"momentum": 0.9, "nesterov": True}, ["--momentum", "0.9", "--nesterov"], True),
    "weight_decay": ({"weight_decay": 0.05}, ["--weight-decay", "0.05"], True),
    "no_weight_decay": ({"weight_decay": 0.05, "no_weight_decay": "1d"},
                        ["--weight-decay", "0.05", "--no-weight-decay", "1d"], True),
    "param_lr": ({"param_lr": {"fc2.*": 0.01}}, ["--param-lr", "fc2.*=0.01"], True),
    "betas": ({"optimizer": "adam", "betas": (0.8, 0.99)},
              ["--optimizer", "adam", "--betas", "0.8,0.99"], True),
    "eps": ({"optimizer": "adam", "eps": 1e-3}, ["--optimizer", "adam", "--eps", "0.001"], True),
    "clip_grad_norm": ({"clip_grad_norm": 0.05}, ["--clip-grad-norm", "0.05"], True),
    "precision": ({"precision": "bfloat16"}, ["--precision", "bfloat16"], True),
    "loss_scale": ({"precision": "float16", "loss_scale": 1e30},
                   ["--precision", "float16", "--loss-scale", "1e+30"], True),
    "loss_scale_growth_interval": (
        {"precision": "float16", "loss_scale_growth_interval": 1},
        ["--precision", "float16", "--loss-scale-growth-interval", "1"], None),
    "accumulate": ({"accumulate": 2}, ["--accumulate", "2"], True),
    "label_smoothing": ({"label_smoothing": 0.2}, ["--label-smoothing", "0.2"], True),
    "ignore_index": ({"ignore_index": 0}, ["--ignore-index", "0"], True),
    "class_dim": ({"class_dim": -1}, ["--class-dim", "-1"], False),
    "output": ({"output": "logits"}, ["--output", "logits"], False),
    "freeze": ({"freeze": ["fc1.weight"]}, ["--freeze", "fc1.weight"], True),
    "seed": ({"seed": 5}, ["--seed", "5"], False),  # no Dropout here: see test_seed_*
    "dim": ({"dim": 0}, ["--dim", "0"], False),  # and test_dim_is_the_clis
    "split_policy": ({"split_policy": "even"}, ["--split-policy", "even"], None),
    "weights": ({"split_policy": "weighted", "weights": [3, 1]},
                ["--split-policy", "weighted", "--weights", "3,1"], None),
    "split": ({"split": {"x": 0}}, ["--split", "x=0"], False),
    "threads": ({"threads": 1}, ["--threads", "1"], None),
    "allow_tf32": ({"allow_tf32": True}, ["--allow-tf32"], False),
    "allow_winograd": ({"allow_winograd": True}, ["--allow-winograd"], None),
}


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("default")
    return train_python(tmp, CLASSIFIER, {"x": X}, Y, 16, 4, ["cpu:0", "cpu:1"], **BASE)


@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_option_matches_the_cli_flag(tmp_path, option, default_run):
    keywords, flags, changes = OPTIONS[option]
    options = {**BASE, **keywords}
    cli_flags = [*flags]
    for flag, value in (("--loss", options["loss"]), ("--optimizer", options["optimizer"]),
                        ("--lr", str(options["lr"]))):
        if flag not in cli_flags:
            cli_flags += [flag, value]
    calls = 4 * options.get("accumulate", 1)
    python = train_python(tmp_path, CLASSIFIER, {"x": X}, Y, 16, calls, ["cpu:0", "cpu:1"],
                          **options)
    cli = train_cli(tmp_path, CLASSIFIER, {"x": X}, Y, [*cli_flags, "--devices", "cpu:0,cpu:1"],
                    4, 16)
    assert_same_run(python, cli)
    if changes is None:
        return  # where or how fast the work runs, not what it computes: may or may not round alike
    same = all(same_bits(python[1][k], v) for k, v in default_run[1].items())
    assert same != changes


def test_seed_draws_the_dropout_masks_of_the_cli(tmp_path):
    model = str(MODELS / "training/mlp_dropout.onnx")
    x = np.random.default_rng(0).standard_normal((32, 12)).astype(np.float32)
    y = (np.arange(32) % 3).astype(np.int64)
    options = dict(loss="cross_entropy", optimizer="sgd", lr=0.1)
    flags = ["--loss", "cross_entropy", "--optimizer", "sgd", "--lr", "0.1", "--devices",
             "cpu:0,cpu:1"]
    seeded = train_python(tmp_path, model, {"x": x}, y, 8, 4, ["cpu:0", "cpu:1"], seed=3,
                          **options)
    assert_same_run(seeded, train_cli(tmp_path, model, {"x": x}, y, [*flags, "--seed", "3"], 4, 8))
    unseeded = train_python(tmp_path, model, {"x": x}, y, 8, 4, ["cpu:0", "cpu:1"], name="p0",
                            **options)
    assert seeded[0] != unseeded[0]  # other masks


def test_sync_batchnorm_matches_the_cli(tmp_path):
    model = str(MODELS / "training/cnn_bn_dp3.onnx")
    x = np.load(MODELS / "training/cnn_bn_dp3.x.npy")
    y = np.load(MODELS / "training/cnn_bn_dp3.target.npy")
    devices = ["cpu:0", "cpu:1", "cpu:2"]
    flags = [*BASE_FLAGS, "--devices", ",".join(devices)]
    synced = train_python(tmp_path, model, {"x": x}, y, 10, 2, devices, sync_batchnorm=True, **BASE)
    assert_same_run(synced, train_cli(tmp_path, model, {"x": x}, y, [*flags, "--sync-batchnorm"],
                                      2, 10))
    plain = train_python(tmp_path, model, {"x": x}, y, 10, 2, devices, name="p0", **BASE)
    assert synced[0] != plain[0]


def test_lr_can_be_read_and_set_between_steps(tmp_path):
    """Halving the lr after 2 steps is --lr-schedule step:2:0.5."""
    import dprun
    trainer = dprun.Trainer(CLASSIFIER, ["cpu:0"], momentum=0.9, **BASE)
    assert trainer.lr == 0.1
    losses = []
    for i in range(4):
        if i == 2:
            trainer.lr = trainer.lr * 0.5
        losses.append(trainer.step(X[i * 16:(i + 1) * 16], target=Y[i * 16:(i + 1) * 16]))
    trainer.save(tmp_path / "py.onnx")
    cli = train_cli(tmp_path, CLASSIFIER, {"x": X}, Y,
                    [*BASE_FLAGS, "--momentum", "0.9", "--devices", "cpu:0", "--lr-schedule",
                     "step:2:0.5"], 4, 16)
    assert_same_run((losses, initializers(tmp_path / "py.onnx")), cli)
    with pytest.raises(dprun.Error, match=r"^lr: -1 is not a number >= 0$"):
        trainer.lr = -1


def test_evaluate_is_the_clis_validation(tmp_path):
    """One epoch of 4 batches of 32, then the validation rows (one batch of 32, as the CLI
    validates in batches of --batch)."""
    import dprun
    vx, vy = np.load(TUTORIAL / "val.x.npy")[:32], np.load(TUTORIAL / "val.y.npy")[:32]
    trainer = dprun.Trainer(CLASSIFIER, ["cpu:0", "cpu:1"], **BASE)
    for i in range(4):
        trainer.step(X[i * 32:(i + 1) * 32], target=Y[i * 32:(i + 1) * 32])
    result = trainer.evaluate(vx, target=vy)
    for name, array in (("x", X), ("y", Y), ("vx", vx), ("vy", vy)):
        np.save(tmp_path / f"{name}.npy", array)
    run_cli("train", CLASSIFIER, "--input", f"x={tmp_path / 'x.npy'}", "--target",
            tmp_path / "y.npy", "--val-input", f"x={tmp_path / 'vx.npy'}", "--val-target",
            tmp_path / "vy.npy", *BASE_FLAGS, "--batch", 32, "--epochs", 1, "--no-shuffle",
            "--devices", "cpu:0,cpu:1", "--save", tmp_path / "c.onnx", "--json",
            tmp_path / "c.json")
    validation = json.loads((tmp_path / "c.json").read_text())["validation"]
    assert result == validation[0]  # {"loss": ..., "accuracy": ...}, exact
    assert set(result) == {"loss", "accuracy"}


def test_checkpoint_and_resume_continue_the_run(tmp_path):
    import dprun
    options = dict(momentum=0.9, **BASE)
    whole = train_python(tmp_path, CLASSIFIER, {"x": X}, Y, 16, 6, ["cpu:0", "cpu:1"],
                         name="whole", **options)
    first = dprun.Trainer(CLASSIFIER, ["cpu:0", "cpu:1"], **options)
    for i in range(3):
        first.step(X[i * 16:(i + 1) * 16], target=Y[i * 16:(i + 1) * 16])
    first.save_checkpoint(tmp_path / "run.ckpt.onnx")
    resumed = dprun.Trainer.resume(tmp_path / "run.ckpt.onnx", ["cpu:0", "cpu:1"], **options)
    assert resumed.steps == 3
    losses = [resumed.step(X[i * 16:(i + 1) * 16], target=Y[i * 16:(i + 1) * 16])
              for i in range(3, 6)]
    resumed.save(tmp_path / "resumed.onnx")
    assert losses == whole[0][3:]
    params = initializers(tmp_path / "resumed.onnx")
    assert all(same_bits(params[k], v) for k, v in whole[1].items())
    with pytest.raises(dprun.Error, match=r"was trained with --momentum 0.9; resume with the same "
                                          r"--momentum \(got 0.5\)"):
        dprun.Trainer.resume(tmp_path / "run.ckpt.onnx", ["cpu:0"], **{**options, "momentum": 0.5})


def test_the_cli_resumes_a_python_checkpoint(tmp_path):
    import dprun
    trainer = dprun.Trainer(CLASSIFIER, ["cpu:0"], **BASE)
    for i in range(2):
        trainer.step(X[i * 16:(i + 1) * 16], target=Y[i * 16:(i + 1) * 16])
    trainer.save_checkpoint(tmp_path / "py.ckpt.onnx")
    for i in range(2, 4):
        trainer.step(X[i * 16:(i + 1) * 16], target=Y[i * 16:(i + 1) * 16])
    trainer.save(tmp_path / "py.onnx")
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "y.npy", Y)
    run_cli("train", tmp_path / "py.ckpt.onnx", "--resume", "--input", f"x={tmp_path / 'x.npy'}",
            "--target", tmp_path / "y.npy", *BASE_FLAGS, "--batch", 16, "--steps", 4,
            "--no-shuffle", "--devices", "cpu:0", "--save", tmp_path / "cli.onnx")
    cli, py = initializers(tmp_path / "cli.onnx"), initializers(tmp_path / "py.onnx")
    assert all(same_bits(py[k], v) for k, v in cli.items())


def test_ctrl_c_stops_between_steps():
    """SIGINT at a random moment of a training loop, in a child process: KeyboardInterrupt is
    raised, and the parameters are those of the whole steps made, bit for bit."""
    code = f"""
import os, signal, threading, numpy as np, dprun
x, y = np.load({str(TUTORIAL / 'train.x.npy')!r})[:16], np.load({str(TUTORIAL / 'train.y.npy')!r})[:16]
trainer = dprun.Trainer({CLASSIFIER!r}, ["cpu:0", "cpu:1"], loss="cross_entropy", optimizer="sgd", lr=0.01)
trainer.step(x, target=y)
threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
try:
    while True:
        trainer.step(x, target=y)
except KeyboardInterrupt:
    pass
again = dprun.Trainer({CLASSIFIER!r}, ["cpu:0", "cpu:1"], loss="cross_entropy", optimizer="sgd", lr=0.01)
for _ in range(trainer.steps):
    again.step(x, target=y)
a, b = trainer.parameters(), again.parameters()
assert all(a[k].tobytes() == b[k].tobytes() for k in a)
print(trainer.steps)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 1


def test_a_pending_ctrl_c_stops_before_a_step():
    import dprun
    trainer = dprun.Trainer(CLASSIFIER, ["cpu:0"], **BASE)
    with pytest.raises(KeyboardInterrupt):
        _thread.interrupt_main()  # as Ctrl-C: SIGINT's handler raises KeyboardInterrupt
        trainer.step(X[:16], target=Y[:16])
    assert trainer.steps == 0


def test_dim_is_the_clis(tmp_path):
    """dim=-2 splits the 1-d target along a dim it does not have: the CLI's message."""
    import dprun
    np.save(tmp_path / "x.npy", X[:32])
    np.save(tmp_path / "y.npy", Y[:32])
    done = subprocess.run([cli_path(), "train", CLASSIFIER, "--input", f"x={tmp_path / 'x.npy'}",
                           "--target", tmp_path / "y.npy", *BASE_FLAGS, "--batch", "16",
                           "--steps", "2", "--dim", "-2", "--devices", "cpu:0,cpu:1", "--save",
                           tmp_path / "o.onnx"], capture_output=True, text=True)
    message = done.stderr.strip().removeprefix("dprun: error: ")
    assert message == "scatter: dim -2 is out of range for 'target' of shape [16]"
    trainer = dprun.Trainer(CLASSIFIER, ["cpu:0", "cpu:1"], dim=-2, **BASE)
    with pytest.raises(dprun.Error, match="^" + re.escape(message) + "$"):
        trainer.step(X[:16], target=Y[:16])


def test_training_errors():
    import dprun
    trainer = dprun.Trainer(CLASSIFIER, ["cpu:0"], **BASE)
    with pytest.raises(dprun.Error, match=r"^loss 'cross_entropy' needs target=$"):
        trainer.step(X[:16])
    bad = Y[:16].copy()
    bad[3] = 9
    with pytest.raises(dprun.Error, match=r"^target: row 3 holds class 9, outside \[0, 4\)"):
        trainer.step(X[:16], target=bad)
    nan = X[:16].copy()
    nan[5, 0] = np.nan
    with pytest.raises(dprun.Error, match=r"^input 'x': row 5 holds NaN"):
        trainer.step(nan, target=Y[:16])
    with pytest.raises(dprun.Error, match=r"^Trainer got an unexpected keyword 'momentun'"):
        dprun.Trainer(CLASSIFIER, ["cpu:0"], momentun=0.9, **BASE)
    with pytest.raises(dprun.Error, match=r"^momentum and nesterov are SGD options, not adam's$"):
        dprun.Trainer(CLASSIFIER, ["cpu:0"], **{**BASE, "optimizer": "adam", "momentum": 0.9})
    with pytest.raises(dprun.Error, match=r"^Trainer needs loss="):
        dprun.Trainer(CLASSIFIER, ["cpu:0"], optimizer="sgd", lr=0.1)
    with pytest.raises(dprun.Error, match=r"^no_weight_decay: 'nope' names no trainable"):
        dprun.Trainer(CLASSIFIER, ["cpu:0"], weight_decay=0.1, no_weight_decay="nope", **BASE)
    with pytest.raises(dprun.Error, match=r"training diverged"):
        huge = dprun.Trainer(CLASSIFIER, ["cpu:0"], **{**BASE, "lr": 1e30})
        for _ in range(3):
            huge.step(X[:16], target=Y[:16])


OPTIMIZER_ERRORS = [
    ({"eps": 1e-6}, "betas and eps are Adam options, not SGD's"),
    ({"optimizer": "rmsprop"}, "optimizer must be sgd, adam or adamw, got 'rmsprop'"),
    ({"optimizer": "adam", "betas": (0.9, 1)}, "betas: (0.9, 1) are not two numbers in [0, 1)"),
    ({"optimizer": "adam", "betas": [0.9]}, "betas takes two numbers, (B1, B2)"),
    ({"no_weight_decay": "1d"}, "no_weight_decay exempts parameters from a weight decay of 0"),
    ({"param_lr": {"fc*": 0.1, "fc1.bias": 0.2}},
     "param_lr: 'fc1.bias' is in two groups, 'fc*' and 'fc1.bias'"),
    ({"param_lr": {"head.*": 0.1}}, "param_lr: 'head.*' names no trainable parameter"),
    ({"param_lr": {"fc1.*": -1}}, "param_lr: 'fc1.*' gives an lr that is not a number >= 0"),
]


@pytest.mark.parametrize("options,message", OPTIMIZER_ERRORS)
def test_optimizer_settings_are_checked_as_the_cli_checks_them(options, message):
    """The command line's messages (tests/cli/train_options_test.cpp) with keywords for flags."""
    import dprun
    with pytest.raises(dprun.Error, match="^" + re.escape(message) + "$"):
        dprun.Trainer(CLASSIFIER, ["cpu:0"], **{**BASE, **options})


@pytest.mark.parametrize("value,shown", [(np.nan, "NaN"), (np.inf, "inf"), (-np.inf, "-inf")])
def test_a_value_that_is_not_finite_is_found_in_any_row(value, shown):
    import dprun
    trainer = dprun.Trainer(CLASSIFIER, ["cpu:0"], **BASE)
    x = np.load(TUTORIAL / "train.x.npy")  # 512 rows of 16: 8192 values
    x[511, 15] = value  # the last one
    with pytest.raises(dprun.Error, match=f"^input 'x': row 511 holds {re.escape(shown)}: "):
        trainer.step(x, target=np.load(TUTORIAL / "train.y.npy"))
    assert trainer.steps == 0


# `dprun train` options that have no keyword, and why.
NOT_KEYWORDS = {
    "input": "batches are step()'s arguments", "target": "step(target=...)",
    "val-input": "evaluate()'s arguments", "val-target": "evaluate(target=...)",
    "batch": "the rows of the arrays given", "steps": "a step count: the caller's loop",
    "epochs": "a step count: the caller's loop", "shuffle": "the caller's DataLoader",
    "no-shuffle": "the caller's DataLoader", "save": "save(path)",
    "checkpoint-every": "save_checkpoint(path)", "resume": "Trainer.resume(path)",
    "external-data-threshold": "names how files are written", "json": "a file",
    "export-training-graph": "a file", "log-every": "the caller prints",
    "warmup-steps": "throughput reporting", "profile": "a report of the run",
    "lr-schedule": "a schedule over a step count: set trainer.lr",
    "lr-warmup": "a schedule over a step count: set trainer.lr",
    "lr-warmup-start": "a schedule over a step count: set trainer.lr",
    "devices": "device_ids", "output-device": "training gathers on device_ids[0]",
    "help": "",
    "augment": "draws keyed by each sample's row in a file, which step()'s batches do not carry: "
               "augment in the caller's DataLoader",
    "embed-preprocessing": "dprun convert --embed-preprocessing on the saved model",
}


def test_layout_and_normalize_transform_uint8_batches_as_the_cli(tmp_path):
    """layout= and normalize= on uint8 channels-last batches: the CLI's run on the same file."""
    model = str(MODELS / "training" / "cnn_bn_1dev.onnx")
    rng = np.random.default_rng(3)
    x = rng.integers(0, 256, size=(20, 8, 8, 3), dtype=np.uint8)
    y = np.load(MODELS / "training" / "cnn_bn_1dev.target.npy")
    normalize = "0.49,0.48,0.45/0.25,0.24,0.26"
    cli = train_cli(tmp_path, model, {"x": x}, y,
                    [*BASE_FLAGS, "--devices", "cpu:0", "--layout", "x=nhwc", "--normalize",
                     f"x={normalize}"], 2, 10)
    python = train_python(tmp_path, model, {"x": x}, y, 10, 2, ["cpu:0"],
                          layout={"x": "nhwc"},
                          normalize={"x": ([0.49, 0.48, 0.45], [0.25, 0.24, 0.26])}, **BASE)
    assert_same_run(python, cli)


def test_every_cli_training_option_has_a_keyword():
    import dprun
    help_text = subprocess.run([cli_path(), "train", "--help"], capture_output=True,
                               text=True).stdout
    flags = sorted(set(re.findall(r"--([a-z0-9][a-z0-9-]*)", help_text)))
    with pytest.raises(dprun.Error) as error:
        dprun.Trainer(CLASSIFIER, ["cpu:0"], not_an_option=1, **BASE)
    keywords = re.search(r"it takes: (.*)\)$", str(error.value)).group(1).split(", ")
    missing = [f for f in flags if f not in NOT_KEYWORDS and f.replace("-", "_") not in keywords]
    assert missing == []


def test_a_dataloader_run_matches_pytorch_at_1e_4(tmp_path):
    """The training contract of docs/training.md: the tutorial classifier, from the exported
    initial values, trained by dprun.Trainer on 2 devices and by PyTorch on the same DataLoader
    batches, gives each step's loss and the final parameters within 1e-4 relative (1e-6
    absolute)."""
    torch = pytest.importorskip("torch", reason="needs PyTorch (python3-torch)")
    import importlib.util

    import dprun
    spec = importlib.util.spec_from_file_location(
        "export_classifier", MODELS.parent / "docs/examples/export_classifier.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    net = example.Classifier()
    initial = initializers(CLASSIFIER)
    net.load_state_dict({name: torch.from_numpy(initial[name].copy())
                         for name in net.state_dict()})
    sgd = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.from_numpy(X), torch.from_numpy(Y)), batch_size=32)
    trainer = dprun.Trainer(CLASSIFIER, ["cpu:0", "cpu:1"], momentum=0.9, **BASE)
    for xb, yb in loader:
        ours = trainer.step(xb, target=yb)
        sgd.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(xb), yb)
        loss.backward()
        sgd.step()
        np.testing.assert_allclose(ours, loss.item(), rtol=1e-4, atol=1e-6)
    ours = trainer.parameters()
    for name, value in net.state_dict().items():
        np.testing.assert_allclose(ours[name], value.numpy(), rtol=1e-4, atol=1e-6, err_msg=name)
