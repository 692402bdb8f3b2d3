#pragma once
// Agreeing before the first step: every rank of a distributed job must be given the same
// options, model and data shapes, or the job trains on the wrong rows, sums mismatched buffers
// (an MPI abort with no word of why) or finds out only after the last step. Each rank lists
// what it was given as facts; the ranks compare one digest of their lists, and only when the
// digests differ exchange the lists themselves to name the first fact they disagree on.
#include <string>
#include <vector>

#include "engine/distributed/process_group.h"

namespace dprun {

/// One thing every rank must hold alike.
struct RankFact {
  /// What the ranks must agree on: an option ("--batch") or a whole ("the model").
  std::string topic;
  /// The part of the topic this fact is about ("parameter 'fc.weight'"); empty for a topic of
  /// one value, such as an option.
  std::string subject;
  /// Its value on this rank, as the message shows it ("8", "[10, 64]").
  std::string value;
};

/// Collective: returns when every rank passed the same facts (compared by topic and subject,
/// in any order); otherwise throws the same CollectiveError on every rank naming the first fact
/// (in rank 0's order) that differs, with every rank's value, ranks of one value together:
///   "ranks disagree on --batch: rank 0 has 8, rank 1 has 4"
///   "ranks disagree on the model: parameter 'fc.weight' is [10, 64] on rank 0 and [10, 32] on
///    rank 1"
/// A fact a rank lacks has the value "missing". Exchanges one 64-bit digest per rank; the facts
/// themselves only when the digests differ.
void check_ranks_agree(ProcessGroup& group, const std::vector<RankFact>& facts);

/// Facts of tensors every rank must hold alike, under `topic`: per tensor, "KIND 'NAME'" with
/// its shape ("[10, 64]") and "the dtype of KIND 'NAME'" with its dtype ("float32").
std::vector<RankFact> tensor_facts(const std::string& topic, const std::string& kind,
                                   const std::vector<std::string>& names,
                                   const std::vector<Tensor>& tensors);

/// The message check_ranks_agree throws for `facts` (per rank, in rank order), or "" when every
/// rank holds the same facts.
std::string rank_disagreement(const std::vector<std::vector<RankFact>>& facts);

/// The 64-bit digest check_ranks_agree compares (FNV-1a of every topic, subject and value).
uint64_t facts_digest(const std::vector<RankFact>& facts);

}  // namespace dprun
