#include "client/report/export.h"

#include <map>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/sha256.h"
#include "proto/wire_names.h"

namespace ptxbench::client::report {
namespace {

using json = nlohmann::json;
using row_json = nlohmann::ordered_json;

// One message of a row; `trained` marks the message the loss falls on (the last assistant
// message; never a system or user message).
struct Message {
  std::string role;
  std::string content;
  bool trained = false;
};

const ChatMessage* FirstWithRole(const std::vector<ChatMessage>& messages,
                                 const std::string& role) {
  for (const ChatMessage& m : messages) {
    if (m.role == role) return &m;
  }
  return nullptr;
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

// A kernel that did not compile (compile error, or a plan the compile stage refused).
bool IsCompileFailure(const TurnRecord& turn) {
  if (turn.infra_failed || !turn.extracted || !turn.verdict.has_value()) return false;
  const VerdictClass c = turn.verdict->verdict_class;
  return !turn.verdict->compiled && c != VerdictClass::kInfrastructureFailure &&
         c != VerdictClass::kCancelled;
}

row_json Plain(const Message& m) { return {{"role", m.role}, {"content", m.content}}; }

// The row in the layout's shape, each with the loss mask its trainer reads (export.h).
row_json RowInLayout(const std::vector<Message>& messages, ExportLayout layout) {
  switch (layout) {
    case ExportLayout::kOpenAi: {
      row_json out = row_json::array();
      for (const Message& m : messages) {
        row_json message = Plain(m);
        if (m.role == "assistant") message["weight"] = m.trained ? 1 : 0;
        out.push_back(std::move(message));
      }
      return {{"messages", std::move(out)}};
    }
    case ExportLayout::kAxolotl: {
      row_json out = row_json::array();
      for (const Message& m : messages) {
        row_json message = Plain(m);
        message["train"] = m.trained;
        out.push_back(std::move(message));
      }
      return {{"messages", std::move(out)}};
    }
    case ExportLayout::kTrl: {
      row_json prompt = row_json::array();
      for (size_t i = 0; i + 1 < messages.size(); ++i) prompt.push_back(Plain(messages[i]));
      return {{"prompt", std::move(prompt)},
              {"completion", row_json::array({Plain(messages.back())})}};
    }
    case ExportLayout::kLlamaFactory: {
      row_json row = row_json::object();
      row_json conversations = row_json::array();
      for (const Message& m : messages) {
        if (m.role == "system") {
          row["system"] = m.content;
          continue;
        }
        conversations.push_back(
            {{"from", m.role == "assistant" ? "gpt" : "human"}, {"value", m.content}});
      }
      row["conversations"] = std::move(conversations);
      return row;
    }
  }
  return {};
}

class Builder {
 public:
  explicit Builder(const ExportOptions& options) : options_(options) {}

  void Add(const Trajectory& stored) {
    ++trajectories_;
    const Trajectory t = WithCurrentVerdicts(stored);
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
    if (options_.format == ExportFormat::kKernelGen) {
      AddKernelGen(t, charged);
    } else {
      AddFixit(t, charged);
    }
  }

  ExportResult Finish() && {
    ExportResult result;
    result.rows = std::move(rows_);
    json left_out = json::array();
    // Every kind, 0 included, so that a script reads each count without checking for it.
    json by_reason = json::object();
    for (LeftOutKind kind :
         {LeftOutKind::kNotTicNow, LeftOutKind::kHarnessEngine, LeftOutKind::kTaskContent,
          LeftOutKind::kHacked, LeftOutKind::kNoCurrentVerdict}) {
      by_reason[LeftOutKindName(kind)] = 0;
    }
    for (const LeftOutTurn& turn : left_out_) {
      left_out.push_back({{"file", turn.file},
                          {"turn", turn.turn},
                          {"submission_id", turn.submission_id},
                          {"kind", LeftOutKindName(turn.kind)},
                          {"reason", turn.reason}});
      by_reason[LeftOutKindName(turn.kind)] = by_reason[LeftOutKindName(turn.kind)].get<int>() + 1;
    }
    json per_task = json::object();
    json per_class = json::object();
    for (const auto& [key, count] : counts_) {
      per_task[key.first][key.second] = count;
      per_class[key.second] = per_class.value(key.second, 0) + count;
    }
    result.summary = {
        {"format", options_.format == ExportFormat::kKernelGen ? "kernelgen" : "fixit"},
        {"layout", ExportLayoutName(options_.layout)},
        {"compile_repairs", options_.compile_repairs},
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
          {"trajectories_without_task_prompt", without_task_prompt_},
          {"pairs_without_prompt", pairs_without_prompt_},
          {"compile_only_trajectories", compile_only_skipped_},
          {"not_current_tic", left_out_.size()},
          {"not_current_tic_by_reason", std::move(by_reason)}}},
        {"harness", options_.current_harness},
        {"tasks_dir", options_.tasks_dir},
        {"current_verdicts_from_server", options_.current_verdicts.has_value()},
        {"server", options_.current_verdicts_from},
        {"left_out", std::move(left_out)},
    };
    result.left_out = std::move(left_out_);
    return result;
  }

