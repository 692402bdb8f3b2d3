#pragma once
// The fenced code blocks of a Markdown file, with the docs test's marker for each.
//
// A block may be preceded, on the line right above its opening fence, by a marker
//   <!-- docs-test: KIND ARGUMENTS -->
// that tells the docs test how to treat it:
//   skip (REASON)            not run; the reason is required (the Quick start, which CI runs
//                            itself; commands that need PyTorch, a GPU or root and network)
//   help-only (REASON)       a long benchmark run: nothing is run, but every --option of each
//                            dprun command line must appear in `dprun COMMAND --help`, and
//                            every script it starts must be an executable file
//   losses-equal A.json B.json   run, then the "losses" of the two --json reports (A from an
//                            earlier block of the same file) must agree within 1e-6 relative
//   needs-mpi                run only in a build with MPI
//   needs-cuda-build         run only in a build with the CUDA backend
//   needs-torch              a ```python block run only where /usr/bin/python3 has PyTorch
//   needs-python-module      run only in a build with the Python module
#include <string>
#include <vector>

namespace dprun::testing {

struct DocBlock {
  std::string language;  // the fence's info string: sh, bash, cpp, python, cmake, "" ...
  std::string text;      // the lines between the fences, each ending in '\n'
  int line = 0;          // 1-based line of the opening fence
  std::string marker;    // the marker's KIND (empty when there is none)
  std::string argument;  // the rest of the marker, trimmed
};

/// The blocks of `markdown` in order. Fences are lines starting with ``` at column 0;
/// indented fences and unterminated blocks are errors (std::runtime_error naming the line),
/// so a block can never be silently left out.
std::vector<DocBlock> extract_blocks(const std::string& markdown);

/// The command lines of a shell block: backslash-continued lines joined, comments and blank
/// lines dropped.
std::vector<std::string> command_lines(const std::string& shell);

}  // namespace dprun::testing
