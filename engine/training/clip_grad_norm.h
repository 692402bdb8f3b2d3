#pragma once
// Gradient clipping by norm, as PyTorch's torch.nn.utils.clip_grad_norm_ (1.13):
//
//   double norm = clip_grad_norm(trainer.gradients(), 1.0);  // before optimizer.step()
//
// The total norm is the norm of the per-tensor norms (the norm of all elements together). When
// it exceeds max_norm every gradient is multiplied, in place on its device, by
// max_norm / (total + 1e-6), computed in float32 as PyTorch computes it; otherwise nothing
// changes. In float16 training clip the unscaled gradients (Trainer does: TrainerOptions::
// max_grad_norm).
#include <limits>
#include <vector>

#include "engine/tensor.h"

namespace dprun {

/// The p-norm of `gradients` (norm_type 2, or infinity for the largest absolute value), after
/// scaling them down to max_norm when it is larger. Each tensor's norm is summed in double and
/// rounded to the gradients' dtype (float32 or float64), as torch.norm returns it, and so is the
/// total. A NaN or infinite total is returned as it is and, as in PyTorch, makes the gradients
/// NaN. Throws Error on a max_norm that is not positive, another norm_type, gradients of another
/// dtype or of two dtypes; with no gradients, returns 0.
double clip_grad_norm(const std::vector<Tensor>& gradients, double max_norm,
                      double norm_type = 2.0);

/// norm_type for the infinity norm.
inline constexpr double kInfinityNorm = std::numeric_limits<double>::infinity();

}  // namespace dprun
