#include "common/subprocess.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <map>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"

namespace ptxbench {
namespace {

// The steps of the child before exec whose failure it reports.
constexpr int kExecStep = 0;
constexpr int kChdirStep = 1;
constexpr int kRlimitStep = 2;

void CloseIfOpen(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

// The pipes of one run; every end still open is closed when the run returns.
struct Pipes {
  int stdin_fds[2] = {-1, -1};
  int stdout_fds[2] = {-1, -1};
  int stderr_fds[2] = {-1, -1};
  int report_fds[2] = {-1, -1};  // exec failure: the child writes its errno (closed at exec)
  Pipes() = default;
  Pipes(const Pipes&) = delete;
  Pipes& operator=(const Pipes&) = delete;
  ~Pipes() {
    for (int* pair : {stdin_fds, stdout_fds, stderr_fds, report_fds}) {
      CloseIfOpen(pair[0]);
      CloseIfOpen(pair[1]);
    }
  }
};

// Appends what `fd` has to `kept` up to `cap`, counting the rest in `dropped`. False at end
// of file.
bool Drain(int fd, std::string& kept, size_t cap, size_t& dropped) {
  char buffer[1 << 16];
  while (true) {
    const ssize_t got = read(fd, buffer, sizeof(buffer));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return errno == EAGAIN;  // nothing now, still open; other errors: treat as end
    if (got == 0) return false;
    const size_t room = cap - std::min(cap, kept.size());
    kept.append(buffer, std::min(room, static_cast<size_t>(got)));
    if (static_cast<size_t>(got) > room) dropped += static_cast<size_t>(got) - room;
  }
}

// write(2) to a pipe whose reader may be gone, without the process-wide SIGPIPE: the signal
// is blocked in this thread for the call and a pending one consumed (it is thread-directed),
// so a child that exits without reading its input cannot kill the parent, and the parent's
// own SIGPIPE disposition stays as it was.
ssize_t WriteWithoutSigpipe(int fd, const char* data, size_t size) {
  sigset_t pipe_only;
  sigset_t before;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_only, &before);
  const ssize_t put = write(fd, data, size);
  const int write_errno = errno;
  if (put < 0 && write_errno == EPIPE) {
    const timespec no_wait{0, 0};
    while (sigtimedwait(&pipe_only, nullptr, &no_wait) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  errno = write_errno;
  return put;
}

// "cannot run ptxas at /usr/bin/ptxas: " or "cannot run /bin/sh: ".
std::string CannotRun(const SubprocessOptions& options) {
  if (options.name.empty()) return absl::StrCat("cannot run ", options.argv[0], ": ");
  return absl::StrCat("cannot run ", options.name, " at ", options.argv[0], ": ");
}

}  // namespace

absl::StatusOr<std::vector<std::string>> BuildChildEnvironment(const ChildEnvironment& environment,
                                                               char* const* parent) {
  std::map<std::string, std::string> parent_values;
  for (char* const* entry = parent; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string text(*entry);
    const size_t equals = text.find('=');
    if (equals == std::string::npos) continue;
    parent_values.emplace(text.substr(0, equals), text.substr(equals + 1));
  }
  auto check_name = [](const std::string& name) -> absl::Status {
    if (name.empty() || name.find('=') != std::string::npos ||
        name.find('\0') != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("child environment: '", name, "' is not a variable name"));
    }
    return absl::OkStatus();
  };
  std::vector<std::pair<std::string, std::string>> chosen;
  auto put = [&chosen](const std::string& name, const std::string& value) {
    auto same = std::find_if(chosen.begin(), chosen.end(),
                             [&](const auto& entry) { return entry.first == name; });
    if (same != chosen.end()) {
      same->second = value;
    } else {
      chosen.emplace_back(name, value);
    }
  };
  for (const std::string& name : environment.inherit) {
    if (absl::Status bad = check_name(name); !bad.ok()) return bad;
    auto found = parent_values.find(name);
    if (found != parent_values.end()) put(name, found->second);
  }
  for (const auto& [name, value] : environment.set) {
    if (absl::Status bad = check_name(name); !bad.ok()) return bad;
    if (value.find('\0') != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("child environment: the value of ", name, " holds a NUL byte"));
    }
    put(name, value);
  }
  std::vector<std::string> strings;
  strings.reserve(chosen.size());
  for (const auto& [name, value] : chosen) strings.push_back(absl::StrCat(name, "=", value));
  return strings;
}

absl::StatusOr<SubprocessResult> RunSubprocess(const SubprocessOptions& options) {
  if (options.argv.empty() || options.argv[0].empty()) {
    return absl::InvalidArgumentError("cannot run a child process: no program named");
  }
  for (const std::string& arg : options.argv) {
    if (arg.find('\0') != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(CannotRun(options), "an argument holds a NUL byte (exec would cut it)"));
    }
  }
  absl::StatusOr<std::vector<std::string>> env_strings =
      BuildChildEnvironment(options.environment, environ);
  if (!env_strings.ok()) return env_strings.status();
  // Everything the child needs is allocated before fork: between fork and exec the child
  // only makes async-signal-safe calls (the parent has threads).
  std::vector<std::string> argv_strings = options.argv;
  std::vector<char*> argv;
  argv.reserve(argv_strings.size() + 1);
  for (std::string& arg : argv_strings) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  envp.reserve(env_strings->size() + 1);
  for (std::string& entry : *env_strings) envp.push_back(entry.data());
  envp.push_back(nullptr);

