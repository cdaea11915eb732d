#include "client/run/run_command.h"

#include <unistd.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/cli.h"
#include "client/command_support.h"
#include "client/run/embedded_stack.h"
#include "client/run/evaluation_client.h"
#include "client/run/progress.h"
#include "client/run/provider.h"
#include "client/run/run_loop.h"
#include "common/cli_args.h"
#include "proto/wire_names.h"

namespace ptxbench::client::run {
namespace {

const char kUsageLine[] =
    "usage: ptxbench run --model PROVIDER:MODEL --task ID[,ID...] --out RUN_DIR [flags]\n";

std::vector<FlagSpec> Flags() {
  return WithConnectionFlags({
      {"model", true, "openai:MODEL, anthropic:MODEL or replay:DIR"},
      {"task", true, "task ids, comma-separated"},
      {"arch", true, "sm_90a or sm_100a", "sm_90a"},
      {"knowledge", true, "none, templates or contract", "none"},
      {"turns", true, "turn limit per trajectory", "8"},
      {"trajectories", true, "independent trajectories per task", "12"},
      {"concurrency", true, "trajectories in flight at once", "4"},
      {"context", true, "earlier turns shown to the model: full, latest or single", "full"},
      {"target-speedup", true, "a TIC turn with this speedup ends its trajectory", "1.0"},
      {"out", true, "RUN_DIR: trajectory files (an interrupted run resumes from them)"},
      {"compile-only", false,
       "evaluate the compile stage only (no GPU needed; no turn reaches TIC, so every turn runs)"},
      {"base-url", true, "API base URL (or OPENAI_BASE_URL / ANTHROPIC_BASE_URL)"},
      {"temperature", true, "sampling temperature (default: the provider's)"},
      {"max-tokens", true, "output token limit per reply (default: the provider's)", "0"},
      {"thinking-budget", true, "anthropic: extended thinking budget in tokens (0: off)", "0"},
      {"request-timeout-seconds", true, "one model request's time limit", "600"},
      {"provider-concurrency", true, "model requests in flight at once (default: --concurrency)"},
      {"retries", true,
       "attempts per model call or evaluation before it counts as an "
       "infrastructure failure",
       "6"},
      {"retry-base-seconds", true, "first backoff wait; doubled per attempt, with jitter", "2"},
      {"verdict-timeout-seconds", true, "longest wait for one verdict", "3600"},
      {"stack-dir", true, "embedded stack's data folder (default: RUN_DIR/stack)"},
      {"tasks-dir", true, "embedded stack's task catalog (default: ./tasks or the source tree)"},
  });
}

int Usage(std::ostream& err, const std::string& problem) {
  err << "ptxbench run: " << problem << "\n" << kUsageLine << FlagHelp(Flags());
  return kExitUsage;
}

}  // namespace

int RunCommand(const std::vector<std::string>& raw, std::ostream& out, std::ostream& err) {
  auto args = ParseArgs(raw, Flags());
  if (!args.ok()) return Usage(err, std::string(args.status().message()));
  if (!args->positional().empty()) {
    return Usage(err, absl::StrCat("unexpected argument '", args->positional()[0], "'"));
  }
  RunOptions options;
  options.model = args->Get("model");
  options.out_dir = args->Get("out");
  options.arch = args->Get("arch");
  options.knowledge = args->Get("knowledge");
  options.compile_only = args->GetBool("compile-only");
  for (absl::string_view task : absl::StrSplit(args->Get("task"), ',', absl::SkipEmpty())) {
    options.tasks.emplace_back(task);
  }
  if (options.model.empty()) return Usage(err, "--model is required");
  if (options.tasks.empty()) return Usage(err, "--task is required");
  if (options.out_dir.empty()) return Usage(err, "--out is required");
  if (!wire::ParseArch(options.arch).ok()) {
    return Usage(err, absl::StrCat("--arch '", options.arch, "': expected sm_90a or sm_100a"));
  }
  if (!wire::ParseKnowledgeLevel(options.knowledge).ok()) {
    return Usage(err, absl::StrCat("--knowledge '", options.knowledge,
                                   "': expected none, templates or contract"));
  }
  auto context = ParseContextPolicy(args->Get("context"));
  if (!context.ok()) return Usage(err, std::string(context.status().message()));
  options.context = *context;

  struct IntFlag {
    const char* name;
    int64_t min;
    int64_t* value;
  };
  int64_t turns = 0, trajectories = 0, concurrency = 0, max_tokens = 0, thinking = 0, retries = 0,
          provider_concurrency = 0;
  for (const IntFlag& flag : std::vector<IntFlag>{{"turns", 1, &turns},
                                                  {"trajectories", 1, &trajectories},
                                                  {"concurrency", 1, &concurrency},
                                                  {"max-tokens", 0, &max_tokens},
                                                  {"thinking-budget", 0, &thinking},
                                                  {"retries", 1, &retries}}) {
    auto value = args->GetInt(flag.name, 0);
    if (!value.ok() || *value < flag.min) {
      return Usage(err, absl::StrCat("--", flag.name, ": a whole number >= ", flag.min));
    }
    *flag.value = *value;
  }
  auto provider_limit = args->GetInt("provider-concurrency", concurrency);
  if (!provider_limit.ok() || *provider_limit < 1) {
    return Usage(err, "--provider-concurrency: a whole number >= 1");
  }
  provider_concurrency = *provider_limit;
  struct DoubleFlag {
    const char* name;
    double* value;
  };
  double target = 0, request_timeout = 0, retry_base = 0, verdict_timeout = 0;
  for (const DoubleFlag& flag :
       std::vector<DoubleFlag>{{"target-speedup", &target},
                               {"request-timeout-seconds", &request_timeout},
                               {"retry-base-seconds", &retry_base},
                               {"verdict-timeout-seconds", &verdict_timeout}}) {
    auto value = args->GetDouble(flag.name, 0);
    if (!value.ok() || *value < 0)
      return Usage(err, absl::StrCat("--", flag.name, ": a number >= 0"));
    *flag.value = *value;
  }
  options.turns = static_cast<int>(turns);
  options.trajectories = static_cast<int>(trajectories);
  options.concurrency = static_cast<int>(concurrency);
  options.target_speedup = target;
  options.max_tokens = max_tokens;
  options.retry.max_attempts = static_cast<int>(retries);
  options.retry.base_seconds = retry_base;
  options.verdict_timeout_seconds = verdict_timeout > 0 ? verdict_timeout : 3600;

  ProviderOptions provider_options;
  provider_options.spec = options.model;
  provider_options.base_url = args->Get("base-url");
  provider_options.max_tokens = max_tokens;
  provider_options.thinking_budget = thinking;
  provider_options.timeout_seconds = request_timeout > 0 ? request_timeout : 600;
  provider_options.concurrency = static_cast<int>(provider_concurrency);
  if (args->Has("temperature")) {
    auto temperature = args->GetDouble("temperature", 0);
    if (!temperature.ok() || *temperature < 0) {
      return Usage(err, "--temperature: a number >= 0");
    }
    provider_options.temperature = *temperature;
    options.temperature = *temperature;
  }
  auto provider = MakeProvider(provider_options);
  if (!provider.ok()) {
    err << "ptxbench run: " << provider.status().message() << "\n";
    return kExitUsage;
  }

  ConnectionOptions connection = ConnectionFrom(*args);
  std::unique_ptr<EmbeddedStack> stack;
  if (connection.server.empty()) {
    StackOptions stack_options;
    stack_options.data_dir = args->Get("stack-dir", options.out_dir + "/stack");
    stack_options.tasks_dir = args->Get("tasks-dir");
    err << "ptxbench run: no --server or PTXBENCH_SERVER: starting the embedded stack in "
        << stack_options.data_dir << "\n";
    auto started = EmbeddedStack::Start(stack_options);
    if (!started.ok()) {
      err << "ptxbench run: " << started.status().message() << "\n";
      return kExitInfrastructure;
    }
    stack = std::move(*started);
    connection.server = stack->address();
    connection.tls = false;
    if (!options.compile_only && stack->gpu_arch() != options.arch) {
      err << "ptxbench run: the embedded stack has no GPU worker for " << options.arch << " ("
          << (stack->gpu_arch().empty() ? stack->gpu_note()
                                        : absl::StrCat("its GPU is ", stack->gpu_arch()))
          << "): pass --compile-only, or --server of a server with such a worker\n";
      return kExitUsage;
    }
  }
  options.server_label = stack != nullptr ? "embedded" : connection.server;
  auto evaluator = EvaluationClient::Connect(connection);
  if (!evaluator.ok()) {
    err << "ptxbench run: " << evaluator.status().message() << "\n";
    return kExitUsage;
  }
  Progress progress(options.tasks, options.trajectories, isatty(STDERR_FILENO) == 1, err);
  auto summary = RunTrajectories(options, **provider, **evaluator, progress);
  progress.Close();
  if (stack != nullptr) (void)stack->Stop();
  if (!summary.ok()) {
    err << "ptxbench run: " << summary.status().message() << "\n";
    return IsTransient(summary.status()) ? kExitInfrastructure : kExitUsage;
  }
  out << "ptxbench run: " << options.model << " on " << options.arch << "/" << options.knowledge
      << ": " << summary->trajectories << " trajectories: ";
  // A compile-only run can never reach TIC: its outcomes are compiled or not.
  if (options.compile_only) {
    out << "compiled " << summary->compiled << ", not compiled " << summary->not_compiled;
  } else {
    out << "TIC " << summary->tic << ", correct " << summary->correct << ", failed "
        << summary->failed;
  }
  out << ", stopped by infrastructure " << summary->infrastructure_stopped << "; "
      << summary->turns_run << " turns run, " << summary->turns_resumed << " already done\n";
  if (summary->skipped > 0) {
    out << summary->skipped << " trajectories skipped: the replay has no replies for them\n";
  }
  for (const auto& [task, counts] : progress.counts()) {
    out << "  " << Progress::Line(task, counts, 24) << "\n";
  }
  out << "trajectories: " << options.out_dir << "\n";
  for (const std::string& problem : summary->problems) out << "problem: " << problem << "\n";
  if (summary->infrastructure_stopped > 0) {
    out << summary->infrastructure_stopped
        << " trajectories stopped on infrastructure failures; run the same command again to "
           "resume them\n";
    return kExitInfrastructure;
  }
  return summary->problems.empty() ? kExitPass : kExitInfrastructure;
}

}  // namespace ptxbench::client::run
