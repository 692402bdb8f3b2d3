#pragma once
// The command line's side of multi-process runs: `mpirun -np N dprun ... --distributed`.
//
// Every rank runs the same command. Only rank 0 prints to stdout and writes files. Errors:
// a failure every rank learns of together (RankFailure, from the exchange that ends each step)
// is printed once, by rank 0, and every rank exits with the error's status; any other error
// is this rank's alone, so it prints "dprun: error: rank R: ..." and ends the whole job
// (MPI_Abort), so that no rank waits for it.
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/distributed/local_ranks.h"
#include "engine/distributed/process_group.h"
#include "engine/distributed/rank_agreement.h"
#include "engine/training/distributed_data_parallel.h"
#include "engine/training/distributed_job.h"
#include "tools/command_line.h"
#include "tools/report_files.h"

namespace dprun::cli {

/// The options of a multi-process run, as given.
struct DistributedFlags {
  bool distributed = false, deterministic = false;
  std::optional<double> timeout, bucket_mb;
  std::optional<std::string> dist_backend, gradient_compression;
};

/// Declares --distributed and --timeout; for training also --deterministic, --bucket-mb,
/// --gradient-compression and --dist-backend. Each but --distributed needs --distributed.
void add_distributed_options(CLI::App& app, DistributedFlags& flags, bool training);

/// The job (engine/training/distributed_job.h) and what the command line adds to it.
struct DistributedRun : DistributedJob {
  /// The command's options every rank must be given alike (option_facts), when
  /// start_distributed was given the command's app; checked with the model before the first
  /// step (check_ranks_agree_to_start).
  std::vector<RankFact> option_facts;
};

/// Without --distributed: nullopt. With it: joins the MPI job (join_distributed_job: the host's
/// cores shared among its ranks), silences stdout on every rank but 0, and records the group for
/// report_error(); with `app` (the command's, parsed), records option_facts(*app).
/// Call it before any CPU device is used. Throws UsageError for a bad --gradient-compression,
/// Error "this build of dprun has no MPI support" when built without MPI. Joining is bounded by
/// --timeout: a rank whose job does not start in time (another rank stopped or stuck before
/// joining) ends with "dprun: error: rank R: the job did not start within T s: ...", and one
/// that does not reach the first exchange is named by the others ("rank 1 did not join the
/// all-gather at start-up within T s").
std::optional<DistributedRun> start_distributed(const DistributedFlags& flags,
                                                const CLI::App* app = nullptr);

/// job_devices for --devices `devices_flag` (all when not given).
std::vector<Device> rank_devices(const DistributedRun& run,
                                 const std::optional<std::string>& devices_flag,
                                 std::vector<Device> devices);

/// Collective: use_gradient_backend with --dist-backend's group (gradient_backend, its errors as
/// UsageError).
void choose_gradient_backend(DistributedRun& run, const std::optional<std::string>& backend,
                             Device device);

/// main()'s error report: prints "dprun: error: MESSAGE" (usage errors, exit_code 2, alike)
/// and returns exit_code; in a distributed run, as the header says.
int report_error(const std::exception& error, int exit_code);

/// The options of `app` (parsed) that every rank must be given alike, as facts: every option but
/// the per-rank ones (see per_rank_options() in distributed_cli.cpp), valued "8" as given (numbers
/// in their shortest form, so 0.10 and 0.1 agree; a repeated option's values sorted), "none" when
/// not given; a flag "it" or "not".
std::vector<RankFact> option_facts(const CLI::App& app);

/// Collective, before the first step: every rank must hold the same run.option_facts, `model`
/// (model_facts: its graph and each parameter's name, shape and dtype) and `more` (the data's
/// rows, the inputs' shapes). Otherwise throws the same CollectiveError on every rank naming the
/// first difference, "ranks disagree on --batch: rank 0 has 8, rank 1 has 4", which rank 0
/// prints, and every rank exits with status 1.
void check_ranks_agree_to_start(const DistributedRun& run, const Model& model,
                                const std::vector<RankFact>& more);

/// Collective: the "ranks" object of a training run's JSON (world size, cores, rows,
/// samples/s, compute and all-reduce seconds, all-reduce bytes per rank), on rank 0; null on
/// the others.
JsonReport ranks_json(const DistributedRun& run, const DistributedDataParallel& ddp);

}  // namespace dprun::cli
