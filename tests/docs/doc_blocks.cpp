#include "doc_blocks.h"

#include <regex>
#include <sstream>
#include <stdexcept>

namespace dprun::testing {

namespace {

std::string trim(const std::string& s) {
  const size_t first = s.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t") + 1 - first);
}

// Sets the block's marker from `line` when it is a docs-test marker.
void read_marker(const std::string& line, DocBlock& block) {
  static const std::regex marker(R"(^<!-- docs-test: ([a-z-]+)(.*)-->\s*$)");
  std::smatch m;
  if (!std::regex_match(line, m, marker)) return;
  block.marker = m[1].str();
  block.argument = trim(m[2].str());
}

}  // namespace

std::vector<DocBlock> extract_blocks(const std::string& markdown) {
  std::vector<DocBlock> blocks;
  std::istringstream in(markdown);
  std::string line, previous;
  DocBlock* open = nullptr;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (open != nullptr) {
      if (line.rfind("```", 0) == 0 && trim(line) == "```") {
        open = nullptr;
      } else {
        open->text += line + "\n";
      }
    } else if (line.rfind("```", 0) == 0) {
      DocBlock block;
      block.language = trim(line.substr(3));
      block.line = number;
      read_marker(previous, block);
      blocks.push_back(block);
      open = &blocks.back();
    } else if (trim(line).rfind("```", 0) == 0) {
      throw std::runtime_error("line " + std::to_string(number) +
                               ": an indented code fence, which the docs test cannot read");
    }
    previous = line;
  }
  if (open != nullptr)
    throw std::runtime_error("line " + std::to_string(open->line) + ": a code block never closed");
  return blocks;
}

std::vector<std::string> command_lines(const std::string& shell) {
  std::vector<std::string> commands;
  std::istringstream in(shell);
  std::string line, pending;
  while (std::getline(in, line)) {
    const bool continued = !line.empty() && line.back() == '\\';
    pending += continued ? line.substr(0, line.size() - 1) : line;
    if (continued) continue;
    const std::string command = trim(pending.substr(0, pending.find(" #")));
    if (!command.empty() && command[0] != '#') commands.push_back(command);
    pending.clear();
  }
  return commands;
}

}  // namespace dprun::testing
