#pragma once
// `dprun train`'s check that the --target file fits the output the loss reads, made when the
// run starts, against the model's declared output shape: a mismatch names the output and the
// model's other outputs (--output picks one), not the loss graph's internal 'target' input.
#include <optional>
#include <string>

#include "engine/autograd/loss.h"
#include "engine/graph.h"
#include "engine/shape.h"

namespace dprun::cli {

/// The shape in the header of the .npy file at `path`, without reading its data; nullopt when
/// the file cannot be read or is no .npy file (reading it later then says why).
std::optional<Shape> npy_file_shape(const std::string& path);

/// Throws Error when the target file `target_path` cannot be the target of `loss` on its
/// output of `graph`: a different rank than the output (without its class dim for
/// cross_entropy and nll), or a different size in a dim after the first (the rows) that the
/// output declares. Passes when either shape is unknown.
void check_target_fits(const Graph& graph, const LossSpec& loss, const std::string& target_path);

}  // namespace dprun::cli
