#include "worker/daemon/worker_main.h"

#include <spdlog/spdlog.h>

#include <csignal>
#include <iostream>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/build_info.h"
#include "common/cli_args.h"
#include "common/status.h"
#include "proto/dial.h"
#include "worker/daemon/engine_executor.h"
#include "worker/daemon/worker.h"
#include "worker/engine/gpu/protocol_codec.h"

namespace ptxbench::worker {
namespace {

std::atomic<int> g_signal{0};

void OnSignal(int signal) { g_signal = signal; }

const std::vector<FlagSpec>& Flags() {
  static const auto* flags = [] {
    auto* all = new std::vector<FlagSpec>(ConnectionFlags());
    const std::vector<FlagSpec> own = {
        {"gpu", true, "CUDA device ordinal this daemon is pinned to", "0"},
        {"compile-only", false, "take compile jobs of every arch; no GPU needed"},
        {"gpu-pipeline", true,
         "jobs a GPU worker holds at once: 1 (one at a time) or 2 (the next job compiles and "
         "starts up while the current one runs on the GPU; a FIFO gate keeps the GPU stages "
         "one job at a time: docs/measurement.md, \"Exclusivity of the measuring phases\")",
         "1"},
        {"metrics-listen", true, "HOST:PORT for Prometheus /metrics (empty: none)"},
        {"gpu-lock-dir", true,
         "directory of the per-GPU lock that keeps a second GPU worker off this GPU "
         "(default: /run/lock when writable, else /tmp)"},
        {"tasks-dir", true,
         "the task definitions (must match the server's versions; default: ./tasks or the "
         "source tree's)"},
        {"evaluator", true, "path of ptxbench-evaluator (default: beside this binary)"},
        {"baseline", true,
         "which library algorithm candidates are timed against: first_heuristic (the "
         "library's own first choice) or fastest (the fastest of its top candidates, chosen "
         "once per task on this worker, the default; docs/measurement.md, \"A fair baseline\")",
         "fastest"},
        {"artifact-verify-fraction", true,
         "share of the compile-only workers' compile artifacts this GPU worker compiles again "
         "and compares instead of using, drawn at random: 1 always (compile-only hosts not "
         "trusted), 0 never (a forged artifact is then never caught; docs/architecture.md, "
         "\"Compile artifact reuse\")",
         "0.125"},
        {"hostname", true, "name recorded in verdicts (default: the host name)"},
        {"version", false, "print the harness version, commit and CUDA toolkit and exit"},
        {"help", false, "print this help and exit"},
    };
    all->insert(all->end(), own.begin(), own.end());
    return all;
  }();
  return *flags;
}

}  // namespace

absl::StatusOr<WorkerConfig> ParseWorkerFlags(const std::vector<std::string>& raw,
                                              std::ostream& warnings) {
  ASSIGN_OR_RETURN(ParsedArgs args, ParseArgs(raw, Flags()));
  if (!args.positional().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", args.positional()[0], "'"));
  }
  ASSIGN_OR_RETURN(int64_t gpu, args.GetInt("gpu", 0));
  if (gpu < 0) return absl::InvalidArgumentError("--gpu: a device ordinal >= 0");
  ASSIGN_OR_RETURN(Connection connection, ConnectionFromFlags(args, warnings));
  WorkerConfig config;
  WorkerOptions& options = config.worker;
  options.server = connection.dial.address;
  options.token = connection.token;
  options.tls = connection.dial.tls;
  options.tls_ca_file = connection.dial.tls_ca_file;
  options.gpu = static_cast<int>(gpu);
  options.compile_only = args.GetBool("compile-only");
  ASSIGN_OR_RETURN(int64_t pipeline, args.GetInt("gpu-pipeline", 1));
  if (pipeline < 1 || pipeline > 2) {
    return absl::InvalidArgumentError("--gpu-pipeline: 1 or 2");
  }
  if (options.compile_only && pipeline != 1) {
    return absl::InvalidArgumentError("--gpu-pipeline is for GPU workers, not --compile-only");
  }
  options.gpu_pipeline = static_cast<int>(pipeline);
  options.metrics_listen = args.Get("metrics-listen");
  options.gpu_lock_dir = args.Get("gpu-lock-dir");
  options.hostname = args.Get("hostname");
  EngineExecutorOptions& executor = config.executor;
  executor.tasks_dir = args.Has("tasks-dir") ? args.Get("tasks-dir") : SourceTreeDir("tasks");
  executor.evaluator_path = args.Get("evaluator");
  const std::string baseline = args.Has("baseline") ? args.Get("baseline") : "fastest";
  std::optional<gpu::BaselineSelection> selection =
      gpu::EnumFromName<gpu::BaselineSelection>(baseline);
  if (!selection.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--baseline: '", baseline, "' is not one of first_heuristic, fastest"));
  }
  executor.baseline_selection = *selection;
  ASSIGN_OR_RETURN(executor.artifact_verify_fraction,
                   args.GetDouble("artifact-verify-fraction", executor.artifact_verify_fraction));
  if (!(executor.artifact_verify_fraction >= 0 && executor.artifact_verify_fraction <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--artifact-verify-fraction: a share from 0 to 1, got ",
                     args.Get("artifact-verify-fraction")));
  }
  if (executor.artifact_verify_fraction == 0 && !options.compile_only) {
    warnings << "ptxbench-worker: --artifact-verify-fraction 0: compile artifacts of other "
                "workers are used without ever being compiled again, so a compile-only worker "
                "that forges one is never caught (docs/architecture.md, \"Compile artifact "
                "reuse\")\n";
  }
  executor.gpu = options.gpu;
  executor.compile_only = options.compile_only;
  executor.gpu_pipeline = options.gpu_pipeline;
  return config;
}

