#include "worker/engine/local_eval.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace ptxbench::engine {
namespace {

// The first folder on the way from / to `dir` that the sandbox user cannot pass, or "" when
// every one has its execute bit for others (or `dir` does not exist: the engine says so).
std::string BlockedAncestor(const std::string& dir) {
  std::error_code error;
  const std::filesystem::path real = std::filesystem::canonical(dir, error);
  if (error) return "";
  std::filesystem::path at;
  for (const std::filesystem::path& part : real) {
    at /= part;
    struct stat info {};
    if (stat(at.c_str(), &info) != 0) return "";
    if ((info.st_mode & S_IXOTH) == 0) return at.string();
  }
  return "";
}

}  // namespace

LocalWorkRoot ChooseLocalWorkRoot() {
  const char* tmp = std::getenv("TMPDIR");
  const std::string wanted = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  if (geteuid() != 0) return {wanted, ""};
  const std::string blocked = BlockedAncestor(wanted);
  if (blocked.empty()) return {wanted, ""};
  for (const char* fallback : {"/tmp", "/var/tmp"}) {
    if (std::filesystem::is_directory(fallback) && BlockedAncestor(fallback).empty()) {
      return {fallback,
              absl::StrCat("TMPDIR ", wanted, " is not reachable by the sandbox user (", blocked,
                           " has no execute bit for others); working under ", fallback)};
    }
  }
  return {wanted, ""};  // Nothing better: the engine's error then names the folder.
}

}  // namespace ptxbench::engine
