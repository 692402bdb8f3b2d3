"""One rank of the distributed Trainer tests (test_distributed.py), started by mpirun: trains
models/tutorial's classifier on the rows this rank takes of each batch (rank r of N: rows r,
r+N, ... as DistributedSampler gives them) and writes what it saw as JSON.

    mpirun -np N python3 distributed_worker.py OUT_DIR '{"momentum": 0.9, ...}' [CASE]

CASE: "bad_batch" gives rank 1 a batch of the wrong width at step 2; "momentum_differs" builds
rank 1's Trainer with another momentum."""
import json
import os
import pathlib
import sys

import numpy as np

import dprun

MODELS = pathlib.Path(__file__).resolve().parents[2] / "models" / "tutorial"
X = np.load(MODELS / "train.x.npy")[:128]
Y = np.load(MODELS / "train.y.npy")[:128]


def launcher_rank():
    """The rank mpirun gave this process (Open MPI's or MPICH's variable), before dprun joins."""
    return int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0")))


def main(out_dir, options, case, batch=32, steps=4):
    out = pathlib.Path(out_dir)
    report = {"losses": [], "error": None}
    try:
        options = dict(loss="cross_entropy", optimizer="sgd", lr=0.1, distributed=True,
                       **options)
        if case == "momentum_differs" and launcher_rank() == 1:
            options["momentum"] = 0.5
        trainer = dprun.Trainer(dprun.load(str(MODELS / "classifier.train.onnx")), ["cpu:0"],
                                **options)
        rank, ranks = trainer.rank, trainer.world_size
        report.update(rank=rank, world_size=ranks)
        for step in range(steps):
            rows = np.arange(step * batch, (step + 1) * batch)[rank::ranks]
            x = X[rows]
            if case == "bad_batch" and rank == 1 and step == 1:
                x = np.zeros((len(rows), 3), np.float32)
            loss = trainer.step(x, target=Y[rows])
            if loss is not None:
                report["losses"].append(loss)
        trainer.save(out / "py.onnx")
    except dprun.Error as error:
        report["error"] = str(error)
        report.setdefault("rank", launcher_rank())
    (out / f"rank{report['rank']}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1], json.loads(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "")
