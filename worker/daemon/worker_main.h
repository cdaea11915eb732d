// ptxbench-worker's command line, as a library function so tests run exactly what ships.
#ifndef PTXBENCH_WORKER_DAEMON_WORKER_MAIN_H_
#define PTXBENCH_WORKER_DAEMON_WORKER_MAIN_H_

#include <string>
#include <vector>

namespace ptxbench::worker {

// Parses flags, builds the executor for this machine, runs the daemon until SIGTERM/SIGINT
// (graceful drain) and returns the process exit code.
int WorkerMain(const std::vector<std::string>& args);

}  // namespace ptxbench::worker

#endif  // PTXBENCH_WORKER_DAEMON_WORKER_MAIN_H_
