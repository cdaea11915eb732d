#include "client/run/run_command.h"

#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/command_support.h"
#include "client/exit_codes.h"
#include "client/run/embedded_stack.h"
#include "client/run/evaluation_client.h"
#include "client/run/progress.h"
#include "client/run/provider.h"
#include "client/run/run_loop.h"
#include "common/build_info.h"
#include "common/cli_args.h"
#include "common/sha256.h"
#include "proto/wire_names.h"

namespace ptxbench::client::run {
namespace {

// The shell's code for a process ended by Ctrl-C (128 + SIGINT).
constexpr int kExitInterrupted = 130;

const Verb& RunVerb() {
  static const auto* verb = new Verb{
      "run",
      "--model PROVIDER:MODEL --task ID[,ID...] --out RUN_DIR",
      "Lets a model write kernels over several turns, each verdict as its feedback; with no "
      "--server (or PTXBENCH_SERVER) it starts the embedded stack itself. An interrupted run "
      "resumes with the same command.",
      {
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
           "evaluate the compile stage only (no GPU needed; no turn reaches TIC, so every turn "
           "runs)"},
          {"base-url", true, "API base URL (or OPENAI_BASE_URL / ANTHROPIC_BASE_URL)"},
          {"temperature", true, "sampling temperature (default: the provider's)"},
          {"max-tokens", true, "output token limit per reply (default: the provider's)", "0"},
          {"thinking-budget", true, "anthropic: extended thinking budget in tokens (0: off)", "0"},
          {"request-timeout-seconds", true, "one model request's time limit", "600"},
          {"provider-concurrency", true,
           "model requests in flight at once (default: --concurrency)"},
          {"retries", true,
           "attempts per model call or evaluation before it counts as an infrastructure "
           "failure",
           "6"},
          {"retry-base-seconds", true, "first backoff wait; doubled per attempt, with jitter", "2"},
          {"verdict-timeout-seconds", true, "longest wait for one verdict", "3600"},
          {"stack-dir", true,
           "embedded stack's data folder, its PostgreSQL cluster included (default: a folder "
           "per RUN_DIR under $PTXBENCH_STATE_DIR, else $XDG_STATE_HOME/ptxbench, "
           "~/.local/state/ptxbench, or /var/lib/ptxbench as root)"},
          {"tasks-dir", true,
           "embedded stack's task catalog (default: ./tasks or the source tree)"},
      },
      /*connects=*/true,
      /*default_server=*/""};
  return *verb;
}

// Where the embedded stack keeps its state when --stack-dir is not given: apart from RUN_DIR,
// which holds results that are copied, archived and committed (a PostgreSQL cluster is ~40 MB
// of binary files that belong in none of those), and one folder per RUN_DIR, so that runs into
// different folders can run at once and a resumed run finds its own stack.
std::string DefaultStackDir(const std::string& run_dir) {
  std::string base;
  if (const char* chosen = std::getenv("PTXBENCH_STATE_DIR"); chosen != nullptr && *chosen) {
    base = chosen;
  } else if (geteuid() == 0) {
    // root's home is closed to 'postgres', which runs the embedded cluster for root.
    base = "/var/lib/ptxbench";
  } else if (const char* state = std::getenv("XDG_STATE_HOME"); state != nullptr && *state) {
    base = absl::StrCat(state, "/ptxbench");
  } else if (const char* home = std::getenv("HOME"); home != nullptr && *home) {
    base = absl::StrCat(home, "/.local/state/ptxbench");
  } else {
    base = "/tmp/ptxbench-" + std::to_string(geteuid());
  }
  std::error_code error;
  const std::string absolute = std::filesystem::absolute(run_dir, error).lexically_normal();
  return absl::StrCat(base, "/stack-", Sha256Hex(absolute).substr(0, 12));
}

// The command line that resumes this run, for the message after an interruption.
std::string ResumeCommand(const std::vector<std::string>& raw) {
  std::vector<std::string> quoted = {"ptxbench", "run"};
  for (const std::string& arg : raw) {
    const bool plain = arg.find_first_not_of(
                           "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                           "0123456789-_=.,:/@+") == std::string::npos;
    quoted.push_back(plain && !arg.empty() ? arg : absl::StrCat("'", arg, "'"));
  }
  return absl::StrJoin(quoted, " ");
}

std::atomic<int> g_stop_signal{0};
void OnStopSignal(int signal) {
  if (g_stop_signal.exchange(signal) != 0) {
    // A second Ctrl-C: the user wants out now; trajectory files are consistent at every line.
    _exit(kExitInterrupted);
  }
}

// "tokens per turn: input 5000, output 1500, reasoning 700 (or: not reported)".
std::string TokenLine(const std::string& out_dir, const std::string& model) {
  absl::StatusOr<std::vector<std::string>> files = FindTrajectoryFiles(out_dir);
  if (!files.ok()) return "";
  int64_t turns = 0, input = 0, output = 0, reasoning = 0, reasoning_turns = 0;
  for (const std::string& file : *files) {
    absl::StatusOr<Trajectory> trajectory = ReadTrajectory(file);
    if (!trajectory.ok() || trajectory->header.run.model != model) continue;
    for (const TurnRecord& turn : trajectory->turns) {
      if (turn.infra_failed) continue;
      ++turns;
      input += turn.usage.input_tokens;
      output += turn.usage.output_tokens;
      if (turn.usage.reasoning_tokens.has_value()) {
        reasoning += *turn.usage.reasoning_tokens;
        ++reasoning_turns;
      }
    }
  }
  if (turns == 0) return "";
  return absl::StrFormat("tokens per turn: input %d, output %d, reasoning %s", input / turns,
                         output / turns,
                         reasoning_turns > 0 ? absl::StrCat(reasoning / reasoning_turns)
                                             : std::string("not reported by the provider"));
}

}  // namespace

int RunCommand(const std::vector<std::string>& raw, std::ostream& out, std::ostream& err) {
  const Verb& verb = RunVerb();
  int exit_code = 0;
  std::optional<ParsedArgs> args = ParseVerb(verb, raw, out, err, &exit_code);
  if (!args.has_value()) return exit_code;
  auto usage = [&](const std::string& problem) { return UsageError(verb, problem, err); };
  if (!args->positional().empty()) {
    return usage(absl::StrCat("unexpected argument '", args->positional()[0], "'"));
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
  if (options.model.empty()) return usage("--model is required");
  if (options.tasks.empty()) return usage("--task is required");
  if (options.out_dir.empty()) return usage("--out is required");
  if (!wire::ParseArch(options.arch).ok()) {
    return usage(absl::StrCat("--arch '", options.arch, "': expected sm_90a or sm_100a"));
  }
  if (!wire::ParseKnowledgeLevel(options.knowledge).ok()) {
    return usage(absl::StrCat("--knowledge '", options.knowledge,
                              "': expected none, templates or contract"));
  }
  auto context = ParseContextPolicy(args->Get("context"));
  if (!context.ok()) return usage(std::string(context.status().message()));
  options.context = *context;

  struct IntFlag {
    const char* name;
    int64_t min;
    int64_t* value;
  };
  int64_t turns = 0, trajectories = 0, concurrency = 0, max_tokens = 0, thinking = 0, retries = 0;
  for (const IntFlag& flag : std::vector<IntFlag>{{"turns", 1, &turns},
                                                  {"trajectories", 1, &trajectories},
                                                  {"concurrency", 1, &concurrency},
                                                  {"max-tokens", 0, &max_tokens},
                                                  {"thinking-budget", 0, &thinking},
                                                  {"retries", 1, &retries}}) {
    auto value = args->GetInt(flag.name, 0);
    if (!value.ok() || *value < flag.min) {
      return usage(absl::StrCat("--", flag.name, ": a whole number >= ", flag.min));
    }
    *flag.value = *value;
  }
  auto provider_limit = args->GetInt("provider-concurrency", concurrency);
  if (!provider_limit.ok() || *provider_limit < 1) {
    return usage("--provider-concurrency: a whole number >= 1");
  }
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
    if (!value.ok() || *value < 0) return usage(absl::StrCat("--", flag.name, ": a number >= 0"));
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
  provider_options.concurrency = static_cast<int>(*provider_limit);
  if (args->Has("temperature")) {
    auto temperature = args->GetDouble("temperature", 0);
    if (!temperature.ok() || *temperature < 0) return usage("--temperature: a number >= 0");
    provider_options.temperature = *temperature;
    options.temperature = *temperature;
  }
  // Before any stack starts: a missing key is a minute of start-up wasted otherwise.
  if (absl::Status ready = CheckProviderCredentials(provider_options); !ready.ok()) {
    err << "ptxbench run: " << ready.message() << "\n";
    return kExitUsage;
  }
  auto provider = MakeProvider(provider_options);
  if (!provider.ok()) {
    err << "ptxbench run: " << provider.status().message() << "\n";
    return kExitUsage;
  }
  absl::StatusOr<Connection> connection = ConnectionOf(*args, err);
  if (!connection.ok()) return usage(std::string(connection.status().message()));

  // Ctrl-C (and SIGTERM, as Slurm's scancel sends) stop the run cleanly: nothing half-done is
  // written, the embedded stack is drained and stopped, and the resume command is printed.
  std::atomic<bool> interrupted{false};
  options.interrupted = &interrupted;
  g_stop_signal = 0;
  struct sigaction action {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  struct sigaction old_int {
  }, old_term{};
  sigaction(SIGINT, &action, &old_int);
  sigaction(SIGTERM, &action, &old_term);

  std::unique_ptr<EmbeddedStack> stack;
  std::mutex stack_mutex;  // The watcher below stops the stack while the run may use it.
  std::atomic<bool> run_over{false};
  std::thread watcher([&] {
    while (!run_over) {
      if (g_stop_signal != 0) {
        interrupted = true;
        err << "\nptxbench run: interrupted; stopping (finished turns are saved in "
            << options.out_dir << ", the turns in flight are dropped)\n";
        err.flush();
        {
          std::lock_guard<std::mutex> lock(stack_mutex);
          if (stack != nullptr) (void)stack->Stop();
        }
        err << "ptxbench run: stopped. Resume with the same command:\n  " << ResumeCommand(raw)
            << "\n";
        err.flush();
        out.flush();
        // The run's threads may sit in a model call for minutes: end the process here. Every
        // trajectory line is written whole and fsync'd, and a torn last line is cut on resume.
        _exit(kExitInterrupted);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  auto finish = [&](int code) {
    run_over = true;
    watcher.join();
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    return code;
  };

  if (!connection->server_given) {
    StackOptions stack_options;
    stack_options.data_dir =
        args->Has("stack-dir") ? args->Get("stack-dir") : DefaultStackDir(options.out_dir);
    stack_options.tasks_dir = args->Get("tasks-dir");
    stack_options.notes = &err;
    err << "ptxbench run: no --server or PTXBENCH_SERVER: starting the embedded stack in "
        << stack_options.data_dir << "\n";
    auto started = EmbeddedStack::Start(stack_options);
    if (!started.ok()) {
      err << "ptxbench run: " << started.status().message() << "\n";
      return finish(kExitInfrastructure);
    }
    {
      std::lock_guard<std::mutex> lock(stack_mutex);
      stack = std::move(*started);
    }
    connection->dial.address = stack->address();
    connection->dial.tls = false;
    connection->dial.tls_ca_file.clear();
    if (!options.compile_only && stack->gpu_arch() != options.arch) {
      err << "ptxbench run: the embedded stack has no GPU worker for " << options.arch << " ("
          << (stack->gpu_arch().empty() ? stack->gpu_note()
                                        : absl::StrCat("its GPU is ", stack->gpu_arch()))
          << "): pass --compile-only, or --server of a server with such a worker\n";
      std::lock_guard<std::mutex> lock(stack_mutex);
      (void)stack->Stop();
      return finish(kExitUsage);
    }
  }
  options.server_label = stack != nullptr ? "embedded" : connection->dial.address;
  options.client_version = std::string(kHarnessVersion);
  auto evaluator = EvaluationClient::Connect(*connection);
  if (!evaluator.ok()) {
    err << "ptxbench run: " << evaluator.status().message() << "\n";
    return finish(kExitUsage);
  }
  Progress progress(options.tasks, options.trajectories, options.turns, isatty(STDERR_FILENO) == 1,
                    err);
  auto summary = RunTrajectories(options, **provider, **evaluator, progress);
  progress.Close();
  auto stop_stack = [&] {
    std::lock_guard<std::mutex> lock(stack_mutex);
    if (stack != nullptr) (void)stack->Stop();
  };
  if (!summary.ok()) {
    const absl::Status& status = summary.status();
    err << "ptxbench run: " << status.message() << "\n";
    if (absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status)) {
      err << "hint: is ptxbench-server running at " << connection->dial.address
          << "? set --server or PTXBENCH_SERVER (or leave both unset for the embedded stack)\n";
    }
    if (absl::IsInvalidArgument(status) || absl::IsNotFound(status)) {
      // An unknown task id is the usual cause: say which ones exist.
      if (auto ids = (*evaluator)->TaskIds(); ids.ok() && !ids->empty()) {
        err << "hint: the server's tasks are " << absl::StrJoin(*ids, ", ") << "\n";
      }
      stop_stack();
      return finish(kExitUsage);
    }
    stop_stack();
    return finish(IsTransient(status) ? kExitInfrastructure : kExitUsage);
  }
  stop_stack();
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
      << summary->turns_run << " turns run, " << summary->turns_resumed << " already done, "
      << progress.retries() << " retries\n";
  if (summary->skipped > 0) {
    out << summary->skipped << " trajectories skipped: the replay has no replies for them\n";
  }
  for (const auto& [task, counts] : progress.counts()) {
    out << "  " << Progress::Line(task, counts) << "\n";
  }
  out << "  " << progress.StatusLine() << "\n";
  if (const std::string tokens = TokenLine(options.out_dir, options.model); !tokens.empty()) {
    out << "  " << tokens << "\n";
  }
  out << "trajectories: " << options.out_dir << "\n";
  for (const std::string& problem : summary->problems) out << "problem: " << problem << "\n";
  if (summary->infrastructure_stopped > 0) {
    out << summary->infrastructure_stopped
        << " trajectories stopped on infrastructure failures; run the same command again to "
           "resume them\n";
    return finish(kExitInfrastructure);
  }
  return finish(summary->problems.empty() ? kExitPass : kExitInfrastructure);
}

}  // namespace ptxbench::client::run
