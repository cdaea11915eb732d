#include "worker/engine/ptxas_runner.h"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/files.h"
#include "common/status.h"
#include "common/subprocess.h"

namespace ptxbench {
namespace {

namespace fs = std::filesystem;

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

// `ptxas args...` in `dir`, with one log of what it writes to stdout and stderr, in the order
// written, killed with its process group at the deadline. Its whole environment: the same
// messages on every machine (LC_ALL=C), the jail's library folder when run there, and nothing
// of the worker's (its token, its database URL).
SubprocessOptions PtxasCommand(const std::vector<std::string>& args, const std::string& dir,
                               const std::string& library_path, double max_seconds,
                               size_t max_output_bytes) {
  SubprocessOptions ptxas;
  ptxas.argv = {PtxasPath()};
  ptxas.argv.insert(ptxas.argv.end(), args.begin(), args.end());
  ptxas.name = "ptxas";
  ptxas.environment.set = {{"LC_ALL", "C"}};
  if (!library_path.empty()) ptxas.environment.set.emplace_back("LD_LIBRARY_PATH", library_path);
  ptxas.working_dir = dir;
  ptxas.merge_stderr_into_stdout = true;
  ptxas.max_stdout_bytes = max_output_bytes;
  ptxas.deadline = absl::Seconds(max_seconds);
  return ptxas;
}

// Not being able to start ptxas is the worker's problem, never the submission's: kInternal.
absl::StatusOr<SubprocessResult> RunPtxasCommand(const SubprocessOptions& ptxas) {
  absl::StatusOr<SubprocessResult> child = RunSubprocess(ptxas);
  if (!child.ok()) return absl::InternalError(child.status().message());
  return child;
}

absl::Status WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

// What ptxas may write before reading its cubin is refused: far above the compile stage's
// own max_cubin_bytes (64 MiB by default), which it applies to what is read here and reports
// with the size.
constexpr size_t kMaxPtxasOutputBytes = size_t{1} << 30;

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
  ASSIGN_OR_RETURN(SubprocessResult child,
                   RunPtxasCommand(PtxasCommand(args, dir, run.library_path, run.max_seconds,
                                                run.max_output_bytes)));

  PtxasOutput output;
  output.log = std::move(child.stdout_bytes);
  output.peak_rss_bytes = child.peak_rss_bytes;
  if (child.stdout_dropped_bytes > 0) {
    absl::StrAppend(&output.log, "\n[ptxas output truncated: ", child.stdout_dropped_bytes,
                    " more bytes]\n");
  }
  if (child.timed_out) {
    output.timed_out = true;
    return output;
  }
  if (child.term_signal != 0) {
    output.signal = child.term_signal;
    absl::StrAppend(&output.log, "ptxas terminated by signal ", output.signal, "\n");
    return output;
  }
  if (child.exit_code != 0) return output;
  ASSIGN_OR_RETURN(output.cubin,
                   ReadFileToString(absl::StrCat(dir, "/", kOutputName), "ptxas's cubin",
                                    {.max_bytes = kMaxPtxasOutputBytes}));
  output.ok = true;
  return output;
}

absl::StatusOr<std::string> PtxasVersion() {
  static const absl::StatusOr<std::string>* const kVersion = [] {
    auto dir = TempDir::Create();
    if (!dir.ok()) return new absl::StatusOr<std::string>(dir.status());
    auto child = RunPtxasCommand(PtxasCommand({"--version"}, dir->path(), "", 30, 1 << 16));
    if (!child.ok()) return new absl::StatusOr<std::string>(child.status());
    // "Cuda compilation tools, release 13.0, V13.0.88"
    const size_t at = child->stdout_bytes.find(", V");
    if (at == std::string::npos) {
      return new absl::StatusOr<std::string>(absl::InternalError(
          absl::StrCat("unexpected `ptxas --version` output: ", child->stdout_bytes)));
    }
    size_t end = at + 3;
    while (end < child->stdout_bytes.size() &&
           !std::isspace(static_cast<unsigned char>(child->stdout_bytes[end])))
      ++end;
    return new absl::StatusOr<std::string>(child->stdout_bytes.substr(at + 3, end - at - 3));
  }();
  return *kVersion;
}

}  // namespace ptxbench
