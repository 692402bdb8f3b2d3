#pragma once
// How `dprun run` and `dprun bench` cut a batch over the ranks of a distributed run: into
// contiguous chunks of even size (they differ by at most one row, the lower ranks taking the
// extra rows), rank r the r-th, so that rank 0 rebuilds the batch's outputs by concatenating
// the ranks' in rank order, as DataParallel gathers its devices'. Each rank then splits its
// chunk over its own devices. (Training shards by DistributedSampler's strided rule instead;
// see engine/training/training_data.h.)
#include <string>
#include <vector>

#include "engine/parallel/data_parallel.h"

namespace dprun::cli {

struct RankSlices {
  int64_t batch = 0;            // rows of the whole batch
  std::vector<int64_t> starts;  // per rank: first row
  std::vector<int64_t> rows;    // per rank: row count, possibly 0
};

/// The chunks of the batch of `inputs` (in model input order, named `names`) over `ranks`
/// ranks, along each input's split dim from `options` (--dim, --split). Throws Error when no
/// input is split or when split inputs disagree on the batch size.
RankSlices slice_over_ranks(const std::vector<Tensor>& inputs,
                            const std::vector<std::string>& names,
                            const DataParallelOptions& options, int ranks);

/// The inputs of the chunk [start, start + rows): split inputs narrowed along their split dim,
/// broadcast and 0-d inputs whole.
std::vector<Tensor> chunk_inputs(const std::vector<Tensor>& inputs,
                                 const std::vector<std::string>& names,
                                 const DataParallelOptions& options, int64_t start, int64_t rows);

}  // namespace dprun::cli
