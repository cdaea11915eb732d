#include "tests/support/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "common/files.h"

namespace ptxbench::testing {
namespace {

// A log of a test's or benchmark's programs: a server's debug log is a few MiB at most; the
// bound only keeps a runaway log out of memory.
constexpr size_t kMaxLogBytes = size_t{256} << 20;

}  // namespace

std::unique_ptr<ChildProcess> ChildProcess::Start(const std::vector<std::string>& argv,
                                                  const std::string& log_path,
                                                  const ChildOptions& options) {
  // Built before fork: the child of a threaded parent may only make async-signal-safe calls.
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return nullptr;
  if (pid == 0) {
    const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) _exit(126);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    close(fd);
    const int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) {
      dup2(null_fd, STDIN_FILENO);
      close(null_fd);
    }
    if (options.own_process_group) setpgid(0, 0);
    execv(args[0], args.data());
    _exit(127);
  }
  return std::unique_ptr<ChildProcess>(new ChildProcess(pid, log_path));
}

ChildProcess::~ChildProcess() {
  if (!reaped_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

std::string ChildProcess::Log() const { return ReadFileOrEmpty(log_path_, kMaxLogBytes); }

void ChildProcess::Signal(int signal) {
  if (!reaped_) kill(pid_, signal);
}

bool ChildProcess::Reap(int options) {
  if (reaped_) return true;
  int status = 0;
  if (waitpid(pid_, &status, options) != pid_) return false;
  reaped_ = true;
  wait_status_ = status;
  return true;
}

std::optional<int> ChildProcess::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    if (Reap(WNOHANG)) return wait_status_;
    if (absl::Now() > deadline) return std::nullopt;
    absl::SleepFor(absl::Milliseconds(20));
  }
}

int ChildProcess::Stop(absl::Duration grace) {
  Signal(SIGTERM);
  if (Wait(grace).has_value()) return wait_status_;
  Signal(SIGKILL);
  Reap(0);
  return wait_status_;
}

std::optional<std::string> ChildProcess::WaitForLogLine(const std::string& needle,
                                                        absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    // Whether it had ended is known before the log is read: a line written just before the
    // end is still found.
    const bool ended = Reap(WNOHANG);
    for (absl::string_view line : absl::StrSplit(Log(), '\n')) {
      if (line.find(needle) != absl::string_view::npos) return std::string(line);
    }
    if (ended || absl::Now() > deadline) return std::nullopt;
    absl::SleepFor(absl::Milliseconds(50));
  }
}

std::string WaitForServingAddress(ChildProcess& server, absl::Duration timeout) {
  static constexpr char kGrpc[] = " grpc=";
  const std::optional<std::string> line =
      server.WaitForLogLine("ptxbench-server serving grpc=", timeout);
  if (!line.has_value()) return "";
  const size_t at = line->find(kGrpc) + sizeof(kGrpc) - 1;
  return line->substr(at, line->find(' ', at) - at);
}

CommandResult RunCommand(const std::vector<std::string>& argv, absl::Duration timeout) {
  const std::string dir = MakeTempDir("ptxbench-cmd-");
  const std::string log = dir + "/output";
  CommandResult result;
  {
    std::unique_ptr<ChildProcess> child = ChildProcess::Start(argv, log);
    if (child == nullptr) return result;
    std::optional<int> status = child->Wait(timeout);
    result.output = child->Log();
    if (status.has_value() && WIFEXITED(*status)) result.exit_code = WEXITSTATUS(*status);
  }
  unlink(log.c_str());
  rmdir(dir.c_str());
  return result;
}

std::string MakeTempDir(const std::string& prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/" + prefix + "XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  const char* made = mkdtemp(buffer.data());
  return made != nullptr ? std::string(made) : std::string();
}

}  // namespace ptxbench::testing