 private:
  // The trajectory with each turn's verdict replaced by the server's current one (when
  // options_.current_verdicts is set); a turn whose stored verdict was TIC is remembered by
  // (file, turn), so that losing TIC to a re-judge is named, not silently dropped.
  Trajectory WithCurrentVerdicts(const Trajectory& stored) {
    Trajectory t = stored;
    for (TurnRecord& turn : t.turns) {
      const std::pair<std::string, int> key{t.path, turn.turn};
      if (IsTic(turn)) stored_tic_.insert(key);
      if (!options_.current_verdicts.has_value()) continue;
      TurnVerdictNow now =
          CurrentVerdictOfTurn(*options_.current_verdicts, t.header.run.task, turn);
      turn.verdict = std::move(now.verdict);
      if (!now.unverifiable.empty()) unverifiable_[key] = std::move(now.unverifiable);
      if (!now.hacked_reason.empty()) hacked_[key] = std::move(now.hacked_reason);
    }
    return t;
  }

  // Whether `turn` may be exported as a TIC kernel: TIC by its current verdict, judged by
  // the current harness (engine and task content), not marked hacked. A turn whose stored or
  // current verdict was TIC and is refused here is recorded in left_out_ with the reason.
  bool ExportableTic(const Trajectory& t, const TurnRecord& turn) {
    const std::pair<std::string, int> key{t.path, turn.turn};
    const std::string& task = t.header.run.task;
    LeftOutKind kind = LeftOutKind::kNotTicNow;
    std::string reason;
    if (auto it = unverifiable_.find(key); it != unverifiable_.end()) {
      if (stored_tic_.count(key) == 0) return false;  // Never claimed TIC: nothing lost.
      kind = LeftOutKind::kNoCurrentVerdict;
      reason = it->second;
    } else if (auto it = hacked_.find(key); it != hacked_.end()) {
      kind = LeftOutKind::kHacked;
      reason = absl::StrCat("marked hacked: ", it->second);
    } else if (!IsTic(turn)) {
      if (stored_tic_.count(key) == 0) return false;  // Never TIC: not a left-out TIC turn.
      reason =
          absl::StrCat("its current verdict is ",
                       turn.verdict.has_value() ? VerdictClassName(turn.verdict->verdict_class) +
                                                      (turn.verdict->tic ? "" : " (not TIC)")
                                                : std::string("absent"));
    } else if (turn.verdict->harness.engine != options_.current_harness) {
      kind = LeftOutKind::kHarnessEngine;
      reason = absl::StrCat("judged by harness engine '", turn.verdict->harness.engine,
                            "', not the current '", options_.current_harness,
                            "' (re-judge it, then export with --server)");
    } else if (auto it = options_.current_task_hashes.find(task);
               it == options_.current_task_hashes.end()) {
      kind = LeftOutKind::kTaskContent;
      reason = absl::StrCat("task ", task, " is not in the task catalog ", options_.tasks_dir,
                            ", so its current task.json is unknown (pass --tasks-dir)");
    } else if (turn.verdict->harness.task_hash != it->second) {
      kind = LeftOutKind::kTaskContent;
      reason = absl::StrCat("judged under another task.json of ", task, " (task hash '",
                            turn.verdict->harness.task_hash, "', the catalog's is '", it->second,
                            "'; re-judge it, then export with --server)");
    } else {
      return true;
    }
    if (reported_.insert(key).second) {
      left_out_.push_back({t.path, turn.turn, turn.submission_id, kind, std::move(reason)});
    }
    return false;
  }

