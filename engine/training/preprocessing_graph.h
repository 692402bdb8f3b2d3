#pragma once
// A served model that takes the stored samples directly: the layout and normalization of the
// training transforms (engine/training/input_transform.h) written as ONNX nodes in front of
// the model's inputs (`dprun train --save ... --embed-preprocessing`, `dprun convert`).
#include <map>
#include <string>

#include "engine/graph.h"
#include "engine/training/input_transform.h"

namespace dprun {

/// `graph` whose input NAME of each non-empty transform takes the stored rows (type
/// `stored_dtypes.at(NAME)`, HWC images with the transform's nhwc layout) through
///   Cast to float32 and Div by the type's maximum (integer types only),
///   Sub MEAN and Div STD (per channel, with a normalization),
///   Transpose to NCHW (with the nhwc layout),
/// each node named "preprocess.NAME.OP" and its constants initializers "preprocess.NAME.*", so
/// that the model gives what it gave on the training-time pipeline's samples, bit for bit.
/// Augmentations have no part in serving, but resized-crop changes the samples' size: Error
/// "--embed-preprocessing: input 'NAME' is augmented with resized-crop, whose evaluation
/// resize has no ONNX form here; serve with dprun run --normalize and --layout" for it, and
/// Error "--embed-preprocessing: 'NAME' is not an input of the model" for a transform of no
/// input.
Graph with_embedded_preprocessing(const Graph& graph,
                                  const std::map<std::string, InputTransform>& transforms,
                                  const std::map<std::string, DType>& stored_dtypes);

}  // namespace dprun
