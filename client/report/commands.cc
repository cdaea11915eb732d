#include "client/report/commands.h"

#include <filesystem>
#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/command_support.h"
#include "client/exit_codes.h"
#include "client/report/export.h"
#include "client/report/export_server.h"
#include "client/report/metrics.h"
#include "client/report/render.h"
#include "common/build_info.h"
#include "common/cli_args.h"
#include "common/task.h"
#include "proto/dial.h"

namespace ptxbench::client {
namespace {

using report::CurrentVerdicts;
using report::ExportOptions;
using report::ReportOptions;

absl::Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int>> ParseIntList(const std::string& flag, const std::string& text) {
  std::vector<int> values;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int value = 0;
    if (!absl::SimpleAtoi(part, &value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": '", std::string(part), "' is not an integer"));
    }
    values.push_back(value);
  }
  return values;
}

absl::StatusOr<std::vector<double>> ParseDoubleList(const std::string& flag,
                                                    const std::string& text) {
  std::vector<double> values;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    double value = 0;
    if (!absl::SimpleAtod(part, &value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": '", std::string(part), "' is not a number"));
    }
    values.push_back(value);
  }
  return values;
}

std::string JsonLine(const nlohmann::ordered_json& value) {
  return value.dump(-1, ' ', /*ensure_ascii=*/false,
                    nlohmann::ordered_json::error_handler_t::replace);
}

// `ptxbench VERB --help` prints the usage on stdout with exit 0, as every verb does.
bool HelpAsked(const std::vector<std::string>& args) {
  for (const std::string& arg : args) {
    if (arg == "--") return false;
    if (arg == "--help" || arg == "-h") return true;
  }
  return false;
}

// The connection flags without a default server, and --retries: only an explicit --server
// asks for the current verdicts (a file from another server's run would otherwise lose every
// turn), and PTXBENCH_SERVER is not read.
std::vector<FlagSpec> CurrentVerdictFlags(const std::string& server_help) {
  std::vector<FlagSpec> specs = ConnectionFlags(/*default_server=*/"");
  for (FlagSpec& spec : specs) {
    if (spec.name == "server") spec.help = server_help;
  }
  specs.push_back({"retries", true,
                   "with --server: attempts of a call the server could not answer (unreachable, "
                   "restarting, refused for now) before the command fails",
                   "6"});
  return specs;
}

// Whether the connection flags are consistent: the others mean nothing without --server.
absl::Status CheckCurrentVerdictFlags(const ParsedArgs& args) {
  if (!args.Has("server")) {
    for (const char* flag : {"token-file", "token", "tls", "tls-ca"}) {
      if (args.Has(flag)) {
        return absl::InvalidArgumentError(absl::StrCat("--", flag, " needs --server"));
      }
    }
  }
  absl::StatusOr<int64_t> retries = args.GetInt("retries", 6);
  if (!retries.ok()) return retries.status();
  if (*retries < 1) return absl::InvalidArgumentError("--retries: at least 1");
  return absl::OkStatus();
}

// The current verdict of every submission the trajectories name, from the --server of `args`
// (export_server.h): into `*current`, and kExitPass. Otherwise it prints why, naming the
// server, and returns the exit code (2 for flags or a refused token, 3 when the server could
// not answer), so that figures or a dataset are never silently built from stale verdicts.
int FetchCurrentVerdictsForVerb(const std::string& verb, const ParsedArgs& args,
                                const std::vector<Trajectory>& trajectories,
                                CurrentVerdicts* current, std::string* address, std::ostream& err) {
  absl::StatusOr<Connection> connection = ConnectionFromFlags(args, err);
  if (!connection.ok()) {
    err << "ptxbench " << verb << ": " << connection.status().message() << "\n";
    return kExitUsage;
  }
  report::FetchOptions fetch;
  fetch.retry.max_attempts = static_cast<int>(args.GetInt("retries", 6).value_or(6));
  auto fetched =
      report::FetchCurrentVerdicts(*connection, report::SubmissionIdsOf(trajectories), fetch, err);
  if (!fetched.ok()) {
    err << "ptxbench " << verb << ": current verdicts from " << connection->dial.address << ": "
        << fetched.status().message() << "\nnothing was written\n";
    const absl::StatusCode code = fetched.status().code();
    return code == absl::StatusCode::kUnauthenticated || code == absl::StatusCode::kPermissionDenied
               ? kExitUsage
               : kExitInfrastructure;
  }
  *current = *std::move(fetched);
  *address = connection->dial.address;
  return kExitPass;
}

}  // namespace

