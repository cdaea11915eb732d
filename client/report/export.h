// Fine-tuning data from trajectory files, as JSON lines in the layout a trainer loads as
// intended (docs/client.md, "export", has each trainer's settings):
//   kernelgen: system, task, a TIC kernel
//   fixit:     system, task, failed kernel, its feedback, repaired kernel: every prompt message
//              byte-equal to a message the model was shown before writing the repaired kernel
//              (the repaired turn's prompt_messages), and only the repaired kernel trained.
// With --compile-repairs, fixit pairs a kernel that did not compile with the next turn's that
// did, compile-only runs included.
#ifndef PTXBENCH_CLIENT_REPORT_EXPORT_H_
#define PTXBENCH_CLIENT_REPORT_EXPORT_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/report/current_verdict.h"
#include "client/trajectory.h"
#include "common/build_info.h"
#include "common/verdict.h"
#include "nlohmann/json.hpp"

namespace ptxbench::client::report {

enum class ExportFormat { kKernelGen, kFixit };
absl::StatusOr<ExportFormat> ParseExportFormat(const std::string& name);  // kernelgen, fixit.

// What an assistant message holds: the model's whole reply (reasoning and kernel) or only the
// extracted source in a fenced code block.
enum class AssistantContent { kReply, kSource };
absl::StatusOr<AssistantContent> ParseAssistantContent(const std::string& name);  // reply, source

// The row layouts, each with the loss mask its trainer reads:
//   kOpenAi:       {"messages":[...]} with "weight" 0/1 on assistant messages (OpenAI chat
//                  fine-tuning).
//   kTrl:          {"prompt":[...],"completion":[{"role":"assistant",...}]}: TRL's
//                  conversational prompt-completion type (loss on the completion only).
//   kLlamaFactory: {"system":...,"conversations":[{"from":"human"|"gpt","value":...}]}:
//                  LLaMA-Factory's sharegpt format (train with mask_history: true).
//   kAxolotl:      {"messages":[...]} with "train" true/false on every message (Axolotl's
//                  chat_template with message_field_training: train).
enum class ExportLayout { kOpenAi, kTrl, kLlamaFactory, kAxolotl };
absl::StatusOr<ExportLayout> ParseExportLayout(const std::string& name);  // openai, trl, ...
std::string ExportLayoutName(ExportLayout layout);

struct ExportOptions {
  ExportFormat format = ExportFormat::kKernelGen;
  AssistantContent content = AssistantContent::kReply;
  ExportLayout layout = ExportLayout::kOpenAi;
  int max_per_class = 0;         // Rows per (task, failure class); 0: no cap.
  bool metadata = false;         // Add "metadata" (task, arch, model, file, turns, class).
  bool keep_reasoning = false;   // Keep <think>...</think> in trained assistant messages.
  bool compile_repairs = false;  // fixit: (did not compile, compiled) pairs instead.
  // Only a turn judged TIC by the current harness is exported as a TIC kernel (the kernelgen
  // row, the repaired side of a fixit pair): its verdict's harness engine must be this one
  // (common/build_info.h kHarnessVersion) and its task hash the current one of its task, since
  // a verdict of an older engine or an older task.json was judged by rules since changed.
  std::string current_harness = kHarnessVersion;
  // Task id -> Task::JudgingHash of the task catalog the export loaded (`--tasks-dir`). A TIC
  // turn of a task not in it is left out: nothing says which task.json is current for it.
  std::map<std::string, std::string> current_task_hashes;
  std::string tasks_dir;  // Where the catalog came from, for the reasons.
  // With `ptxbench export --server`: the current verdict of every turn's submission id. When
  // set, every turn is judged by its submission's entry instead of the verdict in the file; a
  // turn without a submission id, or whose id has no entry (the server does not know it), is
  // left out, since nothing vouches for the verdict its file claims.
  std::optional<CurrentVerdicts> current_verdicts;
  std::string current_verdicts_from;  // The server's address, for the summary.
};

// Why a TIC turn of the files was not exported, by kind: the summary counts each
// (`excluded.not_current_tic_by_reason`, keyed by LeftOutKindName).
enum class LeftOutKind {
  kNotTicNow,         // Its current verdict is not TIC (re-judged).
  kHarnessEngine,     // Judged by another harness engine.
  kTaskContent,       // Judged under another task.json, or its task is not in the catalog.
  kHacked,            // Marked hacked.
  kNoCurrentVerdict,  // Nothing vouches for a current verdict (CurrentVerdictOfTurn).
};
// "not_tic_now", "harness_engine", "task_content", "hacked", "no_current_verdict".
std::string LeftOutKindName(LeftOutKind kind);

// A TIC turn of the files that was not exported, and why.
struct LeftOutTurn {
  std::string file;
  int turn = 0;
  std::string submission_id;
  LeftOutKind kind = LeftOutKind::kNotTicNow;
  std::string reason;
};

struct ExportResult {
  // Keys in the order people read them ("role" before "content", "messages" first).
  std::vector<nlohmann::ordered_json> rows;
  // {"format", "layout", "rows", "per_task": {task: {class: n}}, "excluded": {...}}.
  nlohmann::json summary;
  std::vector<LeftOutTurn> left_out;  // Also counted in summary["excluded"]["not_current_tic"].
};

// Rows in the order of `trajectories` (sorted files) and their turns; deterministic.
ExportResult BuildExport(const std::vector<Trajectory>& trajectories, const ExportOptions& options);

// The text with every <think>...</think> block (and an unclosed one up to the end) removed,
// and the blank lines it leaves at the start trimmed.
std::string WithoutReasoning(const std::string& text);

// The summary as a small table for the terminal.
std::string RenderExportSummary(const nlohmann::json& summary);

}  // namespace ptxbench::client::report

#endif  // PTXBENCH_CLIENT_REPORT_EXPORT_H_
