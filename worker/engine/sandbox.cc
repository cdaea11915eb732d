#include "worker/engine/sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "worker/engine/gpu/protocol.h"

extern char** environ;

namespace ptxbench::engine {
namespace {

constexpr size_t kOutputTail = 64 << 10;

// The one thread every sandbox is forked from. PR_SET_PDEATHSIG fires when the *thread* that
// forked the child ends, not when its process does (prctl(2): the "parent" is the creating
// thread). The worker daemon runs each job on a thread of its own, so a warm reference process
// kept for the next job (evaluate_processes.cc, ReferencePool) was SIGKILLed the moment its
// job's thread returned, and every job paid a fresh reference process again: on the H200
// through the service (2026-12-03) the GEMM correctness stage took 1.85 s per job against
// ~0.06 s with the warm process in bench/evaluation_overhead, whose evaluations all run on its
// main thread. Forking from a thread that lives as long as the supervisor keeps the death
// signal's meaning (the supervisor is gone) for every process, whichever thread asked.
class ForkThread {
 public:
  static ForkThread& Get() {
    static ForkThread* const kThread = new ForkThread();  // Never destroyed, never joined.
    return *kThread;
  }

  // fork() on the long-lived thread; the child runs `child`, which must not return (it execs or
  // _exits) and may call async-signal-safe functions only. The parent gets the pid, or -1 and
  // the errno in `fork_errno`.
  pid_t Fork(const std::function<void()>& child, int* fork_errno) {
    std::lock_guard<std::mutex> one_caller(call_mu_);
    std::unique_lock<std::mutex> lock(mu_);
    request_ = &child;
    done_ = false;
    wake_.notify_all();
    wake_.wait(lock, [this] { return done_; });
    *fork_errno = errno_;
    return pid_;
  }

 private:
  ForkThread() {
    std::thread([this] { Loop(); }).detach();
  }

  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      wake_.wait(lock, [this] { return request_ != nullptr; });
      const std::function<void()>* child = request_;
      request_ = nullptr;
      const pid_t pid = fork();
      if (pid == 0) {
        (*child)();
        _exit(127);
      }
      pid_ = pid;
      errno_ = pid < 0 ? errno : 0;
      done_ = true;
      wake_.notify_all();
    }
  }

