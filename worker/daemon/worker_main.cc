#include "worker/daemon/worker_main.h"

#include <spdlog/spdlog.h>

#include <csignal>
#include <iostream>
#include <thread>

#include "common/cli_args.h"
#include "worker/daemon/engine_executor.h"
#include "worker/daemon/worker.h"

namespace ptxbench::worker {
namespace {

std::atomic<int> g_signal{0};

void OnSignal(int signal) { g_signal = signal; }

const std::vector<FlagSpec>& Flags() {
  static const auto* flags = new std::vector<FlagSpec>{
      {"server", true, "scheduler address HOST:PORT (or PTXBENCH_SERVER)", "127.0.0.1:50051"},
      {"token", true, "worker-role bearer token (or PTXBENCH_TOKEN)"},
      {"tls", false, "connect with TLS"},
      {"tls-ca", true, "PEM roots for the server certificate"},
      {"gpu", true, "CUDA device ordinal this daemon is pinned to", "0"},
      {"compile-only", false, "take compile jobs of every arch; no GPU needed"},
      {"metrics-listen", true, "HOST:PORT for Prometheus /metrics (empty: none)"},
      {"tasks-dir", true, "the task definitions (must match the server's versions)", "tasks"},
      {"evaluator", true, "path of ptxbench-evaluator (default: beside this binary)"},
      {"hostname", true, "name recorded in verdicts (default: the host name)"},
      {"help", false, "print this help"},
  };
  return *flags;
}

}  // namespace

int WorkerMain(const std::vector<std::string>& raw) {
  auto args = ParseArgs(raw, Flags());
  if (!args.ok() || args->GetBool("help") || !args->positional().empty()) {
    std::ostream& out = args.ok() && args->GetBool("help") ? std::cout : std::cerr;
    if (!args.ok()) out << "ptxbench-worker: " << args.status().message() << "\n";
    if (args.ok() && !args->positional().empty()) {
      out << "ptxbench-worker: unexpected argument '" << args->positional()[0] << "'\n";
    }
    out << "usage: ptxbench-worker [flags]\n" << FlagHelp(Flags());
    return args.ok() && args->GetBool("help") ? 0 : 2;
  }
  auto gpu = args->GetInt("gpu", 0);
  if (!gpu.ok()) {
    std::cerr << "ptxbench-worker: " << gpu.status().message() << "\n";
    return 2;
  }
  WorkerOptions options;
  options.server = args->GetOrEnv("server", "PTXBENCH_SERVER");
  options.token = args->GetOrEnv("token", "PTXBENCH_TOKEN");
  options.tls = args->GetBool("tls") || args->Has("tls-ca");
  options.tls_ca_file = args->Get("tls-ca");
  options.gpu = static_cast<int>(*gpu);
  options.compile_only = args->GetBool("compile-only");
  options.metrics_listen = args->Get("metrics-listen");
  options.hostname = args->Get("hostname");

  EngineExecutorOptions executor_options;
  executor_options.tasks_dir = args->Get("tasks-dir");
  executor_options.evaluator_path = args->Get("evaluator");
  executor_options.gpu = options.gpu;
  executor_options.compile_only = options.compile_only;
  auto executor = CreateEngineExecutor(executor_options);
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
