#include "client/report/export.h"

#include <map>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/sha256.h"

namespace ptxbench::client::report {
namespace {

using json = nlohmann::json;
using row_json = nlohmann::ordered_json;

const ChatMessage* FirstWithRole(const std::vector<ChatMessage>& messages,
                                 const std::string& role) {
  for (const ChatMessage& m : messages) {
    if (m.role == role) return &m;
  }
  return nullptr;
}

std::string SourceHash(const TurnRecord& turn) {
  return turn.source_sha256.empty() ? Sha256Hex(turn.source) : turn.source_sha256;
}

std::string AssistantText(const TurnRecord& turn, AssistantContent content) {
  if (content == AssistantContent::kReply) return turn.reply;
  return absl::StrCat("```", turn.language.empty() ? "cuda" : turn.language, "\n", turn.source,
                      turn.source.empty() || turn.source.back() == '\n' ? "" : "\n", "```");
}

// A failed turn a repair can be learned from: a kernel was evaluated and found wrong for a
// reason of its own (not infrastructure, not cancelled, not compile-only or unverified).
bool IsKernelFailure(const TurnRecord& turn) {
  if (turn.infra_failed || !turn.extracted || !turn.verdict.has_value()) return false;
  if (turn.verdict->runtime_unverified) return false;
  switch (turn.verdict->verdict_class) {
    case VerdictClass::kPass:
    case VerdictClass::kCompiled:
    case VerdictClass::kInfrastructureFailure:
    case VerdictClass::kCancelled:
      return false;
    default:
      return true;
  }
}

class Builder {
 public:
  explicit Builder(const ExportOptions& options) : options_(options) {}

  void Add(const Trajectory& t) {
    ++trajectories_;
    std::vector<const TurnRecord*> charged;
    for (const TurnRecord& turn : t.turns) {
      if (turn.infra_failed) {
        ++infra_failed_turns_;
      } else {
        charged.push_back(&turn);
        if (turn.verdict.has_value() && turn.verdict->runtime_unverified) {
          ++runtime_unverified_turns_;
        }
      }
    }
    if (t.turns.empty()) return;
    // The first prompt holds the system message and the task as the model first saw them;
    // later prompts may fold history into the user message (context policies, docs/client.md).
    const ChatMessage* system = FirstWithRole(t.turns.front().prompt_messages, "system");
    const ChatMessage* task = FirstWithRole(t.turns.front().prompt_messages, "user");
    if (task == nullptr) {
      ++without_task_prompt_;
      return;
    }
    row_json prefix = row_json::array();
    if (system != nullptr) prefix.push_back({{"role", "system"}, {"content", system->content}});
    prefix.push_back({{"role", "user"}, {"content", task->content}});

    if (options_.format == ExportFormat::kKernelGen) {
      for (const TurnRecord* turn : charged) {
        if (!IsTic(*turn) || !turn->extracted) continue;
        row_json messages = prefix;
        messages.push_back(Assistant(*turn, 1));
        Emit(t, "pass", {SourceHash(*turn)}, std::move(messages), {turn->turn});
      }
      return;
    }
    for (size_t i = 0; i + 1 < charged.size(); ++i) {
      const TurnRecord& failed = *charged[i];
      const TurnRecord& repaired = *charged[i + 1];
      if (!IsKernelFailure(failed) || failed.feedback.empty()) continue;
      if (!IsTic(repaired) || !repaired.extracted) continue;
      row_json messages = prefix;
      messages.push_back(Assistant(failed, 0));
      messages.push_back({{"role", "user"}, {"content", failed.feedback}});
      messages.push_back(Assistant(repaired, 1));
      Emit(t, VerdictClassName(failed.verdict->verdict_class),
           {SourceHash(failed), SourceHash(repaired)}, std::move(messages),
           {failed.turn, repaired.turn});
    }
  }

