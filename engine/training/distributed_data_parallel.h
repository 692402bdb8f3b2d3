#pragma once
// DistributedDataParallel: data-parallel training over the ranks of a process group
// (torch.nn.parallel.DistributedDataParallel). Each rank trains the same model with its own
// Trainer, itself data-parallel over the rank's local devices; the ranks' gradients are summed
// over the process group in buckets.
//
//   auto group = mpi_world_process_group();                 // mpirun -np N ...
//   auto model = std::make_shared<Model>(load_model("mlp.onnx", Device::cpu(0)));
//   TrainerOptions options;                                  // loss, local devices
//   DistributedDataParallel ddp(model, options, group);
//   Sgd optimizer(ddp.trainer().parameters(), {.lr = 0.1});
//   ddp.broadcast_parameters();                              // rank 0's initial values
//   for (each global batch of B rows) {
//     auto rows = shard_positions(B, group->rank(), group->size());
//     double loss = ddp.step(inputs_of(rows), target_of(rows), B, optimizer);
//   }
//   ddp.check_parameters_in_sync();
//
// The step equals a single-process step on the whole global batch. Rank r's loss is its
// shard's mean loss weighted by the shard's share of the global batch's rows (rows_r / B), or,
// for a loss that ignores some targets, of the batch's counted targets (counted_r / counted,
// one exchange of one count per step), as the Trainer weights each device's chunk, so the
// ranks' weighted gradients *sum* to the global batch's gradient, also when shards differ in
// size (PyTorch's DDP averages instead, which is the same only for equal shards). With one local
// device per rank and deterministic = true, a step's loss and gradients equal bit for bit those of
// a single-process Trainer over N devices whose chunks are the ranks' shards in rank order
// (--split-policy even over data whose batches list shard 0's rows, then shard 1's, ...): both sum
// the same weighted gradients in the same order (ReduceOrder::RankOrder). Without it the sums
// follow the group's algorithm (MPI's, or NCCL's): the same up to float32 rounding of the reduction
// (for 2 ranks, x0 + x1 = x1 + x0, so still bit for bit).
//
// Where gradients are summed. With an MPI group (host memory), gradients on an accelerator are
// gathered into a device copy of their bucket, which moves to the host and back once per step.
// With an NCCL group (engine/distributed/nccl_process_group.h) the buckets live in the GPU's memory
// and never leave it, and parameters and in-place state are broadcast there too.
//
// What overlaps. With one local device (or none), every gradient output is copied into its
// bucket by a node observer as the backward pass produces it, and a bucket's all-reduce starts
// as soon as its last gradient is in, while the backward pass goes on computing the rest; the
// observer also tests the started all-reduces after every node, because MPI progresses a
// nonblocking collective only inside MPI calls (Open MPI has no progress thread for them). So
// the transfers of early buckets proceed between later backward nodes, and the summing of
// received data runs inside those tests on the computing thread: it overlaps the backward pass
// in time but takes the same cores. With several local devices, the replicas' gradients are
// first summed on device_ids[0] after every replica has finished (DataParallel), so all buckets
// start only then and nothing overlaps the backward pass.
//
// Failures. Each step ends with an exchange of every rank's status (failed or not, loss,
// timing) on the group's control channel, after every bucket was started, whatever happened:
// a rank whose forward or backward threw still starts its remaining buckets (with zeros), so
// no collective is left unmatched. When any rank failed, every rank waits for its buckets and
// throws the same RankFailure naming the failing ranks. A rank that dies or hangs is beyond
// this: the launcher ends the job, or the group's timeout does.
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/distributed/process_group.h"
#include "engine/distributed/rank_agreement.h"
#include "engine/distributed/reducer.h"
#include "engine/training/trainer.h"