  // The trained assistant message: the reply (its <think> reasoning removed unless asked) or
  // the source in a fenced block.
  Message Trained(const TurnRecord& turn) const {
    std::string text;
    if (options_.content == AssistantContent::kReply) {
      text = options_.keep_reasoning ? turn.reply : WithoutReasoning(turn.reply);
    } else {
      text = absl::StrCat("```", turn.language.empty() ? "cuda" : turn.language, "\n", turn.source,
                          turn.source.empty() || turn.source.back() == '\n' ? "" : "\n", "```");
    }
    return {"assistant", std::move(text), true};
  }

  void AddKernelGen(const Trajectory& t, const std::vector<const TurnRecord*>& charged) {
    // The first prompt holds the system message and the task as the model first saw them.
    const ChatMessage* system = FirstWithRole(t.turns.front().prompt_messages, "system");
    const ChatMessage* task = FirstWithRole(t.turns.front().prompt_messages, "user");
    if (task == nullptr) {
      ++without_task_prompt_;
      return;
    }
    for (const TurnRecord* turn : charged) {
      if (!turn->extracted || !ExportableTic(t, *turn)) continue;
      std::vector<Message> messages;
      if (system != nullptr) messages.push_back({"system", system->content});
      messages.push_back({"user", task->content});
      messages.push_back(Trained(*turn));
      Emit(t, "pass", {SourceSha256Of(*turn)}, messages, {turn->turn});
    }
  }

  void AddFixit(const Trajectory& t, const std::vector<const TurnRecord*>& charged) {
    const bool compile_only = t.header.run.scope == v1::EVALUATION_SCOPE_COMPILE_ONLY;
    if (compile_only && !options_.compile_repairs) {
      // Nothing of a compile-only run is ever TIC: its pairs are compile repairs, on request.
      ++compile_only_skipped_;
      return;
    }
    for (size_t i = 0; i + 1 < charged.size(); ++i) {
      const TurnRecord& failed = *charged[i];
      const TurnRecord& repaired = *charged[i + 1];
      if (failed.feedback.empty() || !repaired.extracted) continue;
      if (options_.compile_repairs) {
        if (!IsCompileFailure(failed) || !IsCompiled(repaired)) continue;
      } else if (!IsKernelFailure(failed) || !ExportableTic(t, repaired)) {
        continue;
      }
      // What the model was shown before it wrote the repaired kernel, message for message:
      // the system message, the task, and (context full or latest) its failed reply and the
      // feedback message as sent; with context single, one user message holds them all.
      const std::vector<ChatMessage>& prompt = repaired.prompt_messages;
      const ChatMessage* system = FirstWithRole(prompt, "system");
      const ChatMessage* task = FirstWithRole(prompt, "user");
      if (task == nullptr) {
        ++pairs_without_prompt_;
        continue;
      }
      std::vector<Message> messages;
      if (system != nullptr) messages.push_back({"system", system->content});
      messages.push_back({"user", task->content});
      const size_t n = prompt.size();
      if (n >= 4 && prompt[n - 2].role == "assistant" && prompt[n - 1].role == "user" &&
          &prompt[n - 1] != task) {
        messages.push_back({"assistant", prompt[n - 2].content});
        messages.push_back({"user", prompt[n - 1].content});
      }
      messages.push_back(Trained(repaired));
      Emit(t, VerdictClassName(failed.verdict->verdict_class),
           {SourceSha256Of(failed), SourceSha256Of(repaired)}, messages,
           {failed.turn, repaired.turn});
    }
  }

  void Emit(const Trajectory& t, const std::string& failure_class,
            const std::vector<std::string>& hashes, const std::vector<Message>& messages,
            std::vector<int> turns) {
    const RunConfig& run = t.header.run;
    // The same kernel (or the same failed/repaired pair) of the same task and arch, shown the
    // same prompt, is one row: repeats would weigh it twice in training. The prompt is part of
    // the key (every system and user message, byte for byte), so rows whose prompts differ
    // (another knowledge level, other feedback) are never collapsed; assistant messages count
    // by their kernel, so two replies that differ only in prose around the same kernel are one.
    std::string prompt_bytes;
    for (const Message& m : messages) {
      if (m.role != "assistant") absl::StrAppend(&prompt_bytes, m.role, "\n", m.content, "\n\x1e");
    }
    if (!seen_.insert({run.task, run.arch, Sha256Hex(prompt_bytes), hashes}).second) {
      ++duplicates_;
      return;
    }
    int& count = counts_[{run.task, failure_class}];
    if (options_.max_per_class > 0 && count >= options_.max_per_class) {
      ++over_cap_;
      return;
    }
    ++count;
    row_json row = RowInLayout(messages, options_.layout);
    if (options_.metadata) {
      row["metadata"] = {{"task", run.task},           {"arch", run.arch}, {"model", run.model},
                         {"knowledge", run.knowledge}, {"file", t.path},   {"turns", turns},
                         {"class", failure_class}};
    }
    rows_.push_back(std::move(row));
  }