  std::mutex call_mu_;  // One fork at a time.
  std::mutex mu_;
  std::condition_variable wake_;
  const std::function<void()>* request_ = nullptr;
  bool done_ = false;
  pid_t pid_ = -1;
  int errno_ = 0;
};

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Child-side report, written to the status pipe before exec (which closes it): one line
// "isolation <0/1>|<method>|<dropped 0/1>|<uid>|<gid>" and, on failure, "error <what> errno N".
// Between fork and exec only async-signal-safe calls: no allocation, no strerror, no stdio
// (the supervisor may be multi-threaded, e.g. the worker daemon's gRPC threads).
void ChildWrite(int fd, const char* text) {
  size_t size = strlen(text), done = 0;
  while (done < size) {
    ssize_t n = write(fd, text + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// Appends the decimal form of v to buf (NUL-terminated, capacity cap).
void AppendNumber(char* buf, size_t cap, int64_t v) {
  char digits[24];
  int n = 0;
  bool negative = v < 0;
  uint64_t u = negative ? static_cast<uint64_t>(-v) : static_cast<uint64_t>(v);
  do {
    digits[n++] = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u != 0 && n < 22);
  size_t len = strlen(buf);
  if (negative && len + 1 < cap) buf[len++] = '-';
  while (n > 0 && len + 1 < cap) buf[len++] = digits[--n];
  buf[len] = '\0';
}

void AppendText(char* buf, size_t cap, const char* text) {
  size_t len = strlen(buf);
  while (*text && len + 1 < cap) buf[len++] = *text++;
  buf[len] = '\0';
}

[[noreturn]] void ChildFail(int fd, const char* what) {
  int saved = errno;
  char line[256] = "error ";
  AppendText(line, sizeof line, what);
  AppendText(line, sizeof line, " errno ");
  AppendNumber(line, sizeof line, saved);
  AppendText(line, sizeof line, "\n");
  ChildWrite(fd, line);
  _exit(127);
}

void SetLimit(int resource, uint64_t value) {
  if (value == 0) return;
  rlimit l{static_cast<rlim_t>(value), static_cast<rlim_t>(value)};
  setrlimit(resource, &l);
}

}  // namespace

nlohmann::json ToJson(const SandboxIsolation& i) {
  return {{"network_isolated", i.network_isolated},
          {"network_method", i.network_method},
          {"privileges_dropped", i.privileges_dropped},
          {"uid", i.uid},
          {"gid", i.gid},
          {"limits", i.limits}};
}

nlohmann::json ToJson(const SandboxExit& e) {
  return {{"exited", e.exited},       {"exit_code", e.exit_code}, {"signal", e.signal},
          {"timed_out", e.timed_out}, {"cancelled", e.cancelled}, {"wall_seconds", e.wall_seconds}};
}

ChildEnvironment MinimalEnv(const std::string& private_dir) {
  ChildEnvironment env;
  // Values read now, as when this was a map: what the supervisor's environment says when the
  // process kind is set up.
  for (const char* name :
       {"PATH", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "PTXBENCH_NVDISASM",
        "PTXBENCH_COMPUTE_SANITIZER", "PTXBENCH_PTXAS", "PTXBENCH_COMPILE_JAIL", "NCCL_NVLS_ENABLE",
        "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS", "LANG"}) {
    if (const char* v = std::getenv(name)) env.set.emplace_back(name, v);
  }
  if (std::getenv("PATH") == nullptr) env.set.emplace_back("PATH", "/usr/local/bin:/usr/bin:/bin");
  env.set.emplace_back("HOME", private_dir);
  env.set.emplace_back("TMPDIR", private_dir);
  env.set.emplace_back("CUDA_CACHE_DISABLE", "1");
  // Lazy loading would defer module loading into the first launch (and into timed regions).
  env.set.emplace_back("CUDA_MODULE_LOADING", "EAGER");
  return env;
}

absl::StatusOr<std::unique_ptr<Sandbox>> Sandbox::Start(const SandboxOptions& options) {
  if (options.argv.empty()) return absl::InvalidArgumentError("sandbox: empty argv");
  ASSIGN_OR_RETURN(std::vector<std::string> env_strings,
                   BuildChildEnvironment(options.env, environ));
  // In name order, as the std::map this was built from before the shared ChildEnvironment
  // type: the evaluator's environment stays byte for byte what it was.
  std::sort(env_strings.begin(), env_strings.end(), [](const std::string& a, const std::string& b) {
    return a.substr(0, a.find('=')) < b.substr(0, b.find('='));
  });
  int in_pipe[2], event_pipe[2], out_pipe[2], status_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) || pipe2(event_pipe, O_CLOEXEC) || pipe2(out_pipe, O_CLOEXEC) ||
      pipe2(status_pipe, O_CLOEXEC)) {
    return absl::InternalError(absl::StrCat("pipe2: ", std::strerror(errno)));
  }
  // Everything the child needs is prepared before fork: after fork only async-signal-safe calls.
  std::vector<std::string> args = options.argv;
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  envp.reserve(env_strings.size() + 1);
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  const bool root = geteuid() == 0;
  const bool drop = options.drop_privileges && root;
  SandboxLimits limits = options.limits;
  if (limits.cpu_seconds == 0)
    limits.cpu_seconds = static_cast<uint64_t>(2 * limits.wall_seconds + 10);
  const pid_t supervisor = getpid();
  const char* private_dir = options.private_dir.empty() ? nullptr : options.private_dir.c_str();

  // Runs in the child, on a copy of this thread's stack (this thread waits until fork returns).
  const std::function<void()> child = [&] {
    // The fork thread's signal mask is whatever its creator had: the evaluator starts clean.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    // Lift the four child ends above 10 first, so no dup2 below can clobber one of them
    // (a supervisor started with fds 0-2 closed gets pipes in that range).
    int report = fcntl(status_pipe[1], F_DUPFD_CLOEXEC, 10);
    int commands = fcntl(in_pipe[0], F_DUPFD_CLOEXEC, 10);
    int output = fcntl(out_pipe[1], F_DUPFD_CLOEXEC, 10);
    int events = fcntl(event_pipe[1], F_DUPFD_CLOEXEC, 10);
    if (report < 0) _exit(125);
    if (commands < 0 || output < 0 || events < 0) ChildFail(report, "fcntl(F_DUPFD)");
    if (setsid() < 0) ChildFail(report, "setsid");
    // fds: 0 = commands, 1/2 = captured output, 3 = events (dup2 clears close-on-exec).
    if (dup2(commands, 0) < 0 || dup2(output, 1) < 0 || dup2(output, 2) < 0 ||
        dup2(events, 3) < 0) {
      ChildFail(report, "dup2");
    }
    // Close every other descriptor: nothing of the supervisor (sockets, the database) leaks.
    if (report > 4) close_range(4, static_cast<unsigned>(report - 1), 0);
    close_range(static_cast<unsigned>(report + 1), ~0U, 0);
    const char* method = "not requested";
    bool isolated = false;
    int unshare_errno = 0;
    if (options.isolate_network) {
      if (unshare(CLONE_NEWNET) == 0) {
        isolated = true;
        method = "netns";
      } else if (!root && unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0) {
        isolated = true;
        method = "userns+netns";
      } else {
        unshare_errno = errno;
        method = "not isolated: unshare(CLONE_NEWNET) failed, errno ";
      }
    }
    SetLimit(RLIMIT_DATA, limits.data_bytes);
    SetLimit(RLIMIT_AS, limits.address_space_bytes);
    SetLimit(RLIMIT_FSIZE, limits.file_bytes);
    SetLimit(RLIMIT_NOFILE, limits.open_files);
    SetLimit(RLIMIT_CPU, limits.cpu_seconds);
    rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    if (private_dir != nullptr && chdir(private_dir) != 0) ChildFail(report, "chdir(private dir)");
    if (drop) {
      if (setgroups(0, nullptr) != 0) ChildFail(report, "setgroups");
      if (setgid(options.gid) != 0) ChildFail(report, "setgid");
      if (setuid(options.uid) != 0) ChildFail(report, "setuid");
      if (setuid(0) == 0) {
        errno = EPERM;
        ChildFail(report, "privileges could be regained");
      }
    }
    // NPROC counts the processes of the (possibly new) uid: set after the uid change.
    SetLimit(RLIMIT_NPROC, limits.processes);
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    // Set after setuid, which clears it; then close the race with a supervisor already gone.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != supervisor) _exit(126);
    char line[384] = "isolation ";
    AppendText(line, sizeof line, isolated ? "1|" : "0|");
    AppendText(line, sizeof line, method);
    if (unshare_errno != 0) AppendNumber(line, sizeof line, unshare_errno);
    AppendText(line, sizeof line, drop ? "|1|" : "|0|");
    AppendNumber(line, sizeof line, static_cast<int64_t>(getuid()));
    AppendText(line, sizeof line, "|");
    AppendNumber(line, sizeof line, static_cast<int64_t>(getgid()));
    AppendText(line, sizeof line, "\n");
    ChildWrite(report, line);
    execve(argv[0], argv.data(), envp.data());
    ChildFail(report, "execve");
  };
  int fork_errno = 0;
  const pid_t pid = ForkThread::Get().Fork(child, &fork_errno);
  if (pid < 0) {
    for (int fd : {in_pipe[0], in_pipe[1], event_pipe[0], event_pipe[1], out_pipe[0], out_pipe[1],
                   status_pipe[0], status_pipe[1]}) {
      close(fd);
    }
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(fork_errno)));
  }
  close(in_pipe[0]);
  close(event_pipe[1]);
  close(out_pipe[1]);
  close(status_pipe[1]);

  std::unique_ptr<Sandbox> s(new Sandbox());
  s->pid_ = pid;
  s->stdin_fd_ = in_pipe[1];
  s->event_fd_ = event_pipe[0];
  s->output_fd_ = out_pipe[0];
  s->start_ = Now();
  s->deadline_ = s->start_ + options.limits.wall_seconds;
  s->cancel_ = options.cancel;
  // A child that dies on a closed pipe must not kill the supervisor with SIGPIPE.
  signal(SIGPIPE, SIG_IGN);
  fcntl(s->output_fd_, F_SETFL, fcntl(s->output_fd_, F_GETFL) | O_NONBLOCK);

  // The status pipe closes at exec (CLOEXEC) or at the child's exit.
  std::string report;
  char buf[512];
  while (true) {
    ssize_t n = read(status_pipe[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    report.append(buf, static_cast<size_t>(n));
  }
  close(status_pipe[0]);
  std::string error;
  for (absl::string_view line : absl::StrSplit(report, '\n')) {
    if (absl::StartsWith(line, "isolation ")) {
      std::vector<std::string> parts = absl::StrSplit(line.substr(10), '|');
      if (parts.size() == 5) {
        s->isolation_.network_isolated = parts[0] == "1";
        s->isolation_.network_method = parts[1];
        s->isolation_.privileges_dropped = parts[2] == "1";
        s->isolation_.uid = std::atoi(parts[3].c_str());
        s->isolation_.gid = std::atoi(parts[4].c_str());
      }
    } else if (absl::StartsWith(line, "error ")) {
      error = std::string(line.substr(6));
    }
  }
  s->isolation_.limits = absl::StrFormat(
      "wall %.0fs, cpu %ds, data %dGiB, fsize %dGiB, nofile %d, nproc %d, core 0, no_new_privs",
      options.limits.wall_seconds, limits.cpu_seconds, limits.data_bytes >> 30,
      limits.file_bytes >> 30, limits.open_files, limits.processes);
  if (limits.address_space_bytes > 0) {
    s->isolation_.limits +=
        absl::StrFormat(", address space %dGiB", limits.address_space_bytes >> 30);
  }
  if (!error.empty()) {
    s->Wait();
    return absl::InternalError(absl::StrCat("sandbox start failed: ", error));
  }
  return s;
}

Sandbox::~Sandbox() {
  if (!reaped_ && pid_ > 0) {
    Kill();
    Wait();
  }
  for (int fd : {stdin_fd_, event_fd_, output_fd_}) {
    if (fd >= 0) close(fd);
  }
}

double Sandbox::elapsed_seconds() const { return (reaped_ ? end_ : Now()) - start_; }

bool Sandbox::Expired() const { return Now() >= deadline_; }

void Sandbox::Kill() {
  if (pid_ > 0 && !reaped_) {
    kill(-pid_, SIGKILL);  // The whole process group (the child is its leader).
    kill(pid_, SIGKILL);
  }
}

void Sandbox::DrainOutput() {
  char buf[1 << 14];
  while (output_fd_ >= 0) {
    ssize_t n = read(output_fd_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) {
        close(output_fd_);
        output_fd_ = -1;
      }
      return;
    }
    output_tail_.append(buf, static_cast<size_t>(n));
    if (output_tail_.size() > 2 * kOutputTail) {
      output_tail_.erase(0, output_tail_.size() - kOutputTail);
    }
  }
}

