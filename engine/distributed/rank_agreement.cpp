#include "engine/distributed/rank_agreement.h"

#include <map>
#include <sstream>

#include "engine/distributed/rank_failure.h"

namespace dprun {

namespace {

// Field and record separators of the exchanged lists: characters no option, name or shape holds.
constexpr char kField = '\x1f', kRecord = '\x1e';

std::string key_of(const RankFact& fact) {
  return fact.topic + kField + fact.subject;
}

std::string serialize(const std::vector<RankFact>& facts) {
  std::string out;
  for (const RankFact& f : facts) out += f.topic + kField + f.subject + kField + f.value + kRecord;
  return out;
}

std::vector<RankFact> deserialize(const std::string& text) {
  std::vector<RankFact> facts;
  std::istringstream in(text);
  for (std::string record; std::getline(in, record, kRecord);) {
    RankFact f;
    std::istringstream fields(record);
    std::getline(fields, f.topic, kField);
    std::getline(fields, f.subject, kField);
    std::getline(fields, f.value, kField);
    facts.push_back(std::move(f));
  }
  return facts;
}

using ValueGroups = std::vector<std::pair<std::string, std::vector<int>>>;

// "ranks disagree on --batch: rank 0 has 8, rank 1 has 4", or with a subject
// "ranks disagree on the model: parameter 'w' is [2] on rank 0 and [3] on rank 1".
std::string describe(const std::string& topic, const std::string& subject,
                     const ValueGroups& groups) {
  std::ostringstream out;
  out << "ranks disagree on " << topic << ": ";
  if (subject.empty()) {
    for (size_t g = 0; g < groups.size(); ++g)
      out << (g ? ", " : "") << ranks_text(groups[g].second)
          << (groups[g].second.size() == 1 ? " has " : " have ") << groups[g].first;
    return out.str();
  }
  out << subject << " is ";
  for (size_t g = 0; g < groups.size(); ++g)
    out << (g == 0                   ? ""
            : g + 1 == groups.size() ? " and "
                                     : ", ")
        << groups[g].first << " on " << ranks_text(groups[g].second);
  return out.str();
}

}  // namespace

uint64_t facts_digest(const std::vector<RankFact>& facts) {
  uint64_t h = 1469598103934665603ull;
  for (char c : serialize(facts)) {
    h ^= static_cast<uint8_t>(c);
    h *= 1099511628211ull;
  }
  return h;
}

std::string rank_disagreement(const std::vector<std::vector<RankFact>>& facts) {
  // Every key, in rank 0's order, then those only later ranks have, in rank order.
  std::vector<std::pair<std::string, std::string>> keys;  // topic, subject
  std::vector<std::map<std::string, std::string>> values(facts.size());
  std::map<std::string, bool> seen;
  for (size_t r = 0; r < facts.size(); ++r)
    for (const RankFact& f : facts[r]) {
      const std::string key = key_of(f);
      values[r].emplace(key, f.value);
      if (!seen[key]) keys.push_back({f.topic, f.subject});
      seen[key] = true;
    }
  for (const auto& [topic, subject] : keys) {
    const std::string key = key_of({topic, subject, ""});
    std::vector<std::pair<int, std::string>> rank_values;
    for (size_t r = 0; r < values.size(); ++r) {
      auto it = values[r].find(key);
      rank_values.push_back({static_cast<int>(r), it == values[r].end() ? "missing" : it->second});
    }
    const ValueGroups groups = ranks_by_value(rank_values);
    if (groups.size() > 1) return describe(topic, subject, groups);
  }
  return "";
}

std::vector<RankFact> tensor_facts(const std::string& topic, const std::string& kind,
                                   const std::vector<std::string>& names,
                                   const std::vector<Tensor>& tensors) {
  DPRUN_CHECK(names.size() == tensors.size(), "tensor_facts: ", names.size(), " names for ",
              tensors.size(), " tensors");
  std::vector<RankFact> facts;
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string subject = kind + " '" + names[i] + "'";
    facts.push_back({topic, subject, shape_to_string(tensors[i].shape())});
    facts.push_back(
        {topic, "the dtype of " + subject, std::string(dtype_name(tensors[i].dtype()))});
  }
  return facts;
}

void check_ranks_agree(ProcessGroup& group, const std::vector<RankFact>& facts) {
  std::vector<uint64_t> digests = all_gather_values(group, facts_digest(facts));
  bool same = true;
  for (uint64_t d : digests) same = same && d == digests.front();
  if (same) return;
  // Every rank saw the digests differ, so every rank makes this exchange and finds the same
  // message from the same lists.
  std::vector<std::vector<RankFact>> all;
  for (const std::string& text : all_gather_strings(group, serialize(facts)))
    all.push_back(deserialize(text));
  const std::string message = rank_disagreement(all);
  if (!message.empty()) throw CollectiveError(message);
}

}  // namespace dprun
