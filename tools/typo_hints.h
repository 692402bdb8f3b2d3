#pragma once
// Suggestions for a mistyped word: the option, input or device the user likely meant.
#include <optional>
#include <string>
#include <vector>

namespace dprun::cli {

/// The number of single-character insertions, deletions, substitutions and swaps of two
/// neighbours that turn `a` into `b` (optimal string alignment distance).
size_t edit_distance(const std::string& a, const std::string& b);
/// The candidate closest to `word` by edit_distance, if it is close enough to be a likely typo
/// (at most 2 edits, and fewer than half of `word`'s characters); ties go to the first listed.
std::optional<std::string> nearest(const std::string& word,
                                   const std::vector<std::string>& candidates);
/// For a --devices item that does not parse, a device the user likely meant ("cude:0" ->
/// "cuda:0", "cpu:O" -> "cpu:0"), or nullopt when none is close.
std::optional<std::string> suggest_device(const std::string& item);

}  // namespace dprun::cli
