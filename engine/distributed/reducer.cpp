#include "engine/distributed/reducer.h"

#include <cstring>

#include "engine/distributed/bucket_cast.h"

namespace dprun {

Reducer::Reducer(std::shared_ptr<ProcessGroup> group, std::vector<GradientLayout> gradients,
                 const std::vector<size_t>& ready_order, ReducerOptions options)
    : group_(std::move(group)), options_(options) {
  DPRUN_CHECK(group_ != nullptr, "Reducer: no process group given");
  DPRUN_CHECK(options_.wire_dtype == DType::Float32 || is_16bit_float(options_.wire_dtype),
              "Reducer: gradients can be sent as float16 or bfloat16, not ",
              dtype_name(options_.wire_dtype));
  size_t n = gradients.size();
  DPRUN_CHECK(ready_order.size() == n, "Reducer: ready_order lists ", ready_order.size(),
              " gradients for ", n);
  std::vector<bool> seen(n);
  for (size_t i : ready_order) {
    DPRUN_CHECK(i < n && !seen[i], "Reducer: ready_order is not a permutation of 0..", n - 1);
    seen[i] = true;
  }
  // Lay out the buckets: (first gradient, count) runs of ready_order.
  struct Span {
    DType dtype;
    std::vector<size_t> members;
    int64_t elements = 0;
  };
  std::vector<Span> spans;
  for (size_t i : ready_order) {
    const GradientLayout& g = gradients[i];
    DPRUN_CHECK(g.dtype == DType::Float32 || g.dtype == DType::Float64, "Reducer: gradient ", i,
                " is ", dtype_name(g.dtype),
                "; only float32 and float64 gradients can be all-reduced");
    int64_t count = shape_numel(g.shape);
    size_t bytes = static_cast<size_t>(count) * dtype_size(g.dtype);
    bool fits = !spans.empty() && spans.back().dtype == g.dtype &&
                static_cast<size_t>(spans.back().elements) * dtype_size(g.dtype) + bytes <=
                    options_.bucket_bytes;
    if (!fits) spans.push_back({g.dtype, {}, 0});
    spans.back().members.push_back(i);
    spans.back().elements += count;
  }
  views_.resize(n);
  staged_views_.resize(n);
  offsets_.resize(n);
  bucket_of_.resize(n);
  ready_.assign(n, false);
  const Device home = group_->reduce_device();
  for (const Span& s : spans) {
    Bucket b;
    b.flat = Tensor::zeros({s.elements}, s.dtype, home);
    b.members = s.members.size();
    b.compressed = s.dtype == DType::Float32 && options_.wire_dtype != DType::Float32;
    bytes_ +=
        s.elements * static_cast<int64_t>(dtype_size(b.compressed ? options_.wire_dtype : s.dtype));
    int64_t offset = 0;
    for (size_t i : s.members) {
      int64_t count = shape_numel(gradients[i].shape);
      views_[i] = b.flat.narrow(0, offset, count).reshape(gradients[i].shape);
      offsets_[i] = offset;
      bucket_of_[i] = buckets_.size();
      offset += count;
    }
    buckets_.push_back(std::move(b));
  }
  results_ = views_;
}

void Reducer::begin_step() {
  for (const Bucket& b : buckets_)
    DPRUN_CHECK(!b.work || b.done, "Reducer: the previous step's all-reduces were not waited for");
  for (Bucket& b : buckets_) {
    b.pending = b.members;
    b.work.reset();
    b.done = false;
    b.gathering = false;
  }
  ready_.assign(ready_.size(), false);
  next_ = 0;
}

void Reducer::mark_ready(size_t i, const Tensor& gradient) {
  DPRUN_CHECK(i < views_.size(), "Reducer: no gradient ", i);
  if (ready_[i]) return;
  target_of(i, gradient.device()).copy_from(gradient);
  ready_[i] = true;
  --buckets_[bucket_of_[i]].pending;
  start_complete_buckets();
}

Tensor& Reducer::target_of(size_t i, Device device) {
  Bucket& b = buckets_[bucket_of_[i]];
  if (!b.gathering) {
    b.device = device.type == DeviceType::CPU ? Device::cpu() : device;
    b.gathering = true;
  }
  // A device group sums the bucket where it is; a host group sums host memory.
  if (b.flat.device().type != DeviceType::CPU || b.device.type == DeviceType::CPU) return views_[i];
  if (!b.staged.defined() || b.staged.device() != b.device) {
    b.staged = Tensor::empty(b.flat.shape(), b.flat.dtype(), b.device);
    for (size_t k = 0; k < bucket_of_.size(); ++k)
      if (bucket_of_[k] == bucket_of_[i])
        staged_views_[k] =
            b.staged.narrow(0, offsets_[k], views_[k].numel()).reshape(views_[k].shape());
  }
  return staged_views_[i];
}

void Reducer::start_complete_buckets() {
  while (next_ < buckets_.size() && buckets_[next_].pending == 0) {
    Bucket& b = buckets_[next_++];
    if (b.staged_this_step()) b.flat.copy_from(b.staged);
    if (b.compressed) b.wire = cast_bucket(b.flat, options_.wire_dtype);
    b.work = group_->all_reduce_sum(b.compressed ? b.wire : b.flat, options_.order);
  }
}

void Reducer::progress() {
  for (size_t k = 0; k < next_; ++k)
    if (!buckets_[k].done) buckets_[k].done = buckets_[k].work->test();
}

void Reducer::finish_marking() {
  for (size_t i = 0; i < views_.size(); ++i) {
    if (ready_[i]) continue;
    Tensor& target = target_of(
        i, buckets_[bucket_of_[i]].gathering ? buckets_[bucket_of_[i]].device : Device::cpu());
    if (target.device().type == DeviceType::CPU)
      std::memset(target.raw_data(), 0, target.nbytes());
    else
      target.copy_from(Tensor::zeros(target.shape(), target.dtype()));
    ready_[i] = true;
    --buckets_[bucket_of_[i]].pending;
  }
  start_complete_buckets();
}

void Reducer::wait() {
  DPRUN_CHECK(next_ == buckets_.size(), "Reducer: wait() before every bucket was started");
  for (size_t k = 0; k < buckets_.size(); ++k) {
    Bucket& b = buckets_[k];
    DPRUN_CHECK(b.work != nullptr, "Reducer: bucket ", k, " was never started");
    if (!b.done) b.work->wait();
    b.done = true;
    if (b.compressed) {
      b.flat.copy_from(cast_bucket(b.wire, b.flat.dtype()));
      b.wire = Tensor();
    }
  }
  for (size_t i = 0; i < views_.size(); ++i) {
    const Bucket& b = buckets_[bucket_of_[i]];
    results_[i] = b.staged_this_step() ? staged_views_[i] : views_[i];
  }
  for (Bucket& b : buckets_)
    if (b.staged_this_step()) b.staged.copy_from(b.flat);
}

}  // namespace dprun
