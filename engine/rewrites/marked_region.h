#pragma once
// The marked gradient regions of the rules whose whole backward a backend runs as one fused node
// (ops/recurrent/rnn_grad.cpp, ops/attention/attention_grad.cpp): the rule emits plain ONNX that
// any engine runs, and marks it so that the region is found without matching its nodes:
// - every node it emits is named <prefix><scope>/<op type>_<counter>, the scope the name of the
//   node it differentiates, the counter rising in emission order (GradientContext::emit);
// - its first nodes are one Identity per output gradient it receives, and every node of the
//   region reads those Identities, never the gradients themselves;
// - its last nodes are one Identity per input gradient it gives, then a Constant, the region's
//   table: int64 [magic, version, then flags the rule defines]. Nothing reads it.
// A rewrite accepts a region only when it is closed (region_is_closed): its nodes read only the
// values the differentiated node read, the received gradients and each other's results, and
// nothing outside it reads a value of it but the given gradients.
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "engine/rewrites/fusion_matcher.h"

namespace dprun {

/// The nodes of the region of the node named `scope`, in emission order, for the one prefix
/// whose last node is a table of `table_size` entries starting with `magic`; empty when there is
/// not exactly one such region.
std::vector<size_t> marked_region(const Graph& g, const std::string& scope, int64_t magic,
                                  size_t table_size);

/// The region's table (its last node's value); marked_region found it.
std::vector<int64_t> region_table(const Graph& g, const std::vector<size_t>& region);

/// True when node `n` is an Identity of one input and one output (a region's boundary mark).
bool is_region_mark(const Node& n);

/// True when the region's nodes are plain ai.onnx nodes reading only `reads` and each other's
/// results, and nothing outside it reads a value of it but those in `given`, which are no graph
/// results either unless given.
bool region_is_closed(const Matcher& m, const std::vector<size_t>& region,
                      const std::set<std::string>& reads, const std::set<std::string>& given);

}  // namespace dprun
