// Real processes for integration tests: start a program with its output in a log file, send it
// signals, wait for a line in its log, run a command to completion and capture its output.
#ifndef PTXBENCH_TESTS_SUPPORT_PROCESS_H_
#define PTXBENCH_TESTS_SUPPORT_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace ptxbench::testing {

class ChildProcess {
 public:
  // Starts argv[0] with stdout and stderr appended to `log_path`. Returns nullptr when fork
  // fails; exec failures show as exit code 127.
  static std::unique_ptr<ChildProcess> Start(const std::vector<std::string>& argv,
                                             const std::string& log_path);
  ~ChildProcess();  // SIGKILLs and reaps a process still running.
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_path_; }
  std::string Log() const;
  void Signal(int signal);
  // Waits up to `timeout` for the process to end; its wait status, or nullopt if still running.
  std::optional<int> Wait(absl::Duration timeout);
  // Waits for a log line containing `needle`; the whole line, or nullopt at the timeout.
  std::optional<std::string> WaitForLogLine(const std::string& needle, absl::Duration timeout);

 private:
  ChildProcess(pid_t pid, std::string log_path) : pid_(pid), log_path_(std::move(log_path)) {}
  pid_t pid_;
  std::string log_path_;
  bool reaped_ = false;
};

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