namespace dprun {

struct DistributedOptions {
  /// Largest gradient bucket in bytes (PyTorch's bucket_cap_mb: 25 MiB).
  size_t bucket_bytes = size_t(25) << 20;
  /// Sum gradients in rank order (ReduceOrder::RankOrder): bit-identical from run to run, and
  /// equal to the single-process run described above.
  bool deterministic = false;
  /// Copy rank 0's in-place state (BatchNormalization running statistics) to every rank before
  /// each step, as PyTorch's broadcast_buffers = true does, so all ranks hold rank 0's.
  bool broadcast_buffers = true;
  /// Float32: gradients are summed as they are. BFloat16 or Float16: float32 gradients are
  /// sent and summed in that type, half the bytes (PyTorch's bf16_compress_hook and
  /// fp16_compress_hook; ReducerOptions::wire_dtype). Float16's range ends at 65504 and
  /// bfloat16 keeps 8 bits of precision: a communication-bound run trades that for bandwidth.
  DType gradient_compression = DType::Float32;
};

/// Running totals of this rank's steps and of every rank's (from the status exchanges).
struct DistributedStats {
  int64_t steps = 0;
  std::vector<int64_t> rows;            // per rank: rows of its shards
  std::vector<double> compute_seconds;  // per rank: local forward and backward
  double step_seconds = 0;              // this rank: whole steps, communication included
  double wait_seconds = 0;              // this rank: from the end of its backward pass
                                        // until every bucket was summed (unhidden time)
  int64_t allreduce_bytes = 0;          // this rank: gradient bytes all-reduced
  size_t buckets = 0;                   // buckets per step
};

/// The positions within a global batch of `batch_rows` rows that rank `rank` of `world_size`
/// takes, by PyTorch's DistributedSampler rule applied to the batch: rank, rank + world_size,
/// rank + 2 world_size, ... Shards are disjoint and cover the batch; their sizes differ by at
/// most one (the lower ranks take the extra rows), and a rank takes none when batch_rows <=
/// rank. Unlike DistributedSampler no row is repeated to even out a last partial batch: the
/// loss weights account for uneven shards.
std::vector<int64_t> shard_positions(int64_t batch_rows, int rank, int world_size);

/// Thread safety: one call at a time. Every method marked collective must be called by every
/// rank, in the same order.
class DistributedDataParallel {
 public:
  /// Builds this rank's Trainer on `model` (whose parameters it trains in place) and lays out
  /// the gradient buckets. Local: nothing is exchanged, so a setup error on one rank can be
  /// agreed on (throw_if_any_rank_failed) before the first collective.
  DistributedDataParallel(std::shared_ptr<Model> model, TrainerOptions options,
                          std::shared_ptr<ProcessGroup> group, DistributedOptions distributed = {});

  /// Collective: copies every initializer of rank 0's model into every rank's (PyTorch's DDP
  /// does this when it is built). Called by the first step when not called before.
  void broadcast_parameters();

  /// Collective: forward and backward over this rank's shard (`inputs` in
  /// model().input_names() order and `target`, `rows` rows each, possibly 0) of a global batch
  /// of `global_rows` rows. Returns the global batch's mean loss, the same on every rank;
  /// gradients() then hold the global batch's gradients on every rank. Throws RankFailure on
  /// every rank when one failed ("rank 1: step 3: ...", steps counted from 1).
  ///
  /// Gradient accumulation without a sum per batch (PyTorch's no_sync()): with `sync` false
  /// the batch's gradients are added to this rank's own (the Trainer's) and nothing is summed
  /// over the ranks; the next call with `sync` true adds its batch's too and sums the totals
  /// once. Every rank makes the same calls with the same `sync` (a no-sync call still
  /// broadcasts rank 0's buffers, as PyTorch's forward does). `global_rows` is then the rows of
  /// all the accumulated batches over all ranks, so that the weights sum to 1. A no-sync call
  /// returns this rank's weighted loss of its batch; the syncing call returns the global loss of
  /// every batch since the last sync, and reports a failure in any of them (named by the step
  /// it belongs to). The syncing call's gradients are summed after its backward pass, not
  /// during it.
  ///
  /// A loss averaged over the targets it does not ignore (Trainer::counted_targets) weighs the
  /// shard by its share of the step's counted targets over all ranks instead of its rows, so
  /// that the step is their mean over the whole step, as in one process. `global_counted` is
  /// that count (count_targets of every batch of the step, taken before the first); without
  /// it a syncing call with no no-sync call before it counts its own batch over the ranks (one
  /// more exchange of one value), and the calls of an accumulation weigh by rows (right only
  /// when none of the step's targets is ignored).
  double forward_backward(const std::vector<Tensor>& inputs, const Tensor& target, int64_t rows,
                          int64_t global_rows, bool sync = true,
                          std::optional<int64_t> global_counted = std::nullopt);
  /// Collective: the targets that the loss counts (Trainer::counted_targets) in `targets`,
  /// this rank's shards of a step's batches, summed over the ranks; nullopt, with nothing
  /// exchanged, when the loss counts rows.
  std::optional<int64_t> count_targets(const std::vector<Tensor>& targets);
  /// Collective: forward_backward, then the optimizer's step on every rank, which keeps the
  /// ranks' parameters equal.
  double step(const std::vector<Tensor>& inputs, const Tensor& target, int64_t rows,
              int64_t global_rows, Optimizer& optimizer);

