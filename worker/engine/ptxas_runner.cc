#include "worker/engine/ptxas_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
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
};

// Runs `program args...` in `cwd` with stdin from /dev/null and stdout+stderr captured, killing
// it (SIGKILL, this child only) at the deadline.
absl::StatusOr<ChildResult> RunChild(const std::string& program,
                                     const std::vector<std::string>& args, const std::string& cwd,
                                     double max_seconds, size_t max_output_bytes) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe2: ", std::strerror(errno)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());

  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(program.c_str()));
  for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  // A fixed environment: the same messages on every machine, nothing of the worker's passed on.
  char locale[] = "LC_ALL=C";
  char* envp[] = {locale, nullptr};

  pid_t pid = 0;
  const int spawn_error = posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), envp);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (spawn_error != 0) {
    close(fds[0]);
    return absl::InternalError(
        absl::StrCat("cannot run ptxas at ", program, ": ", std::strerror(spawn_error)));
  }

  ChildResult result;
  const Clock::time_point deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                        std::chrono::duration<double>(max_seconds));
  char buffer[16384];
  bool eof = false;
  while (!eof) {
    const auto remaining =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (remaining <= 0) break;
    pollfd pfd{fds[0], POLLIN, 0};
    const int ready = poll(&pfd, 1, static_cast<int>(std::min<int64_t>(remaining, 1000)));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    const ssize_t n = read(fds[0], buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      eof = true;
      break;
    }
    const size_t room =
        max_output_bytes > result.output.size() ? max_output_bytes - result.output.size() : 0;
    const size_t keep = std::min(room, static_cast<size_t>(n));
    result.output.append(buffer, keep);
    result.dropped_bytes += static_cast<size_t>(n) - keep;
  }
  close(fds[0]);

  // The child closed its output (or the deadline passed): wait for it, up to the deadline.
  while (true) {
    const pid_t waited = waitpid(pid, &result.wait_status, WNOHANG);
    if (waited == pid) break;
    if (waited < 0 && errno != EINTR) {
      return absl::InternalError(absl::StrCat("waitpid: ", std::strerror(errno)));
    }
    if (Clock::now() >= deadline) {
      kill(pid, SIGKILL);
      result.killed_at_deadline = true;
      while (waitpid(pid, &result.wait_status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
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

absl::StatusOr<PtxasOutput> RunPtxas(const std::string& ptx, const std::string& arch,
                                     const std::vector<std::string>& options, double max_seconds,
                                     size_t max_output_bytes) {
  ASSIGN_OR_RETURN(TempDir dir, TempDir::Create());
  RETURN_IF_ERROR(WriteFile(absl::StrCat(dir.path(), "/", kInputName), ptx));
  std::vector<std::string> args = {absl::StrCat("-arch=", arch)};
  args.insert(args.end(), options.begin(), options.end());
  args.insert(args.end(), {kInputName, "-o", kOutputName});
  ASSIGN_OR_RETURN(ChildResult child,
                   RunChild(PtxasPath(), args, dir.path(), max_seconds, max_output_bytes));

  PtxasOutput output;
  output.log = std::move(child.output);
  if (child.dropped_bytes > 0) {
    absl::StrAppend(&output.log, "\n[ptxas output truncated: ", child.dropped_bytes,
                    " more bytes]\n");
  }
  if (child.killed_at_deadline) {
    output.timed_out = true;
    return output;
  }
  if (WIFSIGNALED(child.wait_status)) {
    absl::StrAppend(&output.log, "ptxas terminated by signal ", WTERMSIG(child.wait_status), "\n");
    return output;
  }
  if (!WIFEXITED(child.wait_status) || WEXITSTATUS(child.wait_status) != 0) return output;
  ASSIGN_OR_RETURN(output.cubin, ReadFile(absl::StrCat(dir.path(), "/", kOutputName)));
  output.ok = true;
  return output;
}

absl::StatusOr<std::string> PtxasVersion() {
  static const absl::StatusOr<std::string>* const kVersion = [] {
    auto dir = TempDir::Create();
    if (!dir.ok()) return new absl::StatusOr<std::string>(dir.status());
    auto child = RunChild(PtxasPath(), {"--version"}, dir->path(), 30, 1 << 16);
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