  Pipes pipes;
  for (int* pair : {pipes.stdin_fds, pipes.stdout_fds, pipes.stderr_fds, pipes.report_fds}) {
    if (pipe2(pair, O_CLOEXEC) != 0) {
      return absl::InternalError(absl::StrCat(CannotRun(options), "pipe2: ", strerror(errno)));
    }
  }
  const pid_t parent = getpid();
  const absl::Time deadline = absl::Now() + options.deadline;
  const pid_t pid = fork();
  if (pid < 0)
    return absl::InternalError(absl::StrCat(CannotRun(options), "fork: ", strerror(errno)));
  if (pid == 0) {
    if (options.new_session) {
      setsid();
    } else {
      setpgid(0, 0);
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(126);  // the parent died before prctl took effect
    // What failed before exec, for the parent's error: {step, errno}.
    int failure[2] = {kExecStep, 0};
    dup2(pipes.stdin_fds[0], STDIN_FILENO);
    dup2(pipes.stdout_fds[1], STDOUT_FILENO);
    dup2(options.merge_stderr_into_stdout ? pipes.stdout_fds[1] : pipes.stderr_fds[1],
         STDERR_FILENO);
    if (!options.working_dir.empty() && chdir(options.working_dir.c_str()) != 0) {
      failure[0] = kChdirStep;
      failure[1] = errno;
    }
    for (const auto& [resource, value] : options.rlimits) {
      const rlimit limit{value, value};
      if (failure[1] == 0 && setrlimit(resource, &limit) != 0) {
        failure[0] = kRlimitStep;
        failure[1] = errno;
      }
    }
    // Only the report pipe survives past 2 (and it closes at exec).
    const int report_fd = fcntl(pipes.report_fds[1], F_DUPFD_CLOEXEC, 3);
    if (report_fd > 3) close_range(3, static_cast<unsigned>(report_fd - 1), 0);
    close_range(static_cast<unsigned>(report_fd + 1), ~0U, 0);
    if (failure[1] == 0) {
      execve(argv[0], argv.data(), envp.data());
      failure[1] = errno;
    }
    [[maybe_unused]] const ssize_t written = write(report_fd, failure, sizeof(failure));
    _exit(127);
  }
  // Also here, so that the group exists before any killpg below (a new session makes its own).
  if (!options.new_session) setpgid(pid, pid);
  CloseIfOpen(pipes.stdin_fds[0]);
  CloseIfOpen(pipes.stdout_fds[1]);
  CloseIfOpen(pipes.stderr_fds[1]);
  CloseIfOpen(pipes.report_fds[1]);
  int failure[2] = {kExecStep, 0};
  while (read(pipes.report_fds[0], failure, sizeof(failure)) < 0 && errno == EINTR) {
  }
  if (failure[1] != 0) {
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    const std::string step = failure[0] == kChdirStep
                                 ? absl::StrCat("working folder ", options.working_dir, ": ")
                             : failure[0] == kRlimitStep ? "setrlimit: "
                                                         : "";
    const std::string message = absl::StrCat(CannotRun(options), step, strerror(failure[1]));
    if (failure[1] == ENOENT || failure[1] == ENOTDIR) return absl::NotFoundError(message);
    if (failure[1] == EACCES || failure[1] == EPERM) return absl::PermissionDeniedError(message);
    return absl::InternalError(message);
  }

  SubprocessResult result;
  for (int fd : {pipes.stdin_fds[1], pipes.stdout_fds[0], pipes.stderr_fds[0]}) {
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  size_t stdin_written = 0;
  if (options.stdin_bytes.empty()) CloseIfOpen(pipes.stdin_fds[1]);
  bool exited = false;
  int wait_status = 0;
  rusage usage{};
  while (pipes.stdout_fds[0] >= 0 || pipes.stderr_fds[0] >= 0 || !exited) {
    if (!exited) {
      // WNOWAIT: the child stays unreaped (a zombie) while its group is killed, so the
      // group id cannot have been reused by an unrelated process meanwhile.
      siginfo_t info{};
      if (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
          info.si_pid == pid) {
        exited = true;
        // What the child started and left running goes with it.
        killpg(pid, SIGKILL);
        while (wait4(pid, &wait_status, 0, &usage) < 0 && errno == EINTR) {
        }
        CloseIfOpen(pipes.stdin_fds[1]);
      }
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      result.timed_out = !exited;
      killpg(pid, SIGKILL);
      break;
    }
    pollfd polled[3];
    nfds_t count = 0;
    if (pipes.stdout_fds[0] >= 0) polled[count++] = {pipes.stdout_fds[0], POLLIN, 0};
    if (pipes.stderr_fds[0] >= 0) polled[count++] = {pipes.stderr_fds[0], POLLIN, 0};
    if (pipes.stdin_fds[1] >= 0) polled[count++] = {pipes.stdin_fds[1], POLLOUT, 0};
    // Wake at least every 50 ms to notice the child's exit while a grandchild holds a pipe.
    const int timeout_ms =
        static_cast<int>(std::min<int64_t>(50, absl::ToInt64Milliseconds(left) + 1));
    if (poll(polled, count, timeout_ms) < 0 && errno != EINTR) {
      killpg(pid, SIGKILL);
      return absl::InternalError(absl::StrCat(CannotRun(options), "poll: ", strerror(errno)));
    }
    if (pipes.stdout_fds[0] >= 0 && !Drain(pipes.stdout_fds[0], result.stdout_bytes,
                                           options.max_stdout_bytes, result.stdout_dropped_bytes)) {
      CloseIfOpen(pipes.stdout_fds[0]);
    }
    if (pipes.stderr_fds[0] >= 0 && !Drain(pipes.stderr_fds[0], result.stderr_bytes,
                                           options.max_stderr_bytes, result.stderr_dropped_bytes)) {
      CloseIfOpen(pipes.stderr_fds[0]);
    }
    if (pipes.stdin_fds[1] >= 0) {
      const ssize_t put =
          WriteWithoutSigpipe(pipes.stdin_fds[1], options.stdin_bytes.data() + stdin_written,
                              options.stdin_bytes.size() - stdin_written);
      if (put > 0) stdin_written += static_cast<size_t>(put);
      if ((put < 0 && errno != EAGAIN && errno != EINTR) ||
          stdin_written == options.stdin_bytes.size()) {
        CloseIfOpen(pipes.stdin_fds[1]);
      }
    }
  }
  if (!exited) {
    while (wait4(pid, &wait_status, 0, &usage) < 0 && errno == EINTR) {
    }
  }
  result.peak_rss_bytes = static_cast<uint64_t>(usage.ru_maxrss) * 1024;  // KiB on Linux
  if (WIFEXITED(wait_status)) {
    result.exit_code = WEXITSTATUS(wait_status);
  } else if (WIFSIGNALED(wait_status)) {
    result.term_signal = WTERMSIG(wait_status);
  }
  return result;
}

std::optional<std::string> FindInPath(const std::string& name, const std::string& path_list) {
  if (name.empty() || name.find('/') != std::string::npos) return std::nullopt;
  for (absl::string_view dir : absl::StrSplit(path_list, ':', absl::SkipEmpty())) {
    const std::string candidate = absl::StrCat(dir, "/", name);
    struct stat info {};
    if (stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
        access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return std::nullopt;
}

}  // namespace ptxbench
