#include "common/build_info.h"

#include <filesystem>

#include "absl/strings/str_cat.h"

namespace ptxbench {
namespace build_info_internal {
extern const char kCommit[];  // build_commit.cc, generated at build time.
}  // namespace build_info_internal

std::string BuildCommit() { return build_info_internal::kCommit; }

std::string CudaToolkitVersion() { return PTXBENCH_CUDA_TOOLKIT_VERSION; }

std::string VersionLine(const std::string& program) {
  return absl::StrCat(program, " ", kHarnessVersion, " (commit ", BuildCommit(), ", CUDA toolkit ",
                      CudaToolkitVersion(), ")");
}

std::string UserAgent() { return absl::StrCat("ptxbench/", kHarnessVersion); }

std::string SourceTreeDir(const std::string& name) {
  namespace fs = std::filesystem;
  if (fs::is_directory(name)) return fs::absolute(name).string();
  std::string built_from = absl::StrCat(PTXBENCH_SOURCE_DIR, "/", name);
  if (fs::is_directory(built_from)) return built_from;
  return name;
}

}  // namespace ptxbench
