#pragma once
// One stored sample through its input's transform (engine/training/input_transform.h): a
// pure function of the sample's bytes, the transform, the run's seed, the epoch and the
// sample's index in its file, so that any thread may transform any batch's samples in any
// order and get the same values.
#include <cstdint>

#include "engine/dtype.h"
#include "engine/shape.h"
#include "engine/tensor.h"
#include "engine/training/input_transform.h"

namespace dprun {

/// Where a sample's random draws come from: its key (engine/training/sample_random.h), and
/// whether it is a validation sample (no random augmentation; resized-crop becomes the
/// resize to SIZE*256/224 and the centre crop).
struct SampleKey {
  uint64_t seed = 0;
  int64_t epoch = 0;
  int64_t index = 0;  // the sample's row in its file
  bool evaluation = false;
};

/// Writes the float32 sample of `row` (a stored row of shape `stored` and type `dtype`) to
/// `out`, which holds numel(transformed_sample_shape(...)) floats: layout to CHW, integers
/// to [0, 1], the augmentations in order, then the normalization. The transform must have
/// passed transformed_sample_shape for this shape and type.
void transform_sample(const InputTransform& transform, const void* row, DType dtype,
                      const Shape& stored, const SampleKey& key, float* out);

/// Every row (along dim 0) of `stored`, input `name`'s, through `transform` in its evaluation
/// form, as `dprun run` feeds a file: float32 [rows, transformed sample shape]. Throws
/// transformed_sample_shape's errors, and Error "input 'NAME' is a 0-d tensor; transforms take
/// rows" for a 0-d one.
Tensor transform_all_rows(const std::string& name, const InputTransform& transform,
                          const Tensor& stored);

}  // namespace dprun
