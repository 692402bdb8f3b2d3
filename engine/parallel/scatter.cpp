#include "engine/parallel/scatter.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace dprun {

SplitPolicy parse_split_policy(const std::string& text) {
  if (text == "chunk") return SplitPolicy::Chunk;
  if (text == "even") return SplitPolicy::Even;
  if (text == "weighted") return SplitPolicy::Weighted;
  fail("unknown split policy '", text, "' (expected chunk, even or weighted)");
}

std::vector<int64_t> compute_chunk_sizes(int64_t n, size_t k, SplitPolicy policy,
                                         const std::vector<double>& weights) {
  DPRUN_CHECK(k > 0, "cannot split over zero devices");
  DPRUN_CHECK(n >= 0, "cannot split a negative size");
  std::vector<int64_t> sizes;
  auto devices = static_cast<int64_t>(k);
  switch (policy) {
    case SplitPolicy::Chunk: {
      if (n == 0) return {0};
      int64_t chunk = (n + devices - 1) / devices;
      for (int64_t start = 0; start < n; start += chunk)
        sizes.push_back(std::min(chunk, n - start));
      return sizes;
    }
    case SplitPolicy::Even:
      for (int64_t i = 0; i < devices; ++i)
        sizes.push_back(n / devices + (i < n % devices ? 1 : 0));
      return sizes;
    case SplitPolicy::Weighted: {
      DPRUN_CHECK(weights.size() == k, "weighted split needs one weight per device: got ",
                  weights.size(), " weights for ", k, " devices");
      double total = 0;
      for (double w : weights) {
        DPRUN_CHECK(std::isfinite(w) && w > 0, "device weights must be positive, got ", w);
        total += w;
      }
      // Largest-remainder rounding: floor shares, then hand out what is left by remainder.
      std::vector<double> exact;
      int64_t assigned = 0;
      for (double w : weights) {
        exact.push_back(static_cast<double>(n) * w / total);
        sizes.push_back(static_cast<int64_t>(std::floor(exact.back())));
        assigned += sizes.back();
      }
      std::vector<size_t> order(k);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return exact[a] - static_cast<double>(sizes[a]) > exact[b] - static_cast<double>(sizes[b]);
      });
      for (size_t i = 0; assigned < n; ++i, ++assigned) ++sizes[order[i % k]];
      return sizes;
    }
  }
  return sizes;
}

namespace {

// A 0-d floating tensor times `factor`, on the host.
Tensor scaled_scalar(const Tensor& t, double factor) {
  Tensor host = t.to(Device::cpu(), true);
  if (host.dtype() == DType::Float64)
    return Tensor::scalar<double>(host.data<double>()[0] * factor);
  DPRUN_CHECK(host.dtype() == DType::Float32,
              "scatter: a row share must be float32 or float64, not ", host.describe());
  return Tensor::scalar<float>(static_cast<float>(host.data<float>()[0] * factor));
}

/// Each chunk's share of what `rule` shares: its rows of the n, or (share_of_counted) its
/// elements of the counted input that are not `rule.uncounted`, of all such elements. n > 0.
std::vector<double> chunk_shares(const InputSplit& rule, const std::vector<Tensor>& inputs,
                                 const std::vector<int64_t>& split_dim,
                                 const std::vector<std::string>& names,
                                 const std::vector<int64_t>& sizes, int64_t n) {
  std::vector<double> shares;
  if (rule.counted_input.empty()) {
    for (int64_t rows : sizes) shares.push_back(static_cast<double>(rows) / static_cast<double>(n));
    return shares;
  }
  auto it = std::find(names.begin(), names.end(), rule.counted_input);
  DPRUN_CHECK(it != names.end(), "scatter: the counted input '", rule.counted_input,
              "' is not an input");
  const auto i = static_cast<size_t>(it - names.begin());
  DPRUN_CHECK(split_dim[i] >= 0 && inputs[i].dtype() == DType::Int64,
              "scatter: the counted input '", rule.counted_input,
              "' must be an int64 input split across the replicas, not ", inputs[i].describe());
  const Tensor host = inputs[i].to(Device::cpu(), true);
  std::vector<int64_t> counts;
  int64_t start = 0;
  for (int64_t rows : sizes) {
    const Tensor chunk = host.narrow(split_dim[i], start, rows);
    const int64_t* v = chunk.data<int64_t>();
    counts.push_back(
        std::count_if(v, v + chunk.numel(), [&](int64_t x) { return x != rule.uncounted; }));
    start += rows;
  }
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  for (int64_t c : counts)
    shares.push_back(total == 0 ? 0.0 : static_cast<double>(c) / static_cast<double>(total));
  return shares;
}

}  // namespace

