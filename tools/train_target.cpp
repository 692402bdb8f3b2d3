#include "tools/train_target.h"

#include <cstdint>
#include <fstream>
#include <regex>
#include <sstream>

namespace dprun::cli {

namespace {

// The header text of a .npy file: after the magic, the version and the header's length (2
// bytes in version 1, 4 in versions 2 and 3, little-endian).
std::optional<std::string> npy_header(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char lead[8];
  if (!in.read(lead, 8) || std::string(lead, 6) != "\x93NUMPY") return std::nullopt;
  const int length_bytes = lead[6] == 1 ? 2 : 4;
  unsigned char length[4] = {0, 0, 0, 0};
  if (!in.read(reinterpret_cast<char*>(length), length_bytes)) return std::nullopt;
  const uint32_t size = length[0] | length[1] << 8 | length[2] << 16 | uint32_t(length[3]) << 24;
  if (size > (1u << 20)) return std::nullopt;
  std::string header(size, '\0');
  if (!in.read(header.data(), size)) return std::nullopt;
  return header;
}

// The shape the target of `loss` has for an output of shape `output`: the output's, without
// the class dim for the class losses.
std::optional<SymbolicShape> target_shape(const LossSpec& loss, const SymbolicShape& output) {
  if (loss.kind != LossKind::CrossEntropy && loss.kind != LossKind::Nll) return output;
  const auto rank = static_cast<int64_t>(output.size());
  const int64_t c = loss.class_dim < 0 ? loss.class_dim + rank : loss.class_dim;
  if (c < 1 || c >= rank) return std::nullopt;  // the loss itself reports a bad class dim
  SymbolicShape target = output;
  target.erase(target.begin() + c);
  return target;
}

bool fits(const Shape& file, const SymbolicShape& wanted) {
  if (file.size() != wanted.size()) return false;
  for (size_t d = 1; d < file.size(); ++d)
    if (wanted[d].is_known() && wanted[d].value != file[d]) return false;
  return true;
}

// "hidden [batch, 64], logits [batch, 10]"
std::string outputs_with_shapes(const Graph& graph) {
  std::string listed;
  for (const ValueInfo& out : graph.outputs) {
    if (!listed.empty()) listed += ", ";
    listed += out.name;
    if (out.type.shape) listed += ' ' + shape_to_string(*out.type.shape);
  }
  return listed;
}

}  // namespace

std::optional<Shape> npy_file_shape(const std::string& path) {
  const std::optional<std::string> header = npy_header(path);
  std::smatch m;
  if (!header || !std::regex_search(*header, m, std::regex(R"('shape'\s*:\s*\(([^)]*)\))")))
    return std::nullopt;
  Shape shape;
  std::stringstream dims(m[1].str());
  for (std::string item; std::getline(dims, item, ',');) {
    if (item.find_first_not_of(' ') == std::string::npos) continue;
    try {
      shape.push_back(std::stoll(item));
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  return shape;
}

void check_target_fits(const Graph& graph, const LossSpec& loss, const std::string& target_path) {
  if (graph.outputs.empty() || !loss_needs_target(loss.kind)) return;
  const std::string output = loss.output.empty() ? graph.outputs.front().name : loss.output;
  const std::optional<TensorType> type = graph.type_of(output);
  const std::optional<Shape> file = npy_file_shape(target_path);
  if (!type || !type->shape || !file) return;
  const std::optional<SymbolicShape> wanted = target_shape(loss, *type->shape);
  if (!wanted || fits(*file, *wanted)) return;
  fail("--target ", target_path, " holds ", shape_to_string(*file), ", but --loss ",
       loss_kind_name(loss.kind), " on output '", output, "' ", shape_to_string(*type->shape),
       " needs targets of shape ", shape_to_string(*wanted), " (a row per sample); the model's ",
       "outputs: ", outputs_with_shapes(graph), ": name the one the loss reads with --output NAME");
}

}  // namespace dprun::cli
