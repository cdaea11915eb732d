// Fine-tuning data from trajectory files, as chat-message JSON lines
// ({"messages":[{"role","content"}...]}) that common fine-tuning tools load:
//   kernelgen: system, task, a TIC kernel                               (3 messages)
//   fixit:     system, task, failed kernel, its feedback, repaired kernel (5 messages)
// Only assistant messages carry "weight" (the OpenAI chat fine-tuning convention): 1 on the
// last message, 0 on an earlier one, so the loss falls on the last message only. docs/client.md
// ("export") has the selection rules.
#ifndef PTXBENCH_CLIENT_REPORT_EXPORT_H_
#define PTXBENCH_CLIENT_REPORT_EXPORT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/trajectory.h"
#include "nlohmann/json.hpp"

namespace ptxbench::client::report {

enum class ExportFormat { kKernelGen, kFixit };
absl::StatusOr<ExportFormat> ParseExportFormat(const std::string& name);  // kernelgen, fixit.

// What an assistant message holds: the model's whole reply (reasoning and kernel) or only the
// extracted source in a fenced code block.
enum class AssistantContent { kReply, kSource };
absl::StatusOr<AssistantContent> ParseAssistantContent(const std::string& name);  // reply, source

struct ExportOptions {
  ExportFormat format = ExportFormat::kKernelGen;
  AssistantContent content = AssistantContent::kReply;
  int max_per_class = 0;  // Rows per (task, failure class); 0: no cap.
  bool metadata = false;  // Add "metadata" (task, arch, model, file, turns, class) to each row.
};

struct ExportResult {
  // Keys in the order people read them ("role" before "content", "messages" first).
  std::vector<nlohmann::ordered_json> rows;
  // {"format", "rows", "per_task": {task: {class: n}}, "excluded": {...}}.
  nlohmann::json summary;
};

// Rows in the order of `trajectories` (sorted files) and their turns; deterministic.
ExportResult BuildExport(const std::vector<Trajectory>& trajectories, const ExportOptions& options);

// The summary as a small table for the terminal.
std::string RenderExportSummary(const nlohmann::json& summary);

}  // namespace ptxbench::client::report

#endif  // PTXBENCH_CLIENT_REPORT_EXPORT_H_
