#pragma once
// Checks of training data when it is read, so that a bad value is named once, by its source
// (a file's path, or any name the caller gives) and row, before any step runs.
#include <cstdint>
#include <optional>
#include <string>

#include "engine/autograd/loss.h"
#include "engine/model.h"
#include "engine/tensor.h"

namespace dprun {

/// The labels a class loss (cross_entropy, nll) accepts: 0 .. classes - 1, and ignore_index.
struct ClassLabels {
  int64_t classes = 0;
  std::optional<int64_t> ignore_index;
  std::string output;  // the model output that scores them
};

/// The labels `loss` accepts on `model`: nullopt for a loss without class labels, or when the
/// output's class dim has no fixed size (the loss's kernel then checks each batch as it runs).
std::optional<ClassLabels> class_labels(const Model& model, const LossSpec& loss);

/// Throws Error "SOURCE: row R holds NaN: training needs finite numbers" (or inf, -inf) for
/// the lowest row R (index along `dim`, from 0, as numpy counts) that holds a value that is not
/// finite. Tensors that are not floating point pass, and so do tensors without dim `dim`.
/// `first_row` is the row of the data that t's row 0 is (a check over a file by parts).
void check_finite_rows(const Tensor& t, int64_t dim, const std::string& source,
                       int64_t first_row = 0);

/// Throws Error "SOURCE: row R holds class C, outside [0, N) of output 'O'" (with " and is
/// not the --ignore-index I" when there is one) for the first target row (dim 0) with a label
/// that is neither a class nor the ignore index. Only int64 targets are checked (the loss
/// refuses others, naming their dtype).
/// `first_row` as check_finite_rows'.
void check_class_labels(const Tensor& target, const ClassLabels& labels, const std::string& source,
                        int64_t first_row = 0);

}  // namespace dprun