absl::Status Sandbox::Send(const nlohmann::json& command) {
  // A child that already died (a kernel fault while commands were still being queued: seen in
  // CI as "write to fd 6: Broken pipe") is not an infrastructure failure of the supervisor.
  // The command is dropped and the caller's next Next()/Wait() reports how the child ended,
  // which is the verdict.
  if (stdin_fd_ < 0) return absl::OkStatus();
  absl::Status written = gpu::WriteJsonLine(stdin_fd_, command);
  if (!written.ok() && absl::StrContains(written.message(), std::strerror(EPIPE))) {
    CloseInput();
    return absl::OkStatus();
  }
  return written;
}

void Sandbox::CloseInput() {
  if (stdin_fd_ >= 0) close(stdin_fd_);
  stdin_fd_ = -1;
}

absl::StatusOr<std::optional<nlohmann::json>> Sandbox::Next(double timeout_seconds) {
  double until = timeout_seconds < 0 ? deadline_ : std::min(deadline_, Now() + timeout_seconds);
  while (true) {
    size_t newline = event_buffer_.find('\n');
    if (newline != std::string::npos) {
      std::string line = event_buffer_.substr(0, newline);
      event_buffer_.erase(0, newline + 1);
      nlohmann::json event = nlohmann::json::parse(line, nullptr, false);
      if (event.is_discarded() || !event.is_object()) {
        return absl::DataLossError(absl::StrCat("malformed event line: ", line.substr(0, 200)));
      }
      return std::optional<nlohmann::json>(std::move(event));
    }
    if (event_eof_) return std::optional<nlohmann::json>();
    if (cancel_ != nullptr && cancel_->load()) {
      killed_by_cancel_ = true;
      Kill();
      return absl::CancelledError("evaluation cancelled");
    }
    double now = Now();
    if (now >= until) {
      if (now >= deadline_) {
        killed_by_watchdog_ = true;
        Kill();
      }
      return absl::DeadlineExceededError(
          absl::StrFormat("no event within %.1f s%s", until - start_,
                          killed_by_watchdog_ ? " (watchdog killed the process group)" : ""));
    }
    pollfd fds[2] = {{event_fd_, POLLIN, 0}, {output_fd_, POLLIN, 0}};
    int wait_ms = static_cast<int>(std::min(100.0, (until - now) * 1000) + 1);
    int ready = poll(fds, output_fd_ >= 0 ? 2 : 1, wait_ms);
    if (ready < 0 && errno != EINTR) {
      return absl::InternalError(absl::StrCat("poll: ", std::strerror(errno)));
    }
    if (output_fd_ >= 0 && (fds[1].revents & (POLLIN | POLLHUP))) DrainOutput();
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      char buf[1 << 16];
      ssize_t n = read(event_fd_, buf, sizeof buf);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {
        event_eof_ = true;
      } else {
        event_buffer_.append(buf, static_cast<size_t>(n));
        if (event_buffer_.size() > (256u << 20)) {
          Kill();
          return absl::ResourceExhaustedError("event stream too large");
        }
      }
    }
  }
}

