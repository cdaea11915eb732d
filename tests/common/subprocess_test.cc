// common/subprocess: the one bounded child-process runner. Real processes throughout
// (/bin/sh, /usr/bin/env); the deadline and group kill are checked on grandchildren the test
// finds by pid afterwards.
#include "common/subprocess.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "catch2/catch.hpp"
#include "common/files.h"
#include "tests/support/temp_files.h"

namespace ptxbench {
namespace {

SubprocessOptions Shell(const std::string& script) {
  SubprocessOptions options;
  options.argv = {"/bin/sh", "-c", script};
  options.environment.inherit = {"PATH"};
  options.deadline = absl::Seconds(30);
  return options;
}

// Whether `pid` is gone or a zombie (killed, not yet reaped by whoever adopted it), waiting up
// to 5 s for the kernel to deliver the SIGKILL.
bool Dead(pid_t pid) {
  for (int i = 0; i < 500; ++i) {
    const std::string stat = ReadFileOrEmpty(absl::StrCat("/proc/", pid, "/stat"));
    const size_t name_end = stat.rfind(')');
    if (stat.empty() || (name_end != std::string::npos && name_end + 2 < stat.size() &&
                         stat[name_end + 2] == 'Z')) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

pid_t FirstLinePid(const std::string& output) {
  int pid = 0;
  const std::string first(absl::StripAsciiWhitespace(
      std::string(std::vector<std::string>(absl::StrSplit(output, '\n')).front())));
  REQUIRE(absl::SimpleAtoi(first, &pid));
  REQUIRE(pid > 1);
  return pid;
}

TEST_CASE("RunSubprocess: exit codes and signals are data, not errors") {
  auto three = RunSubprocess(Shell("exit 3"));
  REQUIRE(three.ok());
  CHECK(three->exit_code == 3);
  CHECK(three->term_signal == 0);
  CHECK_FALSE(three->timed_out);
  auto killed = RunSubprocess(Shell("kill -TERM $$"));
  REQUIRE(killed.ok());
  CHECK(killed->exit_code == -1);
  CHECK(killed->term_signal == SIGTERM);
}

TEST_CASE("RunSubprocess: standard input in, output and error captured apart") {
  SubprocessOptions options = Shell("cat; echo to-error >&2");
  options.stdin_bytes = std::string(300000, 'i') + "end";  // larger than a pipe's buffer
  auto run = RunSubprocess(options);
  REQUIRE(run.ok());
  CHECK(run->exit_code == 0);
  CHECK(run->stdout_bytes == options.stdin_bytes);
  CHECK(run->stderr_bytes == "to-error\n");
  // A child that never reads its input: the parent is not killed by SIGPIPE.
  SubprocessOptions deaf = Shell("exec 0<&-; exit 0");
  deaf.stdin_bytes = std::string(1 << 20, 'x');
  auto ignored = RunSubprocess(deaf);
  REQUIRE(ignored.ok());
  CHECK(ignored->exit_code == 0);
}

TEST_CASE("RunSubprocess: output beyond the caps is dropped, the child is not blocked") {
  SubprocessOptions options = Shell("head -c 5000000 /dev/zero; head -c 3000 /dev/zero >&2");
  options.max_stdout_bytes = 1000;
  options.max_stderr_bytes = 3000;
  auto run = RunSubprocess(options);
  REQUIRE(run.ok());
  CHECK(run->exit_code == 0);
  CHECK(run->stdout_bytes.size() == 1000);
  CHECK(run->stdout_dropped_bytes == 5000000 - 1000);
  CHECK(run->stderr_bytes.size() == 3000);
  CHECK(run->stderr_dropped_bytes == 0);
}

TEST_CASE("RunSubprocess: merged output interleaves as written; peak RSS is measured") {
  SubprocessOptions options = Shell("echo one; echo two >&2; echo three");
  options.merge_stderr_into_stdout = true;
  auto run = RunSubprocess(options);
  REQUIRE(run.ok());
  CHECK(run->stdout_bytes == "one\ntwo\nthree\n");
  CHECK(run->stderr_bytes.empty());
  CHECK(run->peak_rss_bytes > 0);
}

TEST_CASE("RunSubprocess: the deadline kills the whole group, grandchildren included") {
  SubprocessOptions options = Shell("sleep 1000 & echo $!; wait");
  options.deadline = absl::Milliseconds(500);
  const auto start = std::chrono::steady_clock::now();
  auto run = RunSubprocess(options);
  REQUIRE(run.ok());
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  CHECK(run->timed_out);
  CHECK(run->term_signal == SIGKILL);
  CHECK(Dead(FirstLinePid(run->stdout_bytes)));
}

TEST_CASE("RunSubprocess: a grandchild holding the pipes does not outlive the child") {
  // The shell exits at once; its `sleep` keeps stdout open. Without the group kill the call
  // would wait for the sleep (or the deadline) and leave it running.
  SubprocessOptions options = Shell("sleep 1000 & echo $!");
  options.deadline = absl::Seconds(60);
  const auto start = std::chrono::steady_clock::now();
  auto run = RunSubprocess(options);
  REQUIRE(run.ok());
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
  CHECK_FALSE(run->timed_out);
  CHECK(run->exit_code == 0);
  CHECK(Dead(FirstLinePid(run->stdout_bytes)));
}

TEST_CASE("RunSubprocess: the child gets exactly the stated environment, no parent secret") {
  REQUIRE(setenv("PTXBENCH_ADMIN_TOKEN", "admin-secret-123", 1) == 0);
  REQUIRE(setenv("PTXBENCH_DATABASE_URL", "postgresql://u:pw-secret@h/db", 1) == 0);
  SubprocessOptions options;
  options.argv = {"/usr/bin/env"};
  options.environment.inherit = {"PATH", "NOT_SET_ANYWHERE_PTXBENCH"};
  options.environment.set = {{"LC_ALL", "C"}, {"PATH", "/usr/bin:/bin"}};
  auto run = RunSubprocess(options);
  REQUIRE(run.ok());
  CHECK(run->exit_code == 0);
  CHECK(run->stdout_bytes == "PATH=/usr/bin:/bin\nLC_ALL=C\n");  // `set` wins over inherit
  CHECK_FALSE(absl::StrContains(run->stdout_bytes, "secret"));
  options.environment = {};
  auto empty = RunSubprocess(options);
  REQUIRE(empty.ok());
  CHECK(empty->stdout_bytes.empty());
  unsetenv("PTXBENCH_ADMIN_TOKEN");
  unsetenv("PTXBENCH_DATABASE_URL");
}

TEST_CASE("BuildChildEnvironment: names and values that cannot be an environment are refused") {
  char a[] = "A=1";
  char b[] = "B=two=2";
  char* parent[] = {a, b, nullptr};
  auto built = BuildChildEnvironment({.inherit = {"B", "A", "C"}}, parent);
  REQUIRE(built.ok());
  CHECK(*built == std::vector<std::string>{"B=two=2", "A=1"});
  for (const std::string& bad : {std::string(""), std::string("X=Y"), std::string("N\0M", 3)}) {
    auto refused = BuildChildEnvironment({.set = {{bad, "v"}}}, parent);
    CHECK(refused.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(absl::StrContains(refused.status().message(), "is not a variable name"));
  }
  auto nul_value = BuildChildEnvironment({.set = {{"V", std::string("a\0b", 3)}}}, parent);
  CHECK(nul_value.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(absl::StrContains(nul_value.status().message(), "the value of V holds a NUL byte"));
}

TEST_CASE("RunSubprocess: a missing or non-executable program is an error naming it") {
  SubprocessOptions missing;
  missing.argv = {"/nonexistent/ptxas", "-v"};
  auto absent = RunSubprocess(missing);
  REQUIRE(absent.status().code() == absl::StatusCode::kNotFound);
  CHECK(absl::StrContains(absent.status().message(), "/nonexistent/ptxas"));
  const testing::ScopedTempDir dir;
  const std::string plain = dir.path() + "/not-executable";
  std::ofstream(plain) << "#!/bin/sh\n";
  REQUIRE(chmod(plain.c_str(), 0644) == 0);
  SubprocessOptions denied;
  denied.argv = {plain};
  auto refused = RunSubprocess(denied);
  CHECK(refused.status().code() == absl::StatusCode::kPermissionDenied);
  CHECK(absl::StrContains(refused.status().message(), plain));
  CHECK(RunSubprocess(SubprocessOptions{}).status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("RunSubprocess: arguments travel whole; a NUL byte in one is refused") {
  SubprocessOptions options;
  options.argv = {"/usr/bin/printf", "%s|\\n", "a b", "", "c\td"};
  auto run = RunSubprocess(options);
  REQUIRE(run.ok());
  CHECK(run->stdout_bytes == "a b|\n|\nc\td|\n");
  options.argv = {"/usr/bin/printf", std::string("cut\0here", 8)};
  auto refused = RunSubprocess(options);
  REQUIRE(refused.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(absl::StrContains(refused.status().message(), "NUL byte"));
}

TEST_CASE("RunSubprocess: working folder and rlimits apply to the child") {
  const testing::ScopedTempDir dir;
  SubprocessOptions options = Shell("pwd; head -c 100000 /dev/zero > big; echo after");
  options.working_dir = dir.path();
  options.rlimits = {{RLIMIT_FSIZE, 4096}};
  auto run = RunSubprocess(options);
  REQUIRE(run.ok());
  CHECK(absl::StartsWith(run->stdout_bytes, dir.path() + "\n"));
  struct stat st {};
  REQUIRE(stat((dir.path() + "/big").c_str(), &st) == 0);
  CHECK(st.st_size <= 4096);  // head died of SIGXFSZ at the limit
  SubprocessOptions nowhere = Shell("true");
  nowhere.working_dir = dir.path() + "/missing";
  auto refused = RunSubprocess(nowhere);
  CHECK(refused.status().code() == absl::StatusCode::kNotFound);
  CHECK(absl::StrContains(refused.status().message(),
                          absl::StrCat("working folder ", dir.path(), "/missing")));
}

TEST_CASE("FindInPath: the first executable regular file of that name, in PATH's order") {
  const testing::ScopedTempDir dir;
  for (const char* sub : {"a", "b", "c"}) {
    REQUIRE(mkdir((dir.path() + "/" + sub).c_str(), 0755) == 0);
  }
  auto write = [&](const std::string& path, mode_t mode) {
    std::ofstream(path) << "#!/bin/sh\n";
    REQUIRE(chmod(path.c_str(), mode) == 0);
  };
  write(dir.path() + "/a/tool", 0644);                          // Not executable: passed over.
  REQUIRE(mkdir((dir.path() + "/b/tool").c_str(), 0755) == 0);  // A folder: passed over.
  write(dir.path() + "/c/tool", 0755);
  write(dir.path() + "/a/other", 0755);
  const std::string path_list = absl::StrCat(dir.path(), "/missing::", dir.path(),
                                             "/a:", dir.path(), "/b:", dir.path(), "/c");
  CHECK(FindInPath("tool", path_list) == dir.path() + "/c/tool");
  CHECK(FindInPath("other", path_list) == dir.path() + "/a/other");
  CHECK_FALSE(FindInPath("absent", path_list).has_value());
  CHECK_FALSE(FindInPath("tool", "").has_value());
  // A name with a folder in it is not looked up (it would escape the listed folders).
  CHECK_FALSE(FindInPath("../c/tool", absl::StrCat(dir.path(), "/a")).has_value());
  CHECK_FALSE(FindInPath("", path_list).has_value());
}

}  // namespace
}  // namespace ptxbench
