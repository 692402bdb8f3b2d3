#pragma once
// This process's place in a multi-process job started by mpirun, as every front end (the
// command line's --distributed, dprun.Trainer(distributed=True)) sets it up: the MPI world
// group, the rank's share of its host's cores and devices, and the group the gradients are
// summed over. What a front end does with it (who prints, who writes) stays the front end's.
//
//   DistributedJob job = join_distributed_job({.deterministic = true}, OptionSpelling::Flag);
//   options.parallel.device_ids = job_devices(job, /*all_devices=*/true, all_devices());
//   const Device first = options.parallel.device_ids.front();
//   use_gradient_backend(job, gradient_backend(std::nullopt, first, spelling), first);
//   DistributedDataParallel ddp(model, options, job.group, job.options);
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/distributed/local_ranks.h"
#include "engine/distributed/process_group.h"
#include "engine/training/distributed_data_parallel.h"
#include "engine/training/optimizer_settings.h"

namespace dprun {

/// A job's settings as the front ends take them (--timeout, --bucket-mb, --deterministic,
/// --gradient-compression); unset: the defaults of ProcessGroupOptions and DistributedOptions.
struct DistributedJobSettings {
  std::optional<double> timeout_seconds;  // > 0
  std::optional<double> bucket_mb;        // > 0
  bool deterministic = false;
  std::optional<std::string> gradient_compression;  // bf16 | bfloat16 | fp16 | float16 | none
};

struct DistributedJob {
  std::shared_ptr<ProcessGroup> group;
  ProcessGroupOptions group_options;
  DistributedOptions options;
  LocalRanks local;        // this rank among the ranks of its host
  std::vector<int> cores;  // this rank's share of the host's cores
  int rank() const { return group->rank(); }
  int size() const { return group->size(); }
  bool is_root() const { return group->rank() == 0; }
};

/// The gradient compression `name` asks for: Float32 for "none", BFloat16 for "bf16" or
/// "bfloat16", Float16 for "fp16" or "float16". Throws Error "--gradient-compression must be
/// bf16, fp16 or none, got 'NAME'" (the option spelled as `spelling` writes it).
DType gradient_compression_of(const std::string& name, OptionSpelling spelling);

/// Collective over every process of the MPI job: joins it (mpi_world_process_group, bounded by
/// the timeout), finds this rank's place on its host and restricts the calling thread to the
/// rank's share of the host's cores (share_host_cores), so call it before any CPU device is
/// used. Throws Error for a bad gradient_compression (before joining), "this build of dprun has
/// no MPI support" without MPI, and the group's errors when the job does not start in time.
DistributedJob join_distributed_job(const DistributedJobSettings& settings,
                                    OptionSpelling spelling);

/// The devices the rank runs on. With `all_devices` (the caller asked for every device) and GPUs
/// in `devices`, the rank's own block of them (local_share: local rank l of L takes a block, as
/// each process of a PyTorch job takes cuda:local_rank); otherwise `devices` as given, CPU
/// devices dividing the rank's share of the cores. Throws Error when the host has fewer GPUs
/// than ranks.
std::vector<Device> job_devices(const DistributedJob& job, bool all_devices,
                                std::vector<Device> devices);

/// The group the gradients are summed over, by `backend`: `nccl` (the default when `device`, the
/// rank's device_ids[0], is a GPU and the build has NCCL) or `mpi` (the default otherwise). Throws
/// Error "--dist-backend must be mpi or nccl, got 'B'" and, for nccl with a device that is not a
/// GPU, "--dist-backend nccl sums gradients in GPU memory: the first device must be a GPU
/// (cuda:N), not cpu:0" (the option spelled as `spelling` writes it).
std::string gradient_backend(const std::optional<std::string>& backend, Device device,
                             OptionSpelling spelling);

/// Collective, for training: with `backend` "nccl" (from gradient_backend), replaces job.group
/// with an NCCL group on `device` made from the MPI one; with "mpi" keeps the MPI group.
void use_gradient_backend(DistributedJob& job, const std::string& backend, Device device);

}  // namespace dprun
