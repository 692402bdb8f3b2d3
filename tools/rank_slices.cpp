#include "tools/rank_slices.h"

namespace dprun::cli {

namespace {

/// The dim input `name` is split along (scatter's rule), or -1 when it is given whole.
int64_t split_dim(const Tensor& t, const std::string& name, const DataParallelOptions& options) {
  const auto it = options.input_splits.find(name);
  const InputSplit rule = it != options.input_splits.end() ? it->second : InputSplit{};
  return split_dim_of(t, rule, options.dim, "input '" + name + "'").value_or(-1);
}

}  // namespace

RankSlices slice_over_ranks(const std::vector<Tensor>& inputs,
                            const std::vector<std::string>& names,
                            const DataParallelOptions& options, int ranks) {
  RankSlices slices;
  slices.batch = -1;
  std::string first;
  for (size_t i = 0; i < inputs.size(); ++i) {
    int64_t d = split_dim(inputs[i], names[i], options);
    if (d < 0) continue;
    int64_t n = inputs[i].dim(d);
    if (slices.batch < 0) {
      slices.batch = n;
      first = names[i];
    }
    DPRUN_CHECK(n == slices.batch, "inputs disagree on the batch size: input '", first, "' has ",
                slices.batch, " rows but input '", names[i], "' has ", n);
  }
  DPRUN_CHECK(slices.batch >= 0, "no input is split, so there is no batch to share over ranks");
  slices.rows = compute_chunk_sizes(slices.batch, static_cast<size_t>(ranks), SplitPolicy::Even);
  int64_t start = 0;
  for (int64_t rows : slices.rows) {
    slices.starts.push_back(start);
    start += rows;
  }
  return slices;
}

std::vector<Tensor> chunk_inputs(const std::vector<Tensor>& inputs,
                                 const std::vector<std::string>& names,
                                 const DataParallelOptions& options, int64_t start, int64_t rows) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    int64_t d = split_dim(inputs[i], names[i], options);
    out.push_back(d < 0 ? inputs[i] : inputs[i].narrow(d, start, rows));
  }
  return out;
}

}  // namespace dprun::cli