SandboxExit Sandbox::Wait() {
  SandboxExit e;
  CloseInput();
  while (!reaped_) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      wait_status_ = status;
      end_ = Now();
      break;
    }
    if (r < 0 && errno != EINTR) {
      reaped_ = true;
      end_ = Now();
      break;
    }
    if (cancel_ != nullptr && cancel_->load() && !killed_by_cancel_) {
      killed_by_cancel_ = true;
      Kill();
    }
    if (Expired() && !killed_by_watchdog_) {
      killed_by_watchdog_ = true;
      Kill();
    }
    if (output_fd_ >= 0) {
      pollfd p{output_fd_, POLLIN, 0};
      if (poll(&p, 1, 20) > 0) DrainOutput();
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  // Processes of the group that outlived the leader (a forked helper) go too.
  kill(-pid_, SIGKILL);
  DrainOutput();
  e.exited = WIFEXITED(wait_status_);
  e.exit_code = e.exited ? WEXITSTATUS(wait_status_) : -1;
  e.signal = WIFSIGNALED(wait_status_) ? WTERMSIG(wait_status_) : 0;
  e.timed_out = killed_by_watchdog_;
  e.cancelled = killed_by_cancel_;
  e.wall_seconds = end_ - start_;
  e.output_tail = output_tail_.size() > kOutputTail
                      ? output_tail_.substr(output_tail_.size() - kOutputTail)
                      : output_tail_;
  return e;
}

absl::StatusOr<std::string> CreatePrivateDir(const std::string& parent, const std::string& prefix,
                                             int owner_uid, int owner_gid) {
  std::string templ = absl::StrCat(parent, "/", prefix, "XXXXXX");
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp ", templ, ": ", std::strerror(errno)));
  }
  std::string dir(buf.data());
  chmod(dir.c_str(), 0700);
  if (owner_uid >= 0 && geteuid() == 0) {
    if (chown(dir.c_str(), owner_uid, owner_gid) != 0) {
      return absl::InternalError(absl::StrCat("chown ", dir, ": ", std::strerror(errno)));
    }
  }
  return dir;
}

void RemoveTree(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    if (DIR* d = opendir(path.c_str())) {
      while (dirent* entry = readdir(d)) {
        std::string name = entry->d_name;
        if (name == "." || name == "..") continue;
        RemoveTree(absl::StrCat(path, "/", name));
      }
      closedir(d);
    }
    rmdir(path.c_str());
  } else {
    unlink(path.c_str());
  }
}

}  // namespace ptxbench::engine
