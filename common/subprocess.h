// One bounded child-process runner with an explicit environment (issue 15, item 3).
//
// The child gets exactly the environment its caller states: nothing of the parent's is passed
// on unless named in `ChildEnvironment::inherit`, so a secret in the parent's environment
// (PTXBENCH_ADMIN_TOKEN, PTXBENCH_DATABASE_URL) reaches no child by default. The child runs
// in a process group of its own; at the wall deadline, and as soon as the child itself has
// exited, the whole group gets SIGKILL, so a grandchild that kept the output pipes open does
// not outlive the call. (A grandchild that calls setsid() leaves the group: callers that run
// untrusted code jail it as well: worker/engine/compile_jail.cc, worker/engine/sandbox.cc.)
#ifndef PTXBENCH_COMMON_SUBPROCESS_H_
#define PTXBENCH_COMMON_SUBPROCESS_H_

#include <sys/resource.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ptxbench {

// The whole environment of a child: stated per caller, never the parent's by default.
struct ChildEnvironment {
  // Names whose value is copied from the parent's environment when set there.
  std::vector<std::string> inherit = {};
  // NAME, value pairs set in the child after `inherit` (they win over an inherited value).
  std::vector<std::pair<std::string, std::string>> set = {};
};

// The "NAME=value" strings `environment` gives a child of a process whose environment is
// `parent` (environ-style, null-terminated). A name that is empty or holds '=' or a NUL byte,
// and a value with a NUL byte, is kInvalidArgument naming it.
absl::StatusOr<std::vector<std::string>> BuildChildEnvironment(const ChildEnvironment& environment,
                                                               char* const* parent);

struct SubprocessOptions {
  // argv[0] is the program's path (no PATH search). A NUL byte in any argument is refused:
  // execve would silently cut the argument there.
  std::vector<std::string> argv;
  // Names the program in errors: "cannot run ptxas at /usr/bin/ptxas: ..." ("" : argv[0]).
  std::string name;
  ChildEnvironment environment;
  std::string working_dir;  // "" keeps the parent's.
  // setsid() instead of setpgid(): the child leads a new session as well as a new group, so
  // a terminal's signals (Ctrl-C, hang-up) meant for us never reach it or what it leaves
  // running (pg_ctl's postmaster).
  bool new_session = false;
  std::string stdin_bytes;  // Written to the child's standard input, then closed.
  // What is kept of each of standard output and error; more is read and dropped (so that the
  // child is not blocked on a full pipe) and the result counts what was dropped.
  size_t max_stdout_bytes = size_t{1} << 20;
  size_t max_stderr_bytes = size_t{1} << 20;
  // Standard error goes to the standard output pipe, interleaved as written (a tool's log:
  // ptxas), under max_stdout_bytes.
  bool merge_stderr_into_stdout = false;
  // Wall-clock limit from the start; then the whole process group gets SIGKILL.
  absl::Duration deadline = absl::Minutes(1);
  // setrlimit(resource, {value, value}) in the child before exec (RLIMIT_AS, RLIMIT_CPU, ...).
  std::vector<std::pair<int, rlim_t>> rlimits;
};

struct SubprocessResult {
  int exit_code = -1;   // When the child exited; -1 when a signal ended it.
  int term_signal = 0;  // The signal that ended it; 0 when it exited.
  bool timed_out = false;
  std::string stdout_bytes;
  std::string stderr_bytes;
  size_t stdout_dropped_bytes = 0;  // Written beyond max_stdout_bytes and not kept.
  size_t stderr_dropped_bytes = 0;
  uint64_t peak_rss_bytes = 0;  // The child's ru_maxrss (wait4), not its children's.
};

// The first regular, executable file named `name` in the colon-separated folders of
// `path_list` (a PATH value; an empty entry is skipped rather than meaning the working
// folder), or nullopt. RunSubprocess never searches PATH itself: a caller that runs a program
// found there (nvidia-smi, nvdisasm) looks it up with this, in one place, and then runs a path.
std::optional<std::string> FindInPath(const std::string& name, const std::string& path_list);

// Runs the child to its end (or the deadline). A program that does not exist is kNotFound
// naming it, one that cannot be executed kPermissionDenied; bad options kInvalidArgument;
// a failure of the runner itself (pipe, fork) kInternal. How the child ended is data in the
// result, never an error.
absl::StatusOr<SubprocessResult> RunSubprocess(const SubprocessOptions& options);

}  // namespace ptxbench

#endif  // PTXBENCH_COMMON_SUBPROCESS_H_
