// The compile jail: the compilers that read untrusted input (NVRTC on the CUDA source, ptxas on
// the PTX) run in a child process whose file system holds nothing of the host.
//
// RunInCompileJail forks a child that
// - leads its own process group and dies with its parent (PR_SET_PDEATHSIG);
// - enters a new mount namespace, directly as root or through a new user namespace otherwise,
//   mounts an empty tmpfs, binds into it read-only only the files the caller names (ptxas and
//   what its loader needs) and a small writable /work, makes it the root (pivot_root, or chroot
//   where the root cannot be pivoted), detaches the host's tree and remounts the root read-only;
// - drops every privilege (root: to uid/gid 65534; in a user namespace: every capability), sets
//   no_new_privs, an address-space limit, a CPU-time limit and no core files;
// - then runs the caller's body, which sends its answer back through a pipe.
// NVRTC is linked into this process and its builtins library is loaded before the fork
// (PreloadNvrtcBuiltins), so NVRTC needs no file inside: an #include, __has_include or #line
// trick of any host path finds nothing. The parent kills the child's process group at the
// deadline (NVRTC's cancel callback is not called during macro expansion, template
// instantiation or long optimisation) and reports how it ended.
//
// Fork, not exec: the child must inherit NVRTC loaded, and the body is ours. A caller must not
// hold locks in other threads that the body needs (the evaluator's compile mode has one thread).
#ifndef PTXBENCH_WORKER_ENGINE_COMPILE_JAIL_H_
#define PTXBENCH_WORKER_ENGINE_COMPILE_JAIL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace ptxbench {

// Whether a compile may run unjailed where the kernel refuses every method. The operator sets
// it with PTXBENCH_COMPILE_JAIL=allow-unjailed in the worker's environment (the sandbox passes it
// on to the evaluator); unset or "required", a compile that cannot be jailed is refused.
enum class JailPolicy { kRequired, kAllowUnjailed };
absl::StatusOr<JailPolicy> JailPolicyFromEnvironment();

enum class JailMethod {
  kNone,            // Not jailed (allowed by the policy; the report says why).
  kMountNamespace,  // As root: a new mount namespace, then uid/gid 65534.
  kUserNamespace,   // Unprivileged: a new user and mount namespace, then no capabilities.
};
std::string JailMethodName(JailMethod method);  // "none", "mount_namespace", "user_namespace".

// What applied, for the audit record.
struct JailReport {
  JailMethod method = JailMethod::kNone;
  std::string root;    // "pivot_root" or "chroot"; empty when not jailed.
  std::string detail;  // "uid 65534 gid 65534" / "no capabilities"; or why each method failed.
};
nlohmann::json ToJson(const JailReport& report);

struct JailOptions {
  // Seconds the compilers (the child and its descendants) may take, not counting the time they
  // waited for a CPU (/proc/<pid>/schedstat): past them the child is killed
  // (JailedRun::End::kTimedOut, the source's fault). Waiting is not counted so that a verdict
  // does not depend on how loaded the compile node is: under CI's parallel tests an honest
  // compile that needs 1 s took over 30 s of wall time (2026-12-02).
  double max_seconds = 60;
  // Wall-time backstop; 0 stands for 4 x max_seconds. Reached before the compilers had their
  // max_seconds, the node was too loaded to judge: an Unavailable error (infrastructure,
  // retried), never a verdict.
  double max_wall_seconds = 0;
  uint64_t max_memory_bytes = 0;        // RLIMIT_AS of the child (and of what it starts); 0: none.
  size_t max_output_bytes = 256 << 20;  // Of the body's answer; more is an error.
  uint64_t work_bytes = 160 << 20;      // Size of the writable /work tmpfs.
  // Host files bound read-only at their own paths (ExecutableFiles of the programs the body
  // runs). Nothing else of the host is visible.
  std::vector<std::string> files;
  JailPolicy policy = JailPolicy::kRequired;
};

// The writable folder inside the jail.
inline constexpr char kJailWorkDir[] = "/work";

struct JailedRun {
  enum class End {
    kFinished,     // The body returned; `output` is its answer.
    kTimedOut,     // Killed when its own time reached max_seconds.
    kOutOfMemory,  // An allocation failed past the memory limit (the child said so).
    kCrashed,      // Died of a signal, or exited without an answer.
  };
  End end = End::kCrashed;
  std::string output;
  JailReport jail;
  double seconds = 0;
  double cpu_seconds = 0;             // Of the child and its descendants, as last measured.
  double scheduler_wait_seconds = 0;  // Their time runnable but waiting for a CPU.
  uint64_t peak_rss_bytes = 0;        // The child's and its children's, from wait4.
  uint64_t peak_virtual_bytes = 0;    // The child's own VmPeak (not its children's).
  int signal = 0;                     // kCrashed by a signal.
  std::string diagnostics;  // The last 4 KiB the child wrote to stderr (never to the model).
};

// Runs `body` in the jail. Errors (infrastructure, never the source's fault): the child cannot
// be started; the jail is refused under JailPolicy::kRequired (FailedPrecondition naming each
// method and why it failed); the answer is larger than max_output_bytes; the child was killed
// by someone else's SIGKILL (the machine's OOM killer); the wall-time backstop passed before the
// compilers got their CPU time (Unavailable: the node is overloaded).
absl::StatusOr<JailedRun> RunInCompileJail(const std::function<std::string()>& body,
                                           const JailOptions& options);

// The files that running `program` needs: the program (or a script and its #! interpreter),
// its ELF interpreter and the shared libraries it loads, resolved as this process's loader
// resolves them. InvalidArgument when `program` is not a readable executable.
absl::StatusOr<std::vector<std::string>> ExecutableFiles(const std::string& program);

// The directories of the shared libraries among `files`, for LD_LIBRARY_PATH inside the jail
// (where /etc/ld.so.cache does not exist).
std::string LibraryPath(const std::vector<std::string>& files);

// The body's answer as named fields (binary-safe).
std::string EncodeFields(const std::map<std::string, std::string>& fields);
absl::StatusOr<std::map<std::string, std::string>> DecodeFields(const std::string& encoded);

}  // namespace ptxbench

#endif  // PTXBENCH_WORKER_ENGINE_COMPILE_JAIL_H_
