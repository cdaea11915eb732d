// ptxbench-worker's command line, as a library function so tests run exactly what ships.
#ifndef PTXBENCH_WORKER_DAEMON_WORKER_MAIN_H_
#define PTXBENCH_WORKER_DAEMON_WORKER_MAIN_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/daemon/engine_executor.h"
#include "worker/daemon/worker.h"

namespace ptxbench::worker {

// What the flags ask for: the daemon's options (the connection among them) and the executor's.
struct WorkerConfig {
  WorkerOptions worker;
  EngineExecutorOptions executor;
};

// Parses ptxbench-worker's flags (and PTXBENCH_SERVER, PTXBENCH_TOKEN_FILE, PTXBENCH_TOKEN).
// Errors name the flag; warnings (a token on the command line) go to `warnings`.
absl::StatusOr<WorkerConfig> ParseWorkerFlags(const std::vector<std::string>& args,
                                              std::ostream& warnings);

// Parses flags, builds the executor for this machine, runs the daemon until SIGTERM/SIGINT
// (graceful drain) and returns the process exit code.
int WorkerMain(const std::vector<std::string>& args);

}  // namespace ptxbench::worker

#endif  // PTXBENCH_WORKER_DAEMON_WORKER_MAIN_H_
