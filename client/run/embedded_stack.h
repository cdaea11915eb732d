// The stack `ptxbench run` starts for itself when no server is given, so one machine needs no
// set-up: ptxbench-server with its private PostgreSQL under a data folder, a compile-only
// worker always, and a GPU worker when `nvidia-smi -L` lists a GPU and the worker registers
// (it refuses a GPU it cannot use, and says why). The programs are the real binaries found
// next to the running `ptxbench`, started as child processes as scripts/quickstart starts
// them; they get SIGTERM when this process ends, even when it is killed.
#ifndef PTXBENCH_CLIENT_RUN_EMBEDDED_STACK_H_
#define PTXBENCH_CLIENT_RUN_EMBEDDED_STACK_H_

#include <sys/types.h>

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ptxbench::client::run {

struct StackOptions {
  std::string data_dir;           // Server state and the programs' logs.
  std::string bin_dir;            // Empty: the folder of the running executable.
  std::string tasks_dir;          // Empty: ./tasks, else the source tree's tasks/.
  std::string migrations_dir;     // Empty: ./migrations, else the source tree's.
  bool use_gpu = true;            // Start a GPU worker when a GPU is present.
  std::ostream* notes = nullptr;  // Where waits are explained as they begin (may be null).
};

class EmbeddedStack {
 public:
  // Starts everything the way scripts/quickstart does and waits until the server serves and
  // the workers registered. Errors carry the tail of the failing program's log.
  static absl::StatusOr<std::unique_ptr<EmbeddedStack>> Start(const StackOptions& options);
  ~EmbeddedStack();  // Stop().
  EmbeddedStack(const EmbeddedStack&) = delete;
  EmbeddedStack& operator=(const EmbeddedStack&) = delete;

  const std::string& address() const { return address_; }
  // The arch of the registered GPU worker ("sm_90a"); empty when the stack has none.
  const std::string& gpu_arch() const { return gpu_arch_; }
  // Why there is no GPU worker, in one line ("" when there is one).
  const std::string& gpu_note() const { return gpu_note_; }
  const std::string& data_dir() const { return options_.data_dir; }

  // Drains the workers, then stops the server (SIGTERM each; SIGKILL after 60 s). Idempotent.
  absl::Status Stop();
  // The programs' process ids, server first (for tests and for a caller that must signal
  // them itself).
  std::vector<pid_t> pids() const;

 private:
  explicit EmbeddedStack(StackOptions options) : options_(std::move(options)) {}

  StackOptions options_;
  pid_t server_pid_ = -1;
  std::vector<pid_t> worker_pids_;
  std::string address_;
  std::string gpu_arch_;
  std::string gpu_note_;
};

// Whether `nvidia-smi -L` (found in $PATH, run without a shell, its environment only PATH and
// LD_LIBRARY_PATH, 10 s at most) lists a GPU: it is absent or fails on machines without.
bool GpuPresent();

}  // namespace ptxbench::client::run

#endif  // PTXBENCH_CLIENT_RUN_EMBEDDED_STACK_H_
