// Real processes for integration tests and benchmarks: start a program with its output in a
// log file, send it signals, stop it (SIGTERM, then SIGKILL), wait for a line in its log (and
// for ptxbench-server's serving address), run a command to completion and capture its output.
// The one fork + exec helper of tests/ and bench/ (library ptxbench_test_process: no Catch2,
// no database, so the benchmarks link it too).
#ifndef PTXBENCH_TESTS_SUPPORT_PROCESS_H_
#define PTXBENCH_TESTS_SUPPORT_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace ptxbench::testing {

struct ChildOptions {
  // A process group of its own (setpgid), so that signals meant for the test runner's group
  // (a terminal's Ctrl-C, a CI runner's group kill) do not reach it. A benchmark run from a
  // terminal says false: Ctrl-C then stops its servers and workers with it, where an orphan
  // would otherwise outlive the run (std::exit and a signal run no destructor).
  bool own_process_group = true;
};

class ChildProcess {
 public:
  // Starts argv[0] (a path: no PATH search) with stdout and stderr appended to `log_path` and
  // standard input from /dev/null. Returns nullptr when fork fails; a program that cannot be
  // executed exits with 127 (126 when the log cannot be opened).
  static std::unique_ptr<ChildProcess> Start(const std::vector<std::string>& argv,
                                             const std::string& log_path,
                                             const ChildOptions& options = {});
  ~ChildProcess();  // SIGKILLs and reaps a process still running.
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_path_; }
  std::string Log() const;
  void Signal(int signal);
  // Waits up to `timeout` for the process to end; its wait status, or nullopt if still running.
  std::optional<int> Wait(absl::Duration timeout);
  // Whether it has ended (and was reaped by Wait, WaitForLogLine or Stop).
  bool ended() const { return reaped_; }
  // SIGTERM (a graceful stop for our programs), up to `grace` for it to end, then SIGKILL; its
  // wait status.
  int Stop(absl::Duration grace);
  // Waits for a log line containing `needle`; the whole line, or nullopt at the timeout or when
  // the process ended without writing it.
  std::optional<std::string> WaitForLogLine(const std::string& needle, absl::Duration timeout);

 private:
  ChildProcess(pid_t pid, std::string log_path) : pid_(pid), log_path_(std::move(log_path)) {}
  // Reaps the process if it has ended; whether it has.
  bool Reap(int options);
  pid_t pid_;
  std::string log_path_;
  bool reaped_ = false;
  int wait_status_ = 0;
};

// Waits up to `timeout` for ptxbench-server's "ptxbench-server serving grpc=HOST:PORT ..." line
// in `server`'s log; the HOST:PORT, or "" when the line did not come (the log says why).
std::string WaitForServingAddress(ChildProcess& server, absl::Duration timeout);

struct CommandResult {
  int exit_code = -1;  // -1 when killed at the timeout or by a signal.
  std::string output;  // stdout and stderr together.
};

// Runs argv to completion (killed at `timeout`) and captures its output.
CommandResult RunCommand(const std::vector<std::string>& argv, absl::Duration timeout);

// A fresh empty folder under $TMPDIR (or /tmp), removed by the caller if it cares.
std::string MakeTempDir(const std::string& prefix);

}  // namespace ptxbench::testing

#endif  // PTXBENCH_TESTS_SUPPORT_PROCESS_H_
