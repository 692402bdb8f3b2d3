#pragma once
// What the loss kernels (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss) on every device
// read from a node and check of their inputs, with one set of messages.
#include <cstdint>
#include <optional>
#include <string>

#include "engine/kernel.h"
#include "ops/common/reduce_common.h"

namespace dprun {

enum class Reduction { None, Sum, Mean };

/// The reduction and ignore_index attributes.
struct LossAttrs {
  Reduction reduction = Reduction::Mean;
  std::optional<int64_t> ignore_index;

  explicit LossAttrs(const Node& node) {
    std::string r = node.attr_string("reduction", "mean");
    if (r == "none")
      reduction = Reduction::None;
    else if (r == "sum")
      reduction = Reduction::Sum;
    else if (r == "mean")
      reduction = Reduction::Mean;
    else
      node.fail("reduction must be 'none', 'sum' or 'mean', got '", r, "'");
    if (node.has_attr("ignore_index")) ignore_index = node.attr_int("ignore_index");
  }
};

/// Validates the score/target/weight shapes; returns N, C and D (product of d1..dk).
inline void loss_dims(const KernelContext& ctx, const Tensor& x, const Tensor& target,
                      const Tensor* weight, int64_t& n, int64_t& c, int64_t& d) {
  if (x.rank() < 2) ctx.fail("scores must have rank >= 2, got ", shape_to_string(x.shape()));
  if (target.rank() != x.rank() - 1)
    ctx.fail("target rank must be the scores rank - 1: scores ", shape_to_string(x.shape()),
             ", target ", shape_to_string(target.shape()));
  if (target.dim(0) != x.dim(0))
    ctx.fail("target batch ", target.dim(0), " differs from scores batch ", x.dim(0));
  for (int64_t i = 1; i < target.rank(); ++i)
    if (target.dim(i) != x.dim(i + 1))
      ctx.fail("target shape ", shape_to_string(target.shape()), " does not match scores ",
               shape_to_string(x.shape()));
  n = x.dim(0);
  c = x.dim(1);
  d = dims_product(x.shape(), 2, x.rank());
  if (weight && (weight->rank() != 1 || weight->dim(0) != c))
    ctx.fail("weight must have shape [", c, "], got ", shape_to_string(weight->shape()));
  if (weight && weight->dtype() != x.dtype())
    ctx.fail("weight dtype ", dtype_name(weight->dtype()), " differs from scores dtype ",
             dtype_name(x.dtype()));
}

}  // namespace dprun
