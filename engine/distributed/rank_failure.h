#pragma once
// Agreeing on failures: a rank that fails must not leave the others waiting in a collective.
// At agreed points (after each training step, after setting up), every rank reports whether it
// failed; when one did, every rank raises the same RankFailure, naming the failing ranks and
// their messages, with no collective left pending, so the job ends cleanly and at once.
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "engine/distributed/process_group.h"

namespace dprun {

/// An error raised by every rank together, from data every rank holds (an exchange's result),
/// so no rank is left waiting: the job can end without aborting.
class CollectiveError : public Error {
 public:
  using Error::Error;
};

/// The CollectiveError of failed ranks. what() names each failing rank and its message,
/// "rank 1: input 'x' ...", with ranks that failed alike listed together, "ranks 0, 1: ...",
/// and different failures joined by "; ".
class RankFailure : public CollectiveError {
 public:
  RankFailure(const std::string& message, std::vector<int> ranks)
      : CollectiveError(message), ranks_(std::move(ranks)) {}
  const std::vector<int>& ranks() const { return ranks_; }

 private:
  std::vector<int> ranks_;
};

/// "rank 1" or "ranks 0, 2": how messages about ranks list them.
std::string ranks_text(const std::vector<int>& ranks);

/// The distinct values of `rank_values` (rank, value) in order of their first rank, each with
/// the ranks that hold it: what messages list together ("ranks 0, 2: ...").
std::vector<std::pair<std::string, std::vector<int>>> ranks_by_value(
    const std::vector<std::pair<int, std::string>>& rank_values);

/// Collective: every rank passes its own error (nullptr when it succeeded). Returns when no
/// rank failed; otherwise throws the same RankFailure on every rank.
void throw_if_any_rank_failed(ProcessGroup& group, const std::exception_ptr& local_error);

/// The same when every rank already knows which ranks failed (`failed`, one flag per rank,
/// identical on every rank, from an exchange of its own): only the messages are exchanged, and
/// only when one failed.
void throw_rank_failures(ProcessGroup& group, const std::vector<bool>& failed,
                         const std::exception_ptr& local_error);

}  // namespace dprun
