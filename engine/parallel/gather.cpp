#include "engine/parallel/gather.h"

#include "engine/warning.h"

namespace dprun {

namespace {
void warn_scalars_once() {
  warn_once("gather.scalars",
            "was asked to gather along dimension 0, but all input tensors were scalars; will "
            "instead unsqueeze and return a vector");
}
}  // namespace

std::vector<Tensor> gather(const std::vector<std::vector<Tensor>>& outputs, Device output_device,
                           int64_t dim) {
  DPRUN_CHECK(!outputs.empty(), "gather: no replica outputs");
  size_t count = outputs[0].size();
  for (size_t r = 1; r < outputs.size(); ++r)
    DPRUN_CHECK(outputs[r].size() == count, "gather: replica ", r, " returned ", outputs[r].size(),
                " outputs, replica 0 returned ", count);
  std::vector<Tensor> gathered;
  for (size_t o = 0; o < count; ++o) {
    std::vector<Tensor> parts;
    bool all_scalars = true;
    for (const auto& replica : outputs) {
      parts.push_back(replica[o]);
      all_scalars = all_scalars && replica[o].rank() == 0;
    }
    if (all_scalars) {
      warn_scalars_once();
      for (Tensor& p : parts) p = p.reshape({1});
      gathered.push_back(concat(parts, 0, output_device));
      continue;
    }
    const Tensor& first = parts[0];
    int64_t d = dim < 0 ? dim + first.rank() : dim;
    DPRUN_CHECK(d >= 0 && d < first.rank(), "gather: dim ", dim, " is out of range for output ", o,
                " of shape ", shape_to_string(first.shape()));
    for (size_t r = 1; r < parts.size(); ++r) {
      bool same = parts[r].rank() == first.rank() && parts[r].dtype() == first.dtype();
      for (int64_t k = 0; same && k < first.rank(); ++k)
        same = k == d || parts[r].shape()[k] == first.shape()[k];
      if (!same)
        fail("gather: output ", o, " of replica ", r, " is ", parts[r].describe(),
             " but replica 0 gave ", first.describe(), "; they must agree outside dim ", d);
    }
    gathered.push_back(parts.size() == 1 ? first.to(output_device)
                                         : concat(parts, d, output_device));
  }
  return gathered;
}

}  // namespace dprun