int ReportCommand(const std::vector<std::string>& raw, std::ostream& out, std::ostream& err) {
  std::vector<FlagSpec> specs = {
      {"out", true, "folder for report.md, report.html and report.json (default: first RUN_DIR)"},
      {"limits", true, "turn limits for the TIC rate, comma-separated", "1,4,8"},
      {"fast-p", true, "speedup thresholds p of fast_p, comma-separated", "0.5,1.0,1.2"},
      {"no-files", false, "print the table only; write nothing"},
  };
  for (FlagSpec& spec : CurrentVerdictFlags(
           "judge each turn by its submission's current verdict and hacked mark on this server "
           "(HOST:PORT; PTXBENCH_SERVER is not read here) instead of the verdict its file "
           "recorded")) {
    specs.push_back(std::move(spec));
  }
  auto usage = [&](const std::string& problem) {
    err << "ptxbench report: " << problem << "\n"
        << "usage: ptxbench report [flags] RUN_DIR...\n"
        << FlagHelp(specs);
    return kExitUsage;
  };
  if (HelpAsked(raw)) {
    out << "usage: ptxbench report [flags] RUN_DIR...\n" << FlagHelp(specs);
    return kExitPass;
  }
  auto args = ParseArgs(raw, specs);
  if (!args.ok()) return usage(std::string(args.status().message()));
  if (args->positional().empty()) return usage("at least one RUN_DIR is needed");
  ReportOptions options;
  auto limits = ParseIntList("limits", args->Get("limits"));
  if (!limits.ok()) return usage(std::string(limits.status().message()));
  auto fast_p = ParseDoubleList("fast-p", args->Get("fast-p"));
  if (!fast_p.ok()) return usage(std::string(fast_p.status().message()));
  options.turn_limits = *limits;
  options.fast_p = *fast_p;
  if (absl::Status flags = CheckCurrentVerdictFlags(*args); !flags.ok()) {
    return usage(std::string(flags.message()));
  }

  auto trajectories = report::LoadTrajectories(args->positional());
  if (!trajectories.ok()) {
    err << "ptxbench report: " << trajectories.status().message() << "\n";
    return kExitUsage;
  }
  if (args->Has("server")) {
    CurrentVerdicts current;
    const int code = FetchCurrentVerdictsForVerb("report", *args, *trajectories, &current,
                                                 &options.current_verdicts_from, err);
    if (code != kExitPass) return code;
    options.current_verdicts = std::move(current);
  }
  auto built = report::BuildReport(*trajectories, options);
  if (!built.ok()) return usage(std::string(built.status().message()));
  out << report::RenderTable(*built);
  if (args->GetBool("no-files")) return kExitPass;

  const std::string dir = args->Get("out", args->positional().front());
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::vector<std::pair<std::string, std::string>> files = {
      {dir + "/report.md", report::RenderMarkdown(*built)},
      {dir + "/report.html", report::RenderHtml(*built)},
      {dir + "/report.json", report::ReportJson(*built).dump(2) + "\n"},
  };
  for (const auto& [path, text] : files) {
    if (absl::Status status = WriteText(path, text); !status.ok()) {
      err << "ptxbench report: " << status.message() << "\n";
      return kExitInfrastructure;
    }
    out << "wrote " << path << "\n";
  }
  return kExitPass;
}

