"""dprun.Trainer(distributed=True) under mpirun against `dprun train --distributed`: each rank
passes its own rows of every batch and the ranks together make the CLI's steps, bit for bit;
errors on one rank raise on every rank; the distributed keywords need distributed=True. The
mpirun tests run where ctest gives $DPRUN_MPIEXEC (a build with MPI) and skip, saying so,
elsewhere."""
import json
import os
import pathlib
import shlex
import subprocess
import sys

import numpy as np
import pytest

from conftest import MODELS, initializers, same_bits, train_cli

WORKER = pathlib.Path(__file__).with_name("distributed_worker.py")
CLASSIFIER = str(MODELS / "tutorial" / "classifier.train.onnx")
X = np.load(MODELS / "tutorial" / "train.x.npy")[:128]
Y = np.load(MODELS / "tutorial" / "train.y.npy")[:128]
FLAGS = ["--loss", "cross_entropy", "--optimizer", "sgd", "--lr", "0.1"]


def mpirun():
    """The launcher ctest passes ($DPRUN_MPIEXEC, with its flags), or a skip."""
    launcher = os.environ.get("DPRUN_MPIEXEC")
    if not launcher:
        pytest.skip("needs a build with MPI (ctest sets DPRUN_MPIEXEC)")
    return shlex.split(launcher)


def run_ranks(tmp_path, ranks, options, case=""):
    """Starts `ranks` workers; returns each rank's report, in rank order."""
    done = subprocess.run([*mpirun(), str(ranks), *shlex.split(os.environ.get(
        "DPRUN_MPIEXEC_FLAGS", "")), sys.executable, str(WORKER), str(tmp_path),
        json.dumps(options), case], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(ranks)]


def cli_run(tmp_path, ranks, flags, steps):
    """`dprun train --distributed` on the same rows: (losses, saved initializers)."""
    launch = [*mpirun(), str(ranks), *shlex.split(os.environ.get("DPRUN_MPIEXEC_FLAGS", ""))]
    return train_cli(tmp_path, CLASSIFIER, {"x": X}, Y,
                     [*FLAGS, "--distributed", "--devices", "cpu:0", *flags], steps, 32,
                     launcher=launch)


@pytest.mark.parametrize("ranks,options,flags", [
    (2, {"momentum": 0.9, "deterministic": True}, ["--momentum", "0.9", "--deterministic"]),
    (3, {"momentum": 0.9}, ["--momentum", "0.9"]),  # shards of 11, 11 and 10 rows
    (2, {"accumulate": 2, "gradient_compression": "bf16"},
     ["--accumulate", "2", "--gradient-compression", "bf16"]),
])
def test_ranks_make_the_clis_steps(tmp_path, ranks, options, flags):
    reports = run_ranks(tmp_path, ranks, options)
    # The workers make 4 step() calls of 32 rows: 4 steps, or 2 with accumulate=2.
    losses, params = cli_run(tmp_path, ranks, flags, 4 // options.get("accumulate", 1))
    assert [r["error"] for r in reports] == [None] * ranks
    assert [(r["rank"], r["world_size"]) for r in reports] == [(r, ranks) for r in range(ranks)]
    for report in reports:
        assert report["losses"] == losses  # every rank holds the global loss, exact doubles
    saved = initializers(tmp_path / "py.onnx")  # written by rank 0 alone
    assert sorted(saved) == sorted(params)
    for name in params:
        assert same_bits(saved[name], params[name]), name


def test_a_bad_batch_on_one_rank_raises_on_every_rank(tmp_path):
    reports = run_ranks(tmp_path, 2, {}, "bad_batch")
    message = "rank 1: input 'x' expects shape [batch, 16] but got [16, 3]"
    assert [r["error"] for r in reports] == [message, message]
    assert [len(r["losses"]) for r in reports] == [1, 1]
    assert not (tmp_path / "py.onnx").exists()


def test_ranks_with_other_settings_are_refused(tmp_path):
    reports = run_ranks(tmp_path, 2, {"momentum": 0.9}, "momentum_differs")
    message = "ranks disagree on momentum: rank 0 has 0.9, rank 1 has 0.5"
    assert [r["error"] for r in reports] == [message, message]


def test_one_rank_trains_as_one_process(tmp_path):
    mpirun()  # the build has MPI
    code = ("import dprun, numpy as np, sys\n"
            f"x = np.load({str(tmp_path / 'x.npy')!r}); y = np.load({str(tmp_path / 'y.npy')!r})\n"
            f"t = dprun.Trainer({CLASSIFIER!r}, ['cpu:0'], loss='cross_entropy', "
            "optimizer='sgd', lr=0.1, distributed=True)\n"
            "print(t.rank, t.world_size, repr(t.step(x, target=y)))\n")
    np.save(tmp_path / "x.npy", X[:32])
    np.save(tmp_path / "y.npy", Y[:32])
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)  # no launcher: a job of one rank
    assert done.returncode == 0, done.stderr
    losses, _ = train_cli(tmp_path, CLASSIFIER, {"x": X[:32]}, Y[:32], FLAGS + ["--devices",
                          "cpu:0"], 1, 32)
    assert done.stdout.split() == ["0", "1", repr(losses[0])]


@pytest.mark.parametrize("keyword,value", [
    ("deterministic", True), ("timeout", 5), ("bucket_mb", 1), ("gradient_compression", "bf16"),
    ("dist_backend", "mpi")])
def test_distributed_keywords_need_distributed(keyword, value):
    import dprun
    with pytest.raises(dprun.Error) as error:
        dprun.Trainer(CLASSIFIER, ["cpu:0"], loss="cross_entropy", optimizer="sgd", lr=0.1,
                      **{keyword: value})
    assert str(error.value) == f"{keyword} needs distributed=True"