std::optional<int64_t> split_dim_of(const Tensor& input, const InputSplit& rule, int64_t dim,
                                    const std::string& name) {
  if (rule.broadcast || rule.row_share || input.rank() == 0) return std::nullopt;
  const int64_t d = rule.dim.value_or(dim);
  DPRUN_CHECK(d >= -input.rank() && d < input.rank(), "dim ", d, " is out of range for ", name,
              " of shape ", shape_to_string(input.shape()));
  return d < 0 ? d + input.rank() : d;
}

ScatterResult scatter(const std::vector<Tensor>& inputs, const std::vector<Device>& devices,
                      const ScatterOptions& options) {
  const auto& [dim, chunk_sizes, policy, weights, splits, names] = options;
  DPRUN_CHECK(!devices.empty(), "scatter: no devices given");
  DPRUN_CHECK(splits.empty() || splits.size() == inputs.size(), "scatter: ", splits.size(),
              " split rules for ", inputs.size(), " inputs");
  auto name_of = [&](size_t i) {
    return i < names.size() ? "'" + names[i] + "'" : "input " + std::to_string(i);
  };

  // Resolve each input's split dim (or -1 for broadcast) and the common split size.
  std::vector<int64_t> split_dim(inputs.size(), -1);
  int64_t n = -1;
  size_t first_split = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    InputSplit rule = splits.empty() ? InputSplit{} : splits[i];
    if (rule.row_share)
      DPRUN_CHECK(t.rank() == 0 && is_floating(t.dtype()), "scatter: ", name_of(i),
                  " takes each replica's share of the rows, so it must be a 0-d float, not ",
                  t.describe());
    std::optional<int64_t> d;
    try {
      d = split_dim_of(t, rule, dim, name_of(i));
    } catch (const Error& e) {
      fail("scatter: ", e.what());
    }
    if (!d) continue;
    split_dim[i] = *d;
    int64_t size = t.shape()[static_cast<size_t>(split_dim[i])];
    if (n < 0) {
      n = size;
      first_split = i;
    } else if (size != n) {
      fail("scatter: inputs disagree on the split size: ", name_of(first_split), " has ", n,
           " rows along its split dim but ", name_of(i), " has ", size);
    }
  }

  std::vector<int64_t> sizes;
  if (!chunk_sizes.empty()) {
    DPRUN_CHECK(chunk_sizes.size() == devices.size(), "scatter: ", chunk_sizes.size(),
                " chunk sizes for ", devices.size(), " devices");
    int64_t total = 0;
    for (int64_t s : chunk_sizes) {
      DPRUN_CHECK(s >= 0, "scatter: negative chunk size ", s);
      total += s;
    }
    DPRUN_CHECK(n < 0 || total == n, "scatter: chunk sizes sum to ", total,
                " but the split dim has ", n, " rows");
    sizes = chunk_sizes;
  } else if (n < 0) {
    sizes.assign(1, 0);  // nothing to split: one replica gets the broadcast inputs
  } else {
    sizes = compute_chunk_sizes(n, devices.size(), policy, weights);
  }

  // Per input with a share rule, each chunk's share.
  std::vector<std::vector<double>> shares(inputs.size());
  for (size_t i = 0; i < splits.size(); ++i)
    if (splits[i].row_share && n > 0)
      shares[i] = chunk_shares(splits[i], inputs, split_dim, names, sizes, n);

  ScatterResult result;
  int64_t start = 0;
  for (size_t c = 0; c < sizes.size(); ++c) {
    if (sizes[c] == 0 && !(n < 0 && c == 0)) continue;
    result.devices.push_back(devices[c]);
    result.rows.push_back(sizes[c]);
    std::vector<Tensor> chunk;
    for (size_t i = 0; i < inputs.size(); ++i) {
      Tensor part = split_dim[i] < 0 ? inputs[i] : inputs[i].narrow(split_dim[i], start, sizes[c]);
      if (!shares[i].empty()) part = scaled_scalar(part, shares[i][c]);
      // CPU devices share the host's memory: another CPU device reads the chunk where it is.
      const bool shared =
          part.device().type == DeviceType::CPU && devices[c].type == DeviceType::CPU;
      chunk.push_back(shared ? part.alias_on(devices[c]) : part.to(devices[c]));
    }
    result.inputs.push_back(std::move(chunk));
    start += sizes[c];
  }
  if (result.devices.empty()) {  // n == 0: run one empty chunk so outputs keep their shapes
    result.devices.push_back(devices[0]);
    result.rows.push_back(0);
    result.inputs.push_back(inputs);
  }
  return result;
}

}  // namespace dprun
