#include "worker/engine/gpu/local_eval.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/build_info.h"
#include "common/cli_args.h"
#include "common/files.h"
#include "common/task.h"
#include "common/verdict.h"
#include "worker/engine/evaluate.h"

namespace ptxbench::engine {
namespace {

constexpr int kPass = 0, kVerdictFailed = 1, kUsageError = 2, kInfrastructure = 3;

const char kUsage[] =
    "usage: ptxbench eval --task ID [flags] SOURCE\n"
    "Runs every stage of one evaluation on this machine's GPU, no server (the compile stage "
    "only without a GPU).\nflags:\n";

const std::vector<FlagSpec>& Flags() {
  static const auto* flags = new std::vector<FlagSpec>{
      {"task", true, "task id, e.g. gemm_n7168_k5120"},
      {"arch", true, "sm_90a or sm_100a", "sm_90a"},
      {"tasks-dir", true,
       "task catalog (or PTXBENCH_TASKS_DIR; default: ./tasks or the source "
       "tree's)"},
      {"plan", true, "launch plan JSON file (default: the PTXBENCH_PLAN block in SOURCE)"},
      {"language", true, "cuda or ptx (default: from the file extension)"},
      {"gpu", true, "CUDA device ordinal", "0"},
      {"compile-only", false, "the compile stage only"},
      {"keep-work-dir", false, "keep the evaluation's private folders (debugging)"},
      {"json", false, "print the verdict as JSON"},
      {"help", false, "print this help and exit"},
  };
  return *flags;
}

int Usage(const std::string& problem, std::ostream& err) {
  err << "ptxbench eval: " << problem << "\n" << kUsage << FlagHelp(Flags());
  return kUsageError;
}

// The first folder on the way from / to `dir` that the sandbox user cannot pass, or "" when
// every one has its execute bit for others (or `dir` does not exist: the engine says so).
std::string BlockedAncestor(const std::string& dir) {
  std::error_code error;
  const std::filesystem::path real = std::filesystem::canonical(dir, error);
  if (error) return "";
  std::filesystem::path at;
  for (const std::filesystem::path& part : real) {
    at /= part;
    struct stat info {};
    if (stat(at.c_str(), &info) != 0) return "";
    if ((info.st_mode & S_IXOTH) == 0) return at.string();
  }
  return "";
}

// Where the evaluation's private folders go. As root the sandboxes run as nobody, who must
// traverse every folder above their own: a private $TMPDIR (mode 0700, as a sandboxed shell or
// `systemd-run -p PrivateTmp` gives) made the compile sandbox fail with "request.json:
// Permission denied" and an infrastructure verdict. Such a TMPDIR is passed over for /tmp
// (or /var/tmp), and the note says so; as any other user the sandboxes run as that user.
std::string SandboxWorkRoot(std::ostream& notes) {
  const char* tmp = std::getenv("TMPDIR");
  std::string wanted = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  if (geteuid() != 0) return wanted;
  const std::string blocked = BlockedAncestor(wanted);
  if (blocked.empty()) return wanted;
  for (const char* fallback : {"/tmp", "/var/tmp"}) {
    if (std::filesystem::is_directory(fallback) && BlockedAncestor(fallback).empty()) {
      notes << "ptxbench eval: TMPDIR " << wanted << " is not reachable by the sandbox user ("
            << blocked << " has no execute bit for others); working under " << fallback << "\n";
      return fallback;
    }
  }
  return wanted;  // Nothing better: the engine's error then names the folder.
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

int RunLocalEval(const std::vector<std::string>& raw, std::ostream& out, std::ostream& err) {
  for (const std::string& arg : raw) {
    if (arg == "--") break;
    if (arg == "--help" || arg == "-h") {
      out << kUsage << FlagHelp(Flags());
      return kPass;
    }
  }
  absl::StatusOr<ParsedArgs> args = ParseArgs(raw, Flags());
  if (!args.ok()) return Usage(std::string(args.status().message()), err);
  if (!args->Has("task")) return Usage("--task is required", err);
  if (args->positional().size() != 1) {
    return Usage("exactly one SOURCE file is needed", err);
  }
  const std::string task_id = args->Get("task");
  const std::string arch = args->Get("arch");
  if (arch != "sm_90a" && arch != "sm_100a") {
    return Usage(absl::StrCat("--arch: '", arch, "' is not an arch; use sm_90a or sm_100a"), err);
  }
  const std::string language = args->Get("language");
  if (!language.empty() && language != "cuda" && language != "ptx") {
    return Usage(absl::StrCat("--language: '", language, "' is not cuda or ptx"), err);
  }
  absl::StatusOr<int64_t> gpu = args->GetInt("gpu", 0);
  if (!gpu.ok() || *gpu < 0) return Usage("--gpu: a device ordinal >= 0", err);
  const char* env_tasks = std::getenv("PTXBENCH_TASKS_DIR");
  const std::string tasks_dir = args->Has("tasks-dir")               ? args->Get("tasks-dir")
                                : env_tasks != nullptr && *env_tasks ? std::string(env_tasks)
                                                                     : SourceTreeDir("tasks");
  const std::string source_path = args->positional()[0];
  const std::string plan_path = args->Get("plan");
  const bool json_output = args->GetBool("json");
  const bool compile_only = args->GetBool("compile-only");
  EngineOptions options;
  options.gpu = static_cast<int>(*gpu);
  options.keep_work_dir = args->GetBool("keep-work-dir");
  options.work_root = SandboxWorkRoot(err);
  auto task = LoadTask(tasks_dir + "/" + task_id);
  if (!task.ok()) {
    err << "ptxbench eval: " << task.status().message() << "\n";
    std::vector<std::string> ids;
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(tasks_dir, error)) {
      const std::string name = entry.path().filename().string();
      if (entry.is_directory() && name.front() != '_' && name.front() != '.') ids.push_back(name);
    }
    std::sort(ids.begin(), ids.end());
    if (!ids.empty())
      err << "hint: the tasks in " << tasks_dir << " are " << absl::StrJoin(ids, ", ") << "\n";
    return kUsageError;
  }
  EvaluationRequest request;
  request.task = &*task;
  request.arch = arch;
  request.compile_only = compile_only;
  // The user's own command line: a pipe (`--source <(generate)`) is read like a file.
  absl::StatusOr<std::string> source =
      ReadFileToString(source_path, "the source", {.allow_pipes = true});
  if (!source.ok()) {
    err << "ptxbench eval: " << source.status().message() << "\n";
    return kUsageError;
  }
  request.source = *std::move(source);
  if (!plan_path.empty()) {
    absl::StatusOr<std::string> plan = ReadFileToString(plan_path, "--plan", {.allow_pipes = true});
    if (!plan.ok()) {
      err << "ptxbench eval: " << plan.status().message() << "\n";
      return kUsageError;
    }
    request.launch_plan_json = *std::move(plan);
  }
  request.language = !language.empty()                     ? language
                     : absl::EndsWith(source_path, ".ptx") ? "ptx"
                                                           : "cuda";
  auto on_stage = [&](const StageReport& s) {
    if (!json_output) {
      err << absl::StrFormat("[%s] %s (%.2f s)\n", StageName(s.stage), s.summary, s.seconds);
    }
  };
  auto verdict = Evaluate(request, options, on_stage);
  if (!verdict.ok()) {
    err << "ptxbench eval: infrastructure failure (nothing is known about the kernel): "
        << verdict.status().message() << "\n";
    return kInfrastructure;
  }
  if (json_output) {
    out << ToJson(*verdict).dump(2) << "\n";
  } else {
    PrintTable(*verdict, out);
  }
  if (verdict->verdict_class == VerdictClass::kPass) return kPass;
  if (compile_only && verdict->verdict_class == VerdictClass::kCompiled) return kPass;
  return kVerdictFailed;
}

}  // namespace ptxbench::engine
