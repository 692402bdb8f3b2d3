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

#include "engine/comm/process_group.h"
#include "engine/parallel/distributed.h"
#include "tools/cli_args.h"

namespace dprun::cli {

/// --distributed and --timeout; for training also --deterministic and --bucket-mb.
std::vector<OptionSpec> distributed_option_specs(bool training);

struct DistributedRun {
  std::shared_ptr<ProcessGroup> group;
  DistributedOptions options;
  std::vector<int> cores;  // this rank's share of the host's cores
  int rank() const { return group->rank(); }
  int size() const { return group->size(); }
  bool is_root() const { return group->rank() == 0; }
};

/// Without --distributed: nullopt (--deterministic, --bucket-mb and --timeout are then usage
/// errors). With it: joins the MPI job, shares the host's cores among its ranks
/// (share_host_cores), silences stdout on every rank but 0, and records the group for
/// report_error(). Call it before any CPU device is used. Throws Error "this build of dprun has
/// no MPI support" when built without MPI.
std::optional<DistributedRun> start_distributed(const Args& args);

/// main()'s error report: prints "dprun: MESSAGE" (usage errors, exit_code 2) or
/// "dprun: error: MESSAGE" and returns exit_code; in a distributed run, as the header says.
int report_error(const std::exception& error, int exit_code);

/// Collective: every rank's `facts` (name, value) must equal rank 0's; otherwise throws the
/// same Error on every rank, "rank R has V NAME, rank 0 has V0".
void check_same_on_every_rank(ProcessGroup& group,
                              const std::vector<std::pair<std::string, int64_t>>& facts);

/// Collective: the "ranks" object of a training run's JSON (world size, cores, rows,
/// samples/s, compute and all-reduce seconds, all-reduce bytes per rank), on rank 0; empty on
/// the others.
std::string ranks_json(const DistributedRun& run, const DistributedDataParallel& ddp);

}  // namespace dprun::cli
