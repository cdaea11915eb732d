// Files for tests: a temporary folder that removes itself, reading a whole file, and an
// environment variable set for one scope.
#ifndef PTXBENCH_TESTS_SUPPORT_TEMP_FILES_H_
#define PTXBENCH_TESTS_SUPPORT_TEMP_FILES_H_

#include <optional>
#include <string>

namespace ptxbench::testing {

// A fresh folder under $TMPDIR (or /tmp), named `prefix` + random characters, removed with
// everything in it when the object goes (whoever owns the files: tests running as root hand
// some to other users). Fails the current test when the folder cannot be made.
class ScopedTempDir {
 public:
  explicit ScopedTempDir(const std::string& prefix = "ptxbench-test-");
  ~ScopedTempDir();
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Sets the environment variable `name` to `value` (unsets it for nullopt) and restores what it
// was when the object goes. Tests that read or pass on the environment (TMPDIR, PATH, a secret
// that must not reach a child) change it only for their own scope.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::optional<std::string>& value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// The file's bytes; empty when it cannot be read.
std::string ReadWholeFile(const std::string& path);

}  // namespace ptxbench::testing

#endif  // PTXBENCH_TESTS_SUPPORT_TEMP_FILES_H_
