#pragma once
// `dprun run --distributed` and `dprun bench --distributed`: the batch cut over the ranks
// (tools/rank_slices.h), each rank running its chunk data-parallel over its own devices.
#include <string>

#include "engine/model.h"
#include "engine/parallel/data_parallel.h"
#include "tools/distributed_cli.h"
#include "tools/inputs.h"

namespace dprun::cli {

/// Runs the model `iters` times; rank 0 gathers the outputs (concatenated along --dim in rank
/// order), prints them as `dprun run` does, writes --output-dir and --json (with "ranks": world
/// size and rows per rank). A rank that fails stops every rank (RankFailure).
int run_on_ranks(const DistributedRun& run, const std::string& model_path,
                 const ModelOptions& model_options, const DataParallelOptions& options,
                 const InputOptions& input_options, int iters, const std::string& output_dir,
                 const std::string& json_path);

/// Throughput over the ranks: every rank times `iters` runs of its chunk between two
/// barriers, so a step lasts as long as the slowest rank's. Rank 0 prints samples/s and each
/// rank's rows and busy time; with `sweep`, also the scaling table over the first 1 .. N ranks
/// (the others wait); --json as `dprun bench`, with "ranks".
int bench_on_ranks(const DistributedRun& run, const std::string& model_path,
                   const ModelOptions& model_options, const DataParallelOptions& options,
                   const InputOptions& input_options, int warmup, int iters, bool sweep,
                   const std::string& json_path);

}  // namespace dprun::cli