  /// The last step's summed gradients, in trainer().parameter_names() order.
  const std::vector<Tensor>& gradients() const { return reducer_->gradients(); }
  Trainer& trainer() { return *trainer_; }
  ProcessGroup& group() { return *group_; }
  const DistributedStats& stats() const { return stats_; }
  /// Whether the backward pass starts buckets as it goes (one local device).
  bool overlaps_backward() const { return overlap_; }

  /// Collective: a checksum of every initializer of this rank's model (parameters and state);
  /// throws the same CollectiveError on every rank when any rank's differs from rank 0's,
  /// naming it. Returns the checksum. With broadcast_buffers, rank 0's in-place state is first
  /// copied to every rank (each rank's last step updated its own from its own shard).
  uint64_t check_parameters_in_sync();

 private:
  // Rank 0's in-place state (buffers_) to every rank, in one coalesced broadcast.
  void broadcast_buffers();
  // forward_backward with sync false: this rank's batch, added to its own gradients.
  double accumulate_locally(const std::vector<Tensor>& inputs, const Tensor& target, int64_t rows,
                            double weight);
  // This rank's loss weight in the step (see forward_backward).
  double shard_weight(const Tensor& target, int64_t rows, int64_t global_rows,
                      std::optional<int64_t> global_counted) const;
  void on_node_done(const Node& node, std::span<const Tensor> outputs);

  std::shared_ptr<Model> model_;
  std::shared_ptr<ProcessGroup> group_;
  DistributedOptions options_;
  std::unique_ptr<Trainer> trainer_;
  std::unique_ptr<Reducer> reducer_;
  // The value each gradient output copies -> the parameters whose gradient it is.
  std::unordered_map<std::string, std::vector<size_t>> gradient_sources_;
  std::vector<std::string> buffers_;  // in-place state, by name
  bool overlap_ = false;
  bool collecting_ = false;  // the observer feeds the reducer only inside forward_backward
  bool broadcast_done_ = false;
  DistributedStats stats_;
  /// What this rank did since the last syncing call (no-sync batches).
  struct Unsynced {
    bool pending = false;  // a no-sync call was made
    int64_t batches = 0;   // computed batches, whose gradients the Trainer holds summed
    int64_t rows = 0;
    double loss = 0;  // their weighted losses, summed
    double compute_seconds = 0;
    std::exception_ptr error;
  } unsynced_;
};

/// What every rank of a job must hold alike of `model` (for check_ranks_agree), under the topic
/// "the model": each parameter's name, shape and dtype (tensor_facts), then each node's op and
/// name ("the graph's node 3" is "Gemm 'fc2'"), then a digest of the whole graph (nodes with their
/// inputs, outputs and attributes; the graph's inputs, outputs and opsets) for what the rest
/// misses. Parameter values are left out: the first step copies rank 0's to every rank.
std::vector<RankFact> model_facts(const Model& model);

/// A 64-bit checksum of tensors' bytes (FNV-1a over 8-byte words), in order; tensors on a
/// device are read through a host copy.
uint64_t checksum_tensors(const std::vector<Tensor>& tensors);
/// checksum_tensors of `model`'s parameters and statistics (string tensors left out).
uint64_t checksum_parameters(const Model& model);

}  // namespace dprun
