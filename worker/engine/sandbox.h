// Spawning and supervising one sandboxed evaluator process.
//
// Every step that runs or compiles untrusted code runs in a fresh process that:
// - leads its own session and process group (setsid), so the watchdog kills it and anything it
//   started (nvdisasm, compute-sanitizer's target) with one kill(-pgid, SIGKILL);
// - has no network: a new network namespace (unshare(CLONE_NEWNET); as non-root through a new
//   user namespace). Where neither is permitted the process runs on, and the report says so;
// - runs with resource limits (data size, file size, open files, processes, CPU time, no core
//   files) and PR_SET_NO_NEW_PRIVS, and dies with its supervisor (PR_SET_PDEATHSIG);
// - when the supervisor is root, drops to an unprivileged uid/gid (nobody by default), so it
//   cannot read the reference cache or anything else private to the worker;
// - sees a minimal environment and works in its own private temporary directory (HOME, TMPDIR);
// - is killed by a wall-clock watchdog.
// The child's stdin carries commands, fd 3 its events (JSON lines, protocol.h); stdout and
// stderr (device printf, library logs) are captured separately, keeping the last 64 KiB.
// Checked on the H200 (2026-11-30, docs/results/2026-11-30-h200-device-probe-1.log): CUDA
// initializes and allocates inside a new network namespace, after setuid(65534), and under the
// rlimits below.
#ifndef PTXBENCH_WORKER_ENGINE_SANDBOX_H_
#define PTXBENCH_WORKER_ENGINE_SANDBOX_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/subprocess.h"
#include "nlohmann/json.hpp"

namespace ptxbench::engine {

struct SandboxLimits {
  double wall_seconds = 300;  // The watchdog.
  uint64_t cpu_seconds = 0;   // 0: 2 x wall_seconds + 10.
  // RLIMIT_DATA, not RLIMIT_AS: CUDA reserves terabytes of virtual address space (PROT_NONE,
  // not counted by RLIMIT_DATA), so an address-space limit would break cuInit.
  uint64_t data_bytes = 64ull << 30;
  uint64_t address_space_bytes = 0;  // 0: unlimited (only for processes without CUDA).
  uint64_t file_bytes = 8ull << 30;  // Largest file the process may write.
  uint64_t open_files = 512;
  uint64_t processes = 512;  // RLIMIT_NPROC (per uid).
};

struct SandboxOptions {
  std::vector<std::string> argv;  // argv[0] is the executable's path.
  std::string private_dir;        // Working directory, HOME and TMPDIR.
  ChildEnvironment env;  // The complete environment (see MinimalEnv); nothing else is passed.
  SandboxLimits limits;
  bool isolate_network = true;
  bool drop_privileges = true;                // Effective only when the supervisor is root.
  uid_t uid = 65534;                          // nobody
  gid_t gid = 65534;                          // nogroup
  const std::atomic<bool>* cancel = nullptr;  // Polled while waiting; true kills the process.
};

// What was actually applied, for the audit record.
struct SandboxIsolation {
  bool network_isolated = false;
  std::string network_method;  // "netns", "userns+netns" or why not ("EPERM ...").
  bool privileges_dropped = false;
  int uid = -1;
  int gid = -1;
  std::string limits;  // Human-readable summary.
};
nlohmann::json ToJson(const SandboxIsolation& isolation);

struct SandboxExit {
  bool exited = false;  // Normal exit (see exit_code); else killed by `signal`.
  int exit_code = -1;
  int signal = 0;
  bool timed_out = false;  // The watchdog killed it.
  bool cancelled = false;  // The cancel flag killed it.
  double wall_seconds = 0;
  std::string output_tail;  // Last 64 KiB of stdout+stderr.
};
nlohmann::json ToJson(const SandboxExit& exit);

// PATH, LD_LIBRARY_PATH, CUDA_VISIBLE_DEVICES, the PTXBENCH_ tool paths, PTXBENCH_COMPILE_JAIL
// (the operator's jail policy, compile_jail.h) and the NCCL/NVSHMEM safety variables of the
// supervisor's environment, plus HOME/TMPDIR = private_dir and CUDA_CACHE_DISABLE=1. Nothing else
// of the supervisor's environment (credentials, tokens) leaks.
// Stated with common/subprocess.h's ChildEnvironment, the one type for a child's environment;
// the sandbox keeps its own fork (namespaces, seccomp, privilege drop, a command and an event
// pipe for a long-lived process), which the run-to-completion RunSubprocess does not offer.
ChildEnvironment MinimalEnv(const std::string& private_dir);

class Sandbox {
 public:
  static absl::StatusOr<std::unique_ptr<Sandbox>> Start(const SandboxOptions& options);
  ~Sandbox();  // Kills the process group if it still runs, and reaps it.

  // Writes one command line to the child's stdin.
  absl::Status Send(const nlohmann::json& command);
  // Closes the child's stdin (EOF ends a command loop).
  void CloseInput();
  // The next event from fd 3. nullopt: the child closed fd 3 (it exited). DeadlineExceeded:
  // `timeout_seconds` (< 0: up to the watchdog) passed; when the watchdog fired the process
  // group is already killed and Wait() reports timed_out. Cancelled: the cancel flag was set.
  absl::StatusOr<std::optional<nlohmann::json>> Next(double timeout_seconds = -1);
  // Waits for the exit (killing at the watchdog's deadline).
  SandboxExit Wait();
  void Kill();

  const SandboxIsolation& isolation() const { return isolation_; }
  pid_t pid() const { return pid_; }
  double elapsed_seconds() const;

 private:
  Sandbox() = default;
  void DrainOutput();
  bool Expired() const;

  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  int event_fd_ = -1;
  int output_fd_ = -1;
  double start_ = 0;
  double deadline_ = 0;
  bool killed_by_watchdog_ = false;
  bool killed_by_cancel_ = false;
  bool reaped_ = false;
  int wait_status_ = 0;
  double end_ = 0;
  std::string event_buffer_;
  bool event_eof_ = false;
  std::string output_tail_;
  SandboxIsolation isolation_;
  const std::atomic<bool>* cancel_ = nullptr;
};

// Creates a fresh private directory (mode 0700) under `parent`; when `owner_uid` >= 0 and the
// caller is root, it is given to that uid/gid.
absl::StatusOr<std::string> CreatePrivateDir(const std::string& parent, const std::string& prefix,
                                             int owner_uid = -1, int owner_gid = -1);
// Removes a directory tree (best effort; never follows symbolic links out of it).
void RemoveTree(const std::string& path);

}  // namespace ptxbench::engine

#endif  // PTXBENCH_WORKER_ENGINE_SANDBOX_H_