int WorkerMain(const std::vector<std::string>& raw) {
  for (const std::string& arg : raw) {
    if (arg == "--") break;
    if (arg == "--help" || arg == "-h") {
      std::cout << "usage: ptxbench-worker [flags]\n" << FlagHelp(Flags());
      return 0;
    }
    if (arg == "--version") {
      std::cout << VersionLine("ptxbench-worker") << "\n";
      return 0;
    }
  }
  absl::StatusOr<WorkerConfig> config = ParseWorkerFlags(raw, std::cerr);
  if (!config.ok()) {
    std::cerr << "ptxbench-worker: " << config.status().message() << "\n"
              << "usage: ptxbench-worker [flags]\n"
              << FlagHelp(Flags());
    return 2;
  }
  const WorkerOptions& options = config->worker;
  auto executor = CreateEngineExecutor(config->executor);
  if (!executor.ok()) {
    std::cerr << "ptxbench-worker: " << executor.status().message() << "\n";
    return 1;
  }
  auto worker = Worker::Create(options, std::move(*executor));
  if (!worker.ok()) {
    std::cerr << "ptxbench-worker: " << worker.status().message() << "\n";
    return 2;
  }
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  // Signals only set a flag: the drain itself takes locks and RPCs, which a signal handler
  // must not. A watcher thread turns the flag into GracefulStop, also while Start() is still
  // retrying its registration with a server that is not up yet.
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    while (!done) {
      if (g_signal != 0) {
        (*worker)->GracefulStop();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  absl::Status started = (*worker)->Start();
  if (started.ok()) {
    if ((*worker)->metrics_port() != 0) {
      spdlog::info("worker {}: metrics on port {}", (*worker)->worker_id(),
                   (*worker)->metrics_port());
    }
    (*worker)->Wait();
  }
  done = true;
  watcher.join();
  if (!started.ok()) {
    std::cerr << "ptxbench-worker: " << started.message() << "\n";
    return g_signal != 0 ? 0 : 1;
  }
  if (!(*worker)->healthy()) return 4;
  return 0;
}

}  // namespace ptxbench::worker
