"""Shared helpers of the Python module's tests: the module, the dprun CLI beside it, and the
repository's bundled models. Run by ctest (label python) with /usr/bin/python3 -m pytest and
PYTHONPATH set to the build's python folder; every test skips, saying why, when the module was
not built."""
import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
MODELS = REPO / "models"
# The tutorial classifier's training form and its first 128 rows: the Trainer tests' run.
TUTORIAL = MODELS / "tutorial"
CLASSIFIER = str(TUTORIAL / "classifier.train.onnx")
X = np.load(TUTORIAL / "train.x.npy")[:128]
Y = np.load(TUTORIAL / "train.y.npy")[:128]
BASE = dict(loss="cross_entropy", optimizer="sgd", lr=0.1)
BASE_FLAGS = ["--loss", "cross_entropy", "--optimizer", "sgd", "--lr", "0.1"]

try:
    import dprun  # noqa: F401
    _IMPORT_ERROR = None
except ImportError as error:  # the module was not built, or PYTHONPATH misses it
    _IMPORT_ERROR = error


def pytest_collection_modifyitems(config, items):
    if _IMPORT_ERROR is None:
        return
    reason = (f"the dprun Python module was not built or is not on PYTHONPATH ({_IMPORT_ERROR}); "
              "configure with python3-dev and pybind11-dev installed (DPRUN_PYTHON=AUTO or ON)")
    for item in items:
        item.add_marker(pytest.mark.skip(reason=reason))


def cli_path():
    """The dprun CLI of the same build: $DPRUN_CLI, else beside the module's python folder."""
    if os.environ.get("DPRUN_CLI"):
        return os.environ["DPRUN_CLI"]
    import dprun
    return str(pathlib.Path(dprun.__file__).resolve().parent.parent / "dprun")


def run_cli(*args, cwd=None, launcher=()):
    """Runs `dprun ARGS...` (after `launcher`, such as mpirun and its flags); fails the test
    with its stderr when it fails."""
    done = subprocess.run([*launcher, cli_path(), *map(str, args)], capture_output=True,
                          text=True, cwd=cwd or REPO)
    assert done.returncode == 0, done.stderr
    return done.stdout


def train_cli(tmp_path, model, inputs, target, options, steps, batch, name="cli", launcher=()):
    """`dprun train` over the rows of `inputs` (a dict of arrays) and `target`, in order
    (--no-shuffle), `steps` steps of `batch` rows; returns (losses, initializers of --save)."""
    args = ["train", model]
    for input_name, array in inputs.items():
        path = tmp_path / f"{name}.{input_name}.npy"
        np.save(path, array)
        args += ["--input", f"{input_name}={path}"]
    if target is not None:
        np.save(tmp_path / f"{name}.target.npy", target)
        args += ["--target", tmp_path / f"{name}.target.npy"]
    saved = tmp_path / f"{name}.onnx"
    report = tmp_path / f"{name}.json"
    args += ["--batch", batch, "--steps", steps, "--no-shuffle", "--save", saved,
             "--json", report, *options]
    run_cli(*args, launcher=launcher)
    return json.loads(report.read_text())["losses"], initializers(saved)


def initializers(path):
    """The initializers of an ONNX file by name, as NumPy arrays."""
    onnx = pytest.importorskip("onnx", reason="comparing saved models needs python3-onnx")
    from onnx import numpy_helper
    model = onnx.load(str(path))
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def same_bits(a, b):
    """Whether two arrays hold the same dtype, shape and bytes."""
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
