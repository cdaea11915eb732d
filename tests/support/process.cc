#include "tests/support/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace ptxbench::testing {
namespace {

[[noreturn]] void ExecOrDie(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  execv(args[0], args.data());
  _exit(127);
}

}  // namespace

std::unique_ptr<ChildProcess> ChildProcess::Start(const std::vector<std::string>& argv,
                                                  const std::string& log_path) {
  const pid_t pid = fork();
  if (pid < 0) return nullptr;
  if (pid == 0) {
    const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      close(fd);
    }
    // Its own process group, so a test's SIGKILL reaches only this program and its children.
    setpgid(0, 0);
    ExecOrDie(argv);
  }
  return std::unique_ptr<ChildProcess>(new ChildProcess(pid, log_path));
}

ChildProcess::~ChildProcess() {
  if (!reaped_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

std::string ChildProcess::Log() const {
  std::ifstream in(log_path_);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void ChildProcess::Signal(int signal) {
  if (!reaped_) kill(pid_, signal);
}

std::optional<int> ChildProcess::Wait(absl::Duration timeout) {
  if (reaped_) return 0;
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      reaped_ = true;
      return status;
    }
    if (absl::Now() > deadline) return std::nullopt;
    absl::SleepFor(absl::Milliseconds(20));
  }
}

std::optional<std::string> ChildProcess::WaitForLogLine(const std::string& needle,
                                                        absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    for (absl::string_view line : absl::StrSplit(Log(), '\n')) {
      if (line.find(needle) != absl::string_view::npos) return std::string(line);
    }
    if (absl::Now() > deadline) return std::nullopt;
    absl::SleepFor(absl::Milliseconds(50));
  }
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
