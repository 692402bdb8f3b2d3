#include "engine/training/distributed_job.h"

#include <cmath>

#include "engine/distributed/host_cores.h"
#include "engine/distributed/mpi_process_group.h"
#include "engine/distributed/nccl_process_group.h"

namespace dprun {

DType gradient_compression_of(const std::string& name, OptionSpelling spelling) {
  if (name == "bf16" || name == "bfloat16") return DType::BFloat16;
  if (name == "fp16" || name == "float16") return DType::Float16;
  if (name != "none")
    fail(spell_option("gradient-compression", spelling), " must be bf16, fp16 or none, got '", name,
         "'");
  return DType::Float32;
}

DistributedJob join_distributed_job(const DistributedJobSettings& settings,
                                    OptionSpelling spelling) {
  DistributedJob job;
  if (settings.timeout_seconds) job.group_options.timeout_seconds = *settings.timeout_seconds;
  if (settings.bucket_mb)
    job.options.bucket_bytes = static_cast<size_t>(std::ceil(*settings.bucket_mb * 1024 * 1024));
  job.options.deterministic = settings.deterministic;
  if (settings.gradient_compression)
    job.options.gradient_compression =
        gradient_compression_of(*settings.gradient_compression, spelling);
  job.group = mpi_world_process_group(job.group_options);
  job.group->set_stage("at start-up");
  job.local = local_ranks(*job.group);
  job.cores = share_host_cores(*job.group, job.local);
  return job;
}

std::vector<Device> job_devices(const DistributedJob& job, bool all_devices,
                                std::vector<Device> devices) {
  if (!all_devices || devices.empty() || devices.front().type != DeviceType::CUDA) return devices;
  return local_share(devices, job.local);
}

std::string gradient_backend(const std::optional<std::string>& backend, Device device,
                             OptionSpelling spelling) {
  const bool gpu = device.type == DeviceType::CUDA;
  const std::string option = spell_option("dist-backend", spelling);
  const std::string name = backend.value_or(gpu && nccl_supported() ? "nccl" : "mpi");
  if (name != "mpi" && name != "nccl") fail(option, " must be mpi or nccl, got '", name, "'");
  if (name == "nccl" && !gpu)
    fail(option,
         " nccl sums gradients in GPU memory: the first device must be a GPU (cuda:N), not ",
         device.to_string());
  return name;
}

void use_gradient_backend(DistributedJob& job, const std::string& backend, Device device) {
  if (backend == "nccl") job.group = nccl_process_group(job.group, device, job.group_options);
}

}  // namespace dprun