int ExportCommand(const std::vector<std::string>& raw, std::ostream& out, std::ostream& err) {
  std::vector<FlagSpec> specs = CurrentVerdictFlags(
      "take each turn's current verdict and hacked mark from this server (HOST:PORT; "
      "PTXBENCH_SERVER is not read here) instead of the files' verdicts");
  specs.insert(
      specs.end(),
      {
          {"format", true,
           "kernelgen (system, task, TIC kernel) or fixit (failed kernel, feedback, "
           "repaired kernel)"},
          {"out", true, "the JSONL file to write"},
          {"summary", true, "summary JSON file (default: OUT with .summary.json)"},
          {"max-per-class", true, "at most this many rows per (task, failure class); 0: no cap",
           "0"},
          {"assistant", true, "assistant message: reply (whole reply) or source (code block only)",
           "reply"},
          {"metadata", false, "add a \"metadata\" object (task, arch, model, file, turns, class)"},
          {"layout", true,
           "row layout and loss mask: openai (messages, weight), trl (prompt/completion), "
           "llama-factory (sharegpt conversations), axolotl (messages, train)",
           "openai"},
          {"keep-reasoning", false,
           "keep <think>...</think> reasoning in trained assistant messages"},
          {"compile-repairs", false,
           "fixit: pair a kernel that did not compile with the next turn's that did (compile-only "
           "runs included) instead of a failure with a TIC repair"},
          {"tasks-dir", true,
           "the task catalog whose task.json hashes are current: a TIC turn judged under "
           "another task.json is not exported (default: ./tasks or the source tree)"},
      });
  auto usage = [&](const std::string& problem) {
    err << "ptxbench export: " << problem << "\n"
        << "usage: ptxbench export --format kernelgen|fixit --out FILE [--layout L] [flags] "
           "RUN_DIR...\n"
        << FlagHelp(specs);
    return kExitUsage;
  };
  if (HelpAsked(raw)) {
    out << "usage: ptxbench export --format kernelgen|fixit --out FILE [flags] RUN_DIR...\n"
        << FlagHelp(specs);
    return kExitPass;
  }
  auto args = ParseArgs(raw, specs);
  if (!args.ok()) return usage(std::string(args.status().message()));
  if (args->positional().empty()) return usage("at least one RUN_DIR is needed");
  if (!args->Has("format")) return usage("--format is required");
  if (!args->Has("out")) return usage("--out is required");
  ExportOptions options;
  auto format = report::ParseExportFormat(args->Get("format"));
  if (!format.ok()) return usage(std::string(format.status().message()));
  options.format = *format;
  auto content = report::ParseAssistantContent(args->Get("assistant"));
  if (!content.ok()) return usage(std::string(content.status().message()));
  options.content = *content;
  auto cap = args->GetInt("max-per-class", 0);
  if (!cap.ok()) return usage(std::string(cap.status().message()));
  if (*cap < 0) return usage("--max-per-class must not be negative");
  options.max_per_class = static_cast<int>(*cap);
  options.metadata = args->GetBool("metadata");
  auto layout = report::ParseExportLayout(args->Get("layout"));
  if (!layout.ok()) return usage(std::string(layout.status().message()));
  options.layout = *layout;
  options.keep_reasoning = args->GetBool("keep-reasoning");
  options.compile_repairs = args->GetBool("compile-repairs");
  if (options.compile_repairs && options.format != report::ExportFormat::kFixit) {
    return usage("--compile-repairs needs --format fixit");
  }

  if (absl::Status flags = CheckCurrentVerdictFlags(*args); !flags.ok()) {
    return usage(std::string(flags.message()));
  }
  // The current task.json of every task: a TIC turn judged under another is not exported.
  options.tasks_dir = args->Has("tasks-dir") ? args->Get("tasks-dir") : SourceTreeDir("tasks");
  absl::StatusOr<TaskCatalog> catalog = TaskCatalog::Load(options.tasks_dir);
  if (!catalog.ok()) {
    err << "ptxbench export: --tasks-dir: " << catalog.status().message() << "\n";
    return kExitUsage;
  }
  for (const Task& task : catalog->tasks()) {
    options.current_task_hashes[task.id] = task.JudgingHash();
  }

  auto trajectories = report::LoadTrajectories(args->positional());
  if (!trajectories.ok()) {
    err << "ptxbench export: " << trajectories.status().message() << "\n";
    return kExitUsage;
  }
  if (args->Has("server")) {
    // Never a silent export of the files' (possibly superseded) verdicts.
    CurrentVerdicts current;
    const int code = FetchCurrentVerdictsForVerb("export", *args, *trajectories, &current,
                                                 &options.current_verdicts_from, err);
    if (code != kExitPass) return code;
    options.current_verdicts = std::move(current);
  }
  report::ExportResult result = report::BuildExport(*trajectories, options);
  std::string rows;
  for (const nlohmann::ordered_json& row : result.rows) rows += JsonLine(row) + "\n";
  const std::string out_path = args->Get("out");
  std::string summary_path = args->Get("summary");
  if (summary_path.empty()) {
    const std::string stem = out_path.size() > 6 && out_path.substr(out_path.size() - 6) == ".jsonl"
                                 ? out_path.substr(0, out_path.size() - 6)
                                 : out_path;
    summary_path = stem + ".summary.json";
  }
  for (const auto& [path, text] : std::vector<std::pair<std::string, std::string>>{
           {out_path, rows}, {summary_path, result.summary.dump(2) + "\n"}}) {
    if (absl::Status status = WriteText(path, text); !status.ok()) {
      err << "ptxbench export: " << status.message() << "\n";
      return kExitInfrastructure;
    }
  }
  // Every TIC turn left out is named, so that a dataset never silently shrinks.
  for (const report::LeftOutTurn& turn : result.left_out) {
    err << "left out: " << turn.file << " turn " << turn.turn
        << (turn.submission_id.empty() ? "" : " (submission " + turn.submission_id + ")") << ": "
        << turn.reason << "\n";
  }
  out << report::RenderExportSummary(result.summary) << "wrote " << out_path << " and "
      << summary_path << "\n";
  return kExitPass;
}

}  // namespace ptxbench::client
