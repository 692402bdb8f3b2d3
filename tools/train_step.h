#pragma once
// One optimizer step of `dprun train`: the step's batches (--accumulate of them) and the step
// run through the Trainer or a distributed rank, timed and recorded for the report.
#include <cstdint>
#include <optional>
#include <vector>

#include "engine/training/distributed_data_parallel.h"
#include "engine/training/trainer.h"
#include "engine/training/training_data.h"
#include "tools/distributed_cli.h"
#include "tools/train_report.h"

namespace dprun::cli {

/// The batches of optimizer step `step`: the next `accumulate` of the epochs' sequence (a
/// distributed rank's shard of each), the step's rows over all ranks, and the epoch that ends in
/// the step when one of its batches is that epoch's last.
struct StepBatches {
  std::vector<Batch> batches;
  /// The random ops' seed of each batch's forward pass (Trainer::set_random_seed), derived
  /// from the run's seed, the rank and the batch's index in the run: a rerun, or a resumed
  /// run, draws the same Dropout masks.
  std::vector<uint64_t> seeds;
  int64_t rows = 0;
  std::optional<int64_t> epoch_end;
};

StepBatches step_batches(TrainingData& data, int64_t step, int64_t accumulate,
                         const std::optional<DistributedRun>& dist, uint64_t seed);

/// Runs one optimizer step over `step`'s batches and records it: the loss, rows and wall time,
/// the lr, the gradients' norm with clipping, the loss scale and whether the update was
/// skipped in float16. Several batches are each weighted by their share of the step's rows (of
/// its counted targets, over every rank, when the loss ignores some) and their gradients summed
/// before the update (through `ddp` on a distributed rank, else `trainer`, whose parameters are
/// split over `devices`' workers).
StepRecord run_step(const StepBatches& step, DistributedDataParallel* ddp, Trainer& trainer,
                    Optimizer& optimizer, const std::vector<Device>& devices);

}  // namespace dprun::cli
