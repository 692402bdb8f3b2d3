#pragma once
// The inference (serving) form of a model exported for training: what PyTorch's `model.eval()`
// runs. `dprun train --save` writes it, validation runs it, and `dprun run` warns when it is
// given a graph that is not in it.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/graph.h"

namespace dprun {

/// True when `node` is a BatchNormalization that normalizes with the batch's own statistics:
/// training_mode=1 from opset 14; before it, a node naming more than one output (opsets 1-13
/// list the running and saved statistics as training outputs).
bool batch_norm_in_training_mode(const Node& node, int64_t opset);

/// True when `node` is a Dropout that drops elements when run: opset 12 on, a training_mode
/// input (a training export makes it a constant true). Before opset 12 Dropout always passes
/// its input through in dprun, as in every ONNX engine.
bool dropout_may_train(const Node& node, int64_t opset);

/// The nodes of `graph` (names, as "[Op] node 'name'") whose output depends on the batch they
/// run with or on chance: training-mode BatchNormalization and Dropout with a training_mode
/// input. Empty for a graph in inference form.
std::vector<std::string> training_mode_nodes(const Graph& graph);

/// `forward` as it runs for evaluation and serving:
/// - BatchNormalization in training mode becomes inference mode with its running statistics
///   (the initializers, which training updated) and one output. A reader of the updated
///   running mean or variance reads the running statistic itself, which is what inference
///   mode would output; a reader of the saved batch statistics is refused (Error naming it).
/// - Dropout becomes Identity (with a mask output that something reads: a Dropout without its
///   training_mode input, which outputs an all-true mask).
/// - Graph outputs that only training produces (statistics, masks) are dropped, the in-place
///   state updates cleared, and nodes and initializers nothing then needs removed (the
///   constants that switched training on). Inputs and the other outputs are kept.
Graph inference_graph(const Graph& forward);

}  // namespace dprun
