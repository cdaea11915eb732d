#include "worker/engine/ptxas_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace ptxbench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// The input and output names ptxas sees: its messages name the input ("ptxas submission.ptx,
// line 5; error ..."), so a relative name in a private folder keeps host paths out of the log.
constexpr char kInputName[] = "submission.ptx";
constexpr char kOutputName[] = "submission.cubin";

class TempDir {
 public:
  static absl::StatusOr<TempDir> Create() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern =
        absl::StrCat(base != nullptr && *base != '\0' ? base : "/tmp", "/ptxbench_ptxas_XXXXXX");
    if (mkdtemp(pattern.data()) == nullptr) {
      return absl::InternalError(
          absl::StrCat("cannot create a temporary folder for ptxas: ", std::strerror(errno)));
    }
    return TempDir(pattern);
  }
  TempDir(TempDir&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  TempDir& operator=(TempDir&&) = delete;
  ~TempDir() {
    if (path_.empty()) return;
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  explicit TempDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

struct ChildResult {
  int wait_status = 0;
  bool killed_at_deadline = false;
  std::string output;
  size_t dropped_bytes = 0;
  uint64_t peak_rss_bytes = 0;
};

// Runs `program args...` in `cwd` with stdin from /dev/null and stdout+stderr captured, as the
// leader of its own process group, which is killed (SIGKILL) at the deadline.
absl::StatusOr<ChildResult> RunChild(const std::string& program,
                                     const std::vector<std::string>& args, const std::string& cwd,
                                     const std::string& library_path, double max_seconds,
                                     size_t max_output_bytes) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe2: ", std::strerror(errno)));
  }
  // Everything the child needs is built before fork: between fork and exec only
  // async-signal-safe calls.
  std::vector<std::string> argv_strings = {program};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  argv.reserve(argv_strings.size() + 1);
  for (std::string& arg : argv_strings) argv.push_back(arg.data());
  argv.push_back(nullptr);
  // A fixed environment: the same messages on every machine, nothing of the worker's passed on.
  std::vector<std::string> env_strings = {"LC_ALL=C"};
  if (!library_path.empty()) env_strings.push_back("LD_LIBRARY_PATH=" + library_path);
  std::vector<char*> envp;
  envp.reserve(env_strings.size() + 1);
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  int report[2];  // exec failure: the child writes its errno here (closed at exec).
  if (pipe2(report, O_CLOEXEC) != 0) {
    close(fds[0]);
    close(fds[1]);
    return absl::InternalError(absl::StrCat("pipe2: ", std::strerror(errno)));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    for (int fd : {fds[0], fds[1], report[0], report[1]}) close(fd);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int error = 0;
    if (getppid() != parent) _exit(126);
    const int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0)
      dup2(null_fd, 0);
    else
      close(0);
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    if (chdir(cwd.c_str()) != 0) error = errno;
    const int report_fd = fcntl(report[1], F_DUPFD_CLOEXEC, 3);
    if (report_fd > 3) close_range(3, static_cast<unsigned>(report_fd - 1), 0);
    close_range(static_cast<unsigned>(report_fd + 1), ~0U, 0);
    if (error == 0) {
      execve(argv[0], argv.data(), envp.data());
      error = errno;
    }
    [[maybe_unused]] const ssize_t written = write(report_fd, &error, sizeof(error));
    _exit(127);
  }
  setpgid(pid, pid);
  close(fds[1]);
  close(report[1]);
  int exec_error = 0;
  ssize_t got = 0;
  do {
    got = read(report[0], &exec_error, sizeof(exec_error));
  } while (got < 0 && errno == EINTR);
  close(report[0]);
  if (got == static_cast<ssize_t>(sizeof(exec_error))) {
    close(fds[0]);
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    return absl::InternalError(
        absl::StrCat("cannot run ptxas at ", program, ": ", std::strerror(exec_error)));
  }

  ChildResult result;
  const Clock::time_point deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                        std::chrono::duration<double>(max_seconds));
  char buffer[16384];
  while (true) {
    const auto remaining =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (remaining <= 0) break;
    pollfd pfd{fds[0], POLLIN, 0};
    const int ready = poll(&pfd, 1, static_cast<int>(std::min<int64_t>(remaining, 1000)));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    const ssize_t n = read(fds[0], buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    const size_t room =
        max_output_bytes > result.output.size() ? max_output_bytes - result.output.size() : 0;
    const size_t keep = std::min(room, static_cast<size_t>(n));
    result.output.append(buffer, keep);
    result.dropped_bytes += static_cast<size_t>(n) - keep;
  }
  close(fds[0]);

  // The child closed its output (or the deadline passed): wait for it, up to the deadline.
  rusage usage{};
  while (true) {
    const pid_t waited = wait4(pid, &result.wait_status, WNOHANG, &usage);
    if (waited == pid) break;
    if (waited < 0 && errno != EINTR) {
      return absl::InternalError(absl::StrCat("waitpid: ", std::strerror(errno)));
    }
    if (Clock::now() >= deadline) {
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      result.killed_at_deadline = true;
      while (wait4(pid, &result.wait_status, 0, &usage) < 0 && errno == EINTR) {
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  kill(-pid, SIGKILL);  // What it started and left behind.
  result.peak_rss_bytes = static_cast<uint64_t>(usage.ru_maxrss) * 1024;
  return result;
}

absl::Status WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InternalError(absl::StrCat("cannot read ", path));
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

}  // namespace

std::string PtxasPath() {
  if (const char* path = std::getenv("PTXBENCH_PTXAS"); path != nullptr && *path != '\0') {
    return path;
  }
  return PTXBENCH_PTXAS_DEFAULT_PATH;
}

absl::StatusOr<PtxasOutput> RunPtxas(const PtxasRun& run) {
  std::optional<TempDir> temp;
  std::string dir = run.work_dir;
  if (dir.empty()) {
    ASSIGN_OR_RETURN(TempDir created, TempDir::Create());
    dir = created.path();
    temp.emplace(std::move(created));
  }
  RETURN_IF_ERROR(WriteFile(absl::StrCat(dir, "/", kInputName), run.ptx));
  std::vector<std::string> args = {absl::StrCat("-arch=", run.arch)};
  args.insert(args.end(), run.options.begin(), run.options.end());
  args.insert(args.end(), {kInputName, "-o", kOutputName});
  ASSIGN_OR_RETURN(ChildResult child, RunChild(PtxasPath(), args, dir, run.library_path,
                                               run.max_seconds, run.max_output_bytes));

  PtxasOutput output;
  output.log = std::move(child.output);
  output.peak_rss_bytes = child.peak_rss_bytes;
  if (child.dropped_bytes > 0) {
    absl::StrAppend(&output.log, "\n[ptxas output truncated: ", child.dropped_bytes,
                    " more bytes]\n");
  }
  if (child.killed_at_deadline) {
    output.timed_out = true;
    return output;
  }
  if (WIFSIGNALED(child.wait_status)) {
    output.signal = WTERMSIG(child.wait_status);
    absl::StrAppend(&output.log, "ptxas terminated by signal ", output.signal, "\n");
    return output;
  }
  if (!WIFEXITED(child.wait_status) || WEXITSTATUS(child.wait_status) != 0) return output;
  ASSIGN_OR_RETURN(output.cubin, ReadFile(absl::StrCat(dir, "/", kOutputName)));
  output.ok = true;
  return output;
}

absl::StatusOr<std::string> PtxasVersion() {
  static const absl::StatusOr<std::string>* const kVersion = [] {
    auto dir = TempDir::Create();
    if (!dir.ok()) return new absl::StatusOr<std::string>(dir.status());
    auto child = RunChild(PtxasPath(), {"--version"}, dir->path(), "", 30, 1 << 16);
    if (!child.ok()) return new absl::StatusOr<std::string>(child.status());
    // "Cuda compilation tools, release 13.0, V13.0.88"
    const size_t at = child->output.find(", V");
    if (at == std::string::npos) {
      return new absl::StatusOr<std::string>(absl::InternalError(
          absl::StrCat("unexpected `ptxas --version` output: ", child->output)));
    }
    size_t end = at + 3;
    while (end < child->output.size() &&
           !std::isspace(static_cast<unsigned char>(child->output[end])))
      ++end;
    return new absl::StatusOr<std::string>(child->output.substr(at + 3, end - at - 3));
  }();
  return *kVersion;
}

}  // namespace ptxbench