  const ExportOptions& options_;
  std::vector<row_json> rows_;
  std::set<std::tuple<std::string, std::string, std::string, std::vector<std::string>>> seen_;
  std::map<std::pair<std::string, std::string>, int> counts_;  // (task, class) -> rows.
  int trajectories_ = 0;
  int duplicates_ = 0;
  int over_cap_ = 0;
  int infra_failed_turns_ = 0;
  int runtime_unverified_turns_ = 0;
  int without_task_prompt_ = 0;
  int pairs_without_prompt_ = 0;
  int compile_only_skipped_ = 0;
  std::set<std::pair<std::string, int>> stored_tic_;  // (file, turn)
  // No current verdict to judge the turn by -> why (no id, unknown id, another kernel's id).
  std::map<std::pair<std::string, int>, std::string> unverifiable_;
  std::map<std::pair<std::string, int>, std::string> hacked_;  // -> the mark's reason.
  std::set<std::pair<std::string, int>> reported_;             // In left_out_ already.
  std::vector<LeftOutTurn> left_out_;
};

}  // namespace

std::string WithoutReasoning(const std::string& text) {
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t open = text.find("<think>", pos);
    if (open == std::string::npos) {
      out.append(text, pos, std::string::npos);
      break;
    }
    out.append(text, pos, open - pos);
    const size_t close = text.find("</think>", open);
    if (close == std::string::npos) break;  // Unclosed: the rest is reasoning too.
    pos = close + std::string("</think>").size();
  }
  const size_t first = out.find_first_not_of(" \t\r\n");
  return first == std::string::npos ? std::string() : out.substr(first);
}

std::string LeftOutKindName(LeftOutKind kind) {
  switch (kind) {
    case LeftOutKind::kNotTicNow:
      return "not_tic_now";
    case LeftOutKind::kHarnessEngine:
      return "harness_engine";
    case LeftOutKind::kTaskContent:
      return "task_content";
    case LeftOutKind::kHacked:
      return "hacked";
    case LeftOutKind::kNoCurrentVerdict:
      return "no_current_verdict";
  }
  return "not_tic_now";
}

absl::StatusOr<ExportLayout> ParseExportLayout(const std::string& name) {
  for (ExportLayout layout : {ExportLayout::kOpenAi, ExportLayout::kTrl,
                              ExportLayout::kLlamaFactory, ExportLayout::kAxolotl}) {
    if (ExportLayoutName(layout) == name) return layout;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown layout '", name, "' (openai, trl, llama-factory or axolotl)"));
}

std::string ExportLayoutName(ExportLayout layout) {
  switch (layout) {
    case ExportLayout::kOpenAi:
      return "openai";
    case ExportLayout::kTrl:
      return "trl";
    case ExportLayout::kLlamaFactory:
      return "llama-factory";
    case ExportLayout::kAxolotl:
      return "axolotl";
  }
  return "openai";
}

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
  if (excluded.value("not_current_tic", 0) > 0) {
    std::vector<std::string> reasons;
    for (const auto& [kind, count] : excluded["not_current_tic_by_reason"].items()) {
      if (count.get<int>() > 0) reasons.push_back(absl::StrCat(count.get<int>(), " ", kind));
    }
    out << absl::StrFormat(
        "%d TIC turns left out: not TIC under the current harness %s (%s; listed in the "
        "summary's left_out)\n",
        excluded.value("not_current_tic", 0), summary.value("harness", std::string()),
        absl::StrJoin(reasons, ", "));
  }
  if (excluded.value("compile_only_trajectories", 0) > 0) {
    out << absl::StrFormat(
        "%d compile-only trajectories give no fixit rows (never TIC); --compile-repairs pairs "
        "their non-compiling kernels with the next compiling one\n",
        excluded.value("compile_only_trajectories", 0));
  }
  return out.str();
}

}  // namespace ptxbench::client::report
