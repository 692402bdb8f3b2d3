# Trains the tutorial classifier over the ranks of an mpirun job, as PyTorch's
# DistributedDataParallel with a DistributedSampler: each rank steps on its own rows of every
# batch, and the ranks' gradients are summed into one step over the whole batch.
#     mpirun -np 2 python3 docs/examples/train_ddp.py
import numpy as np

import dprun

x = np.load("models/tutorial/train.x.npy")           # float32 [512, 16]
y = np.load("models/tutorial/train.y.npy")           # int64 [512]
trainer = dprun.Trainer("models/tutorial/classifier.train.onnx", ["cpu:0"],
                        loss="cross_entropy", optimizer="sgd", lr=0.1, momentum=0.9,
                        distributed=True)
rank, ranks = trainer.rank, trainer.world_size
for epoch in range(2):
    for first in range(0, 512, 64):
        mine = slice(first + rank, first + 64, ranks)  # rows rank, rank + ranks, ...
        loss = trainer.step(x[mine], target=y[mine])   # the whole batch's loss, on every rank
    if rank == 0:
        print(f"epoch {epoch}: loss {loss:.4f}")
trainer.save("classifier.ddp.onnx")                  # rank 0 writes; the others do nothing
