#include "client/eval_command.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/exit_codes.h"
#include "client/verb.h"
#include "common/build_info.h"
#include "common/cli_args.h"
#include "common/task.h"
#include "common/verdict.h"
#include "worker/engine/evaluate.h"
#include "worker/engine/local_eval.h"

namespace ptxbench::client {
namespace {

const Verb& EvalVerb() {
  static const auto* verb = new Verb{
      "eval",
      "--task ID SOURCE",
      "Runs every stage of one evaluation on this machine's GPU, no server (the compile stage "
      "only without a GPU).",
      {
          {"task", true, "task id, e.g. gemm_n7168_k5120"},
          {"arch", true, "sm_90a or sm_100a", "sm_90a"},
          {"tasks-dir", true,
           "task catalog (or PTXBENCH_TASKS_DIR; default: ./tasks or the source tree's)"},
          {"plan", true, "launch plan JSON file (default: the PTXBENCH_PLAN block in SOURCE)"},
          {"language", true, "cuda or ptx (default: from the file extension)"},
          {"gpu", true, "CUDA device ordinal", "0"},
          {"compile-only", false, "the compile stage only"},
          {"keep-work-dir", false, "keep the evaluation's private folders (debugging)"},
          {"json", false, "print the verdict as JSON"},
      }};
  return *verb;
}

// The task's folder names under `tasks_dir` (hidden and _-prefixed ones left out), for the
// hint after an unknown --task.
std::vector<std::string> TaskIds(const std::string& tasks_dir) {
  std::vector<std::string> ids;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(tasks_dir, error)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && name.front() != '_' && name.front() != '.') ids.push_back(name);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

void PrintTable(const Verdict& v, std::ostream& out) {
  out << absl::StrFormat("%-20s %-5s %8s  %s\n", "stage", "ok", "seconds", "summary");
  for (const StageReport& s : v.stages) {
    out << absl::StrFormat("%-20s %-5s %8.2f  %s\n", StageName(s.stage), s.ok ? "yes" : "NO",
                           s.seconds, s.summary);
  }
  out << absl::StrFormat("\nverdict: %s   compiled %s  correct %s  target executed %s  TIC %s",
                         VerdictClassName(v.verdict_class), v.compiled ? "yes" : "no",
                         v.correct ? "yes" : "no", v.target_executed ? "yes" : "no",
                         v.tic ? "yes" : "no");
  if (v.speedup > 0) out << absl::StrFormat("  speedup %.3f", v.speedup);
  if (v.runtime_unverified) out << "  (runtime stages NOT run)";
  out << "\n" << v.message << "\n";
}

}  // namespace

int EvalCommand(const std::vector<std::string>& raw, std::ostream& out, std::ostream& err) {
  const Verb& verb = EvalVerb();
  int exit_code = kExitPass;
  std::optional<ParsedArgs> args = ParseVerb(verb, raw, out, err, &exit_code);
  if (!args.has_value()) return exit_code;
  if (!args->Has("task")) return UsageError(verb, "--task is required", err);
  if (args->positional().size() != 1) {
    return UsageError(verb, "exactly one SOURCE file is needed", err);
  }
  const std::string task_id = args->Get("task");
  const std::string arch = args->Get("arch");
  if (arch != "sm_90a" && arch != "sm_100a") {
    return UsageError(
        verb, absl::StrCat("--arch: '", arch, "' is not an arch; use sm_90a or sm_100a"), err);
  }
  const std::string source_path = args->positional()[0];
  const absl::StatusOr<std::string> language = SourceLanguage(args->Get("language"), source_path);
  if (!language.ok()) return UsageError(verb, std::string(language.status().message()), err);
  absl::StatusOr<int64_t> gpu = args->GetInt("gpu", 0);
  if (!gpu.ok() || *gpu < 0) return UsageError(verb, "--gpu: a device ordinal >= 0", err);
  const char* env_tasks = std::getenv("PTXBENCH_TASKS_DIR");
  const std::string tasks_dir = args->Has("tasks-dir")               ? args->Get("tasks-dir")
                                : env_tasks != nullptr && *env_tasks ? std::string(env_tasks)
                                                                     : SourceTreeDir("tasks");
  const bool json_output = args->GetBool("json");
  const bool compile_only = args->GetBool("compile-only");

  engine::EngineOptions options;
  options.gpu = static_cast<int>(*gpu);
  options.keep_work_dir = args->GetBool("keep-work-dir");
  const engine::LocalWorkRoot work_root = engine::ChooseLocalWorkRoot();
  if (!work_root.note.empty()) err << "ptxbench eval: " << work_root.note << "\n";
  options.work_root = work_root.path;

  absl::StatusOr<Task> task = LoadTask(tasks_dir + "/" + task_id);
  if (!task.ok()) {
    err << "ptxbench eval: " << task.status().message() << "\n";
    const std::vector<std::string> ids = TaskIds(tasks_dir);
    if (!ids.empty()) {
      err << "hint: the tasks in " << tasks_dir << " are " << absl::StrJoin(ids, ", ") << "\n";
    }
    return kExitUsage;
  }
  engine::EvaluationRequest request;
  request.task = &*task;
  request.arch = arch;
  request.compile_only = compile_only;
  absl::StatusOr<std::string> source = ReadInputFile(source_path, "the source");
  if (!source.ok()) {
    err << "ptxbench eval: " << source.status().message() << "\n";
    return kExitUsage;
  }
  request.source = *std::move(source);
  if (const std::string plan_path = args->Get("plan"); !plan_path.empty()) {
    absl::StatusOr<std::string> plan = ReadInputFile(plan_path, "--plan");
    if (!plan.ok()) {
      err << "ptxbench eval: " << plan.status().message() << "\n";
      return kExitUsage;
    }
    request.launch_plan_json = *std::move(plan);
  }
  request.language = *language;
  auto on_stage = [&](const StageReport& s) {
    if (!json_output) {
      err << absl::StrFormat("[%s] %s (%.2f s)\n", StageName(s.stage), s.summary, s.seconds);
    }
  };
  absl::StatusOr<Verdict> verdict = engine::Evaluate(request, options, on_stage);
  if (!verdict.ok()) {
    err << "ptxbench eval: infrastructure failure (nothing is known about the kernel): "
        << verdict.status().message() << "\n";
    return kExitInfrastructure;
  }
  if (json_output) {
    out << ::ptxbench::ToJson(*verdict).dump(2) << "\n";
  } else {
    PrintTable(*verdict, out);
  }
  if (verdict->verdict_class == VerdictClass::kPass) return kExitPass;
  if (compile_only && verdict->verdict_class == VerdictClass::kCompiled) return kExitPass;
  return kExitVerdictFailed;
}

}  // namespace ptxbench::client