  ExportResult Finish() && {
    ExportResult result;
    result.rows = std::move(rows_);
    json per_task = json::object();
    json per_class = json::object();
    for (const auto& [key, count] : counts_) {
      per_task[key.first][key.second] = count;
      per_class[key.second] = per_class.value(key.second, 0) + count;
    }
    result.summary = {
        {"format", options_.format == ExportFormat::kKernelGen ? "kernelgen" : "fixit"},
        {"trajectories", trajectories_},
        {"rows", result.rows.size()},
        {"max_per_class", options_.max_per_class},
        {"per_task", std::move(per_task)},
        {"per_class", std::move(per_class)},
        {"excluded",
         {{"duplicate", duplicates_},
          {"over_cap", over_cap_},
          {"infra_failed_turns", infra_failed_turns_},
          {"runtime_unverified_turns", runtime_unverified_turns_},
          {"trajectories_without_task_prompt", without_task_prompt_}}},
    };
    return result;
  }

 private:
  row_json Assistant(const TurnRecord& turn, int weight) const {
    return {{"role", "assistant"},
            {"content", AssistantText(turn, options_.content)},
            {"weight", weight}};
  }

  void Emit(const Trajectory& t, const std::string& failure_class,
            const std::vector<std::string>& hashes, row_json messages, std::vector<int> turns) {
    const RunConfig& run = t.header.run;
    // The same kernel (or the same failed/repaired pair) of the same task and arch, from
    // whichever trajectory, is one row: repeats would weigh it twice in training.
    if (!seen_.insert({run.task, run.arch, hashes}).second) {
      ++duplicates_;
      return;
    }
    int& count = counts_[{run.task, failure_class}];
    if (options_.max_per_class > 0 && count >= options_.max_per_class) {
      ++over_cap_;
      return;
    }
    ++count;
    row_json row = {{"messages", std::move(messages)}};
    if (options_.metadata) {
      row["metadata"] = {{"task", run.task},           {"arch", run.arch}, {"model", run.model},
                         {"knowledge", run.knowledge}, {"file", t.path},   {"turns", turns},
                         {"class", failure_class}};
    }
    rows_.push_back(std::move(row));
  }

  const ExportOptions& options_;
  std::vector<row_json> rows_;
  std::set<std::tuple<std::string, std::string, std::vector<std::string>>> seen_;
  std::map<std::pair<std::string, std::string>, int> counts_;  // (task, class) -> rows.
  int trajectories_ = 0;
  int duplicates_ = 0;
  int over_cap_ = 0;
  int infra_failed_turns_ = 0;
  int runtime_unverified_turns_ = 0;
  int without_task_prompt_ = 0;
};

}  // namespace

absl::StatusOr<ExportFormat> ParseExportFormat(const std::string& name) {
  if (name == "kernelgen") return ExportFormat::kKernelGen;
  if (name == "fixit") return ExportFormat::kFixit;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown export format '", name, "' (kernelgen or fixit)"));
}

absl::StatusOr<AssistantContent> ParseAssistantContent(const std::string& name) {
  if (name == "reply") return AssistantContent::kReply;
  if (name == "source") return AssistantContent::kSource;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown assistant content '", name, "' (reply or source)"));
}

ExportResult BuildExport(const std::vector<Trajectory>& trajectories,
                         const ExportOptions& options) {
  Builder builder(options);
  for (const Trajectory& t : trajectories) builder.Add(t);
  return std::move(builder).Finish();
}

std::string RenderExportSummary(const json& summary) {
  std::ostringstream out;
  out << absl::StrFormat("%s: %d rows from %d trajectories\n",
                         summary.value("format", std::string()), summary.value("rows", 0),
                         summary.value("trajectories", 0));
  out << absl::StrFormat("  %-32s %-22s %s\n", "task", "class", "rows");
  for (const auto& [task, classes] : summary["per_task"].items()) {
    for (const auto& [failure_class, count] : classes.items()) {
      out << absl::StrFormat("  %-32s %-22s %d\n", task, failure_class, count.get<int>());
    }
  }
  const json& excluded = summary["excluded"];
  out << absl::StrFormat(
      "excluded: %d duplicates, %d over the per-class cap, %d infrastructure-failed turns, "
      "%d runtime-unverified turns\n",
      excluded.value("duplicate", 0), excluded.value("over_cap", 0),
      excluded.value("infra_failed_turns", 0), excluded.value("runtime_unverified_turns", 0));
  return out.str();
}

}  // namespace ptxbench::client::report
