#pragma once
// scatter(): split inputs into per-device chunks (torch.nn.parallel.scatter), with the
// chunking policies and per-input split rules dprun adds.
#include <optional>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace dprun {

enum class SplitPolicy {
  Chunk,     // torch.chunk: chunks of ceil(N/k) rows; may give fewer than k chunks
  Even,      // exactly min(N, k) chunks whose sizes differ by at most one
  Weighted,  // sizes proportional to per-device weights (largest-remainder rounding)
};

/// Parses "chunk", "even" or "weighted"; throws Error otherwise.
SplitPolicy parse_split_policy(const std::string& text);

/// How one input is distributed: split along a dim, broadcast whole to every replica, or
/// (for a 0-d input) scaled by each replica's share of the rows: value * rows / total, so
/// that a loss weighted by it sums over the replicas to the whole batch's mean. With
/// `counted_input`, the share is of the elements of that (split, integer) input that differ
/// from `uncounted`: value * kept / total kept, 0 for every replica when nothing is kept. A
/// loss averaged over the targets it does not ignore is weighted so (share_of_counted), as
/// the mean over the gathered outputs that PyTorch's DataParallel computes.
struct InputSplit {
  std::optional<int64_t> dim;  // nullopt: use the DataParallel dim
  bool broadcast = false;
  bool row_share = false;
  std::string counted_input;  // with row_share: share of this input's counted elements
  int64_t uncounted = 0;
  static InputSplit along(int64_t d) { return {d, false, false, {}, 0}; }
  static InputSplit whole() { return {std::nullopt, true, false, {}, 0}; }
  static InputSplit share_of_rows() { return {std::nullopt, false, true, {}, 0}; }
  static InputSplit share_of_counted(std::string input, int64_t uncounted) {
    return {std::nullopt, false, true, std::move(input), uncounted};
  }
};

/// The dim, from 0, that `input` is split along under `rule`, `dim` being the default; nullopt
/// when it is given whole (broadcast, a share of the rows, or 0-d). Throws Error when the dim
/// is out of range for the input, naming it as `name`.
std::optional<int64_t> split_dim_of(const Tensor& input, const InputSplit& rule, int64_t dim,
                                    const std::string& name);

/// Chunk sizes of `n` rows over `k` devices under `policy` (`weights` for Weighted, one per
/// device, positive). Zero-sized chunks are dropped only by Chunk (as torch.chunk does);
/// Even and Weighted keep one entry per device, possibly 0.
std::vector<int64_t> compute_chunk_sizes(int64_t n, size_t k, SplitPolicy policy,
                                         const std::vector<double>& weights = {});

struct ScatterResult {
  std::vector<Device> devices;              // devices that received a non-empty chunk, in order
  std::vector<int64_t> rows;                // rows of the split dim each of them got
  std::vector<std::vector<Tensor>> inputs;  // per device, the inputs in order
};

/// How scatter() splits.
struct ScatterOptions {
  /// The dim inputs are split along (negative counts from the end), unless `splits` says
  /// otherwise for an input.
  int64_t dim = 0;
  /// When given, one entry per device (>= 0) summing to the split dim's size; devices with a 0
  /// chunk get no work. Otherwise the sizes come from compute_chunk_sizes(policy, weights).
  std::vector<int64_t> chunk_sizes;
  SplitPolicy policy = SplitPolicy::Chunk;
  std::vector<double> weights;
  /// Optional, one per input: overrides the dim or broadcasts an input.
  std::vector<InputSplit> splits;
  /// Optional, one per input: the names errors give, and share_of_counted rules look up.
  std::vector<std::string> names;
};

/// Splits `inputs` across `devices` as `options` say. 0-d inputs are broadcast. All split
/// inputs must have the same size along their split dims: a mismatch is an error naming the
/// inputs, where PyTorch would silently truncate. A chunk of a CPU input for a CPU device is a
/// view of the input (Tensor::alias_on: CPU devices share the host's memory) where the rows
/// are contiguous; other chunks are copies on their device.
ScatterResult scatter(const std::vector<Tensor>& inputs, const std::vector<Device>& devices,
                      const ScatterOptions& options = {});

}  // namespace dprun
