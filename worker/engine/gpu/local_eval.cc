#include "worker/engine/gpu/local_eval.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_format.h"
#include "common/task.h"
#include "common/verdict.h"
#include "worker/engine/evaluate.h"

namespace ptxbench::engine {
namespace {

constexpr int kPass = 0, kVerdictFailed = 1, kUsage = 2, kInfrastructure = 3;

const char kHelp[] =
    "usage: ptxbench eval --task ID [--arch sm_90a] [--json] [--tasks-dir DIR] [--plan FILE]\n"
    "                     [--language cuda|ptx] [--gpu N] [--compile-only] [--keep-work-dir]\n"
    "                     SOURCE\n"
    "Runs every stage of one evaluation on this machine's GPU (compile only without one).\n";

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream s;
  s << in.rdbuf();
  *out = s.str();
  return true;
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

int RunLocalEval(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string task_id, arch = "sm_90a", plan_path, language, source_path;
  const char* env_tasks = std::getenv("PTXBENCH_TASKS_DIR");
  std::string tasks_dir = env_tasks && *env_tasks ? env_tasks : "tasks";
  bool json_output = false, compile_only = false;
  EngineOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string* target) {
      if (i + 1 >= args.size()) return false;
      *target = args[++i];
      return true;
    };
    bool ok = true;
    if (a == "--task")
      ok = value(&task_id);
    else if (a == "--arch")
      ok = value(&arch);
    else if (a == "--tasks-dir")
      ok = value(&tasks_dir);
    else if (a == "--plan")
      ok = value(&plan_path);
    else if (a == "--language")
      ok = value(&language);
    else if (a == "--json")
      json_output = true;
    else if (a == "--compile-only")
      compile_only = true;
    else if (a == "--keep-work-dir")
      options.keep_work_dir = true;
    else if (a == "--gpu") {
      std::string g;
      ok = value(&g);
      options.gpu = std::atoi(g.c_str());
    } else if (a == "-h" || a == "--help") {
      out << kHelp;
      return kPass;
    } else if (!a.empty() && a[0] == '-') {
      err << "ptxbench eval: unknown flag " << a << "\n" << kHelp;
      return kUsage;
    } else if (source_path.empty()) {
      source_path = a;
    } else {
      err << "ptxbench eval: one SOURCE only\n" << kHelp;
      return kUsage;
    }
    if (!ok) {
      err << "ptxbench eval: " << a << " needs a value\n" << kHelp;
      return kUsage;
    }
  }
  if (task_id.empty() || source_path.empty()) {
    err << kHelp;
    return kUsage;
  }
  auto task = LoadTask(tasks_dir + "/" + task_id);
  if (!task.ok()) {
    err << "ptxbench eval: " << task.status().message() << "\n";
    return kUsage;
  }
  EvaluationRequest request;
  request.task = &*task;
  request.arch = arch;
  request.compile_only = compile_only;
  if (!ReadFile(source_path, &request.source)) {
    err << "ptxbench eval: cannot read " << source_path << "\n";
    return kUsage;
  }
  if (!plan_path.empty() && !ReadFile(plan_path, &request.launch_plan_json)) {
    err << "ptxbench eval: cannot read " << plan_path << "\n";
    return kUsage;
  }
  request.language =
      !language.empty()                                                                  ? language
      : (source_path.size() > 4 && source_path.substr(source_path.size() - 4) == ".ptx") ? "ptx"
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
