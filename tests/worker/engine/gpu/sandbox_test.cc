// The sandbox with real processes (/bin/sh scripts): the event channel, the watchdog that kills
// the whole process group, the minimal environment, the private directory, the network
// namespace, dropped privileges (when the test runs as root), rlimits and cancellation.
#include "worker/engine/sandbox.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "tests/support/temp_files.h"
#include "worker/engine/gpu/protocol.h"

namespace ptxbench::engine {
namespace {

struct TempDir {
  std::string path;
  TempDir() {
    bool root = geteuid() == 0;
    auto dir = CreatePrivateDir("/tmp", "sandbox-test-", root ? 65534 : -1, root ? 65534 : -1);
    REQUIRE(dir.ok());
    path = *dir;
  }
  ~TempDir() { RemoveTree(path); }
};

SandboxOptions Shell(const std::string& dir, const std::string& script, double wall = 20) {
  SandboxOptions o;
  o.argv = {"/bin/sh", "-c", script};
  o.private_dir = dir;
  o.env = MinimalEnv(dir);
  o.limits.wall_seconds = wall;
  return o;
}

TEST_CASE("commands in, events out on fd 3, stdout and stderr captured apart", "[sandbox]") {
  TempDir dir;
  auto s = Sandbox::Start(
      Shell(dir.path,
            "read line; echo \"{\\\"event\\\":\\\"echo\\\",\\\"got\\\":$line}\" >&3; "
            "echo '{\"event\":\"forged\"}'; echo to-stderr >&2"));
  REQUIRE(s.ok());
  REQUIRE((*s)->Send({{"x", 1}}).ok());
  auto event = (*s)->Next(10);
  REQUIRE(event.ok());
  REQUIRE(event->has_value());
  CHECK((**event)["event"] == "echo");
  CHECK((**event)["got"]["x"] == 1);
  auto end = (*s)->Next(10);
  REQUIRE(end.ok());
  CHECK_FALSE(end->has_value());  // A line printed on stdout is never an event.
  SandboxExit e = (*s)->Wait();
  CHECK(e.exited);
  CHECK(e.exit_code == 0);
  CHECK_FALSE(e.timed_out);
  CHECK(e.output_tail.find("forged") != std::string::npos);
  CHECK(e.output_tail.find("to-stderr") != std::string::npos);
}

// PR_SET_PDEATHSIG follows the thread that forked, not the process: a process started on a job's
// thread (the worker daemon's) and kept for the next job (the warm reference process) must
// outlive that thread, and still die with the supervisor.
TEST_CASE("a sandbox outlives the thread that started it", "[sandbox]") {
  TempDir dir;
  std::unique_ptr<Sandbox> kept;
  std::thread job([&] {
    auto s = Sandbox::Start(Shell(dir.path,
                                  "while read line; do echo \"{\\\"event\\\":\\\"echo\\\","
                                  "\\\"got\\\":$line}\" >&3; done"));
    REQUIRE(s.ok());
    kept = *std::move(s);
  });
  job.join();
  // Well past the moment a death signal tied to the ended thread would have killed it.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  REQUIRE(kept->Send({{"x", 7}}).ok());
  auto event = kept->Next(10);
  REQUIRE(event.ok());
  REQUIRE(event->has_value());
  CHECK((**event)["got"]["x"] == 7);
  kept->Kill();
  SandboxExit e = kept->Wait();
  CHECK(e.signal == SIGKILL);
  CHECK(e.wall_seconds > 0.3);
}

TEST_CASE("the evaluator starts with no signal blocked, whatever the caller's mask", "[sandbox]") {
  TempDir dir;
  std::string mask;
  std::thread caller([&] {
    sigset_t blocked;
    sigemptyset(&blocked);
    sigaddset(&blocked, SIGTERM);
    sigaddset(&blocked, SIGINT);
    pthread_sigmask(SIG_BLOCK, &blocked, nullptr);
    // Not through /bin/sh: dash clears the mask itself at start-up.
    SandboxOptions options = Shell(dir.path, "");
    options.argv = {"/bin/grep", "^SigBlk", "/proc/self/status"};
    auto s = Sandbox::Start(options);
    REQUIRE(s.ok());
    SandboxExit e = (*s)->Wait();
    mask = e.output_tail;
  });
  caller.join();
  INFO(mask);
  CHECK(mask.find("SigBlk:\t0000000000000000") != std::string::npos);
}

TEST_CASE("the watchdog kills the whole process group", "[sandbox]") {
  TempDir dir;
  auto start = std::chrono::steady_clock::now();
  auto s = Sandbox::Start(Shell(dir.path, "sleep 100 & echo $! > child.pid; sleep 100", 1.0));
  REQUIRE(s.ok());
  auto event = (*s)->Next();
  CHECK(event.status().code() == absl::StatusCode::kDeadlineExceeded);
  SandboxExit e = (*s)->Wait();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(e.timed_out);
  CHECK(e.signal == SIGKILL);
  CHECK(seconds < 5);
  std::string pid_text = testing::ReadWholeFile(dir.path + "/child.pid");
  REQUIRE(!pid_text.empty());
  int child = std::atoi(pid_text.c_str());
  // Dead: gone, or a zombie waiting for init to reap it.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::string stat = testing::ReadWholeFile("/proc/" + std::to_string(child) + "/stat");
  bool dead = stat.empty() || stat.find(") Z") != std::string::npos;
  CHECK(dead);
}

TEST_CASE("the environment is minimal and the private directory is home", "[sandbox]") {
  TempDir dir;
  setenv("PTXBENCH_TEST_SECRET_TOKEN", "do-not-leak", 1);
  // The operator's compile-jail policy reaches the evaluator (compile_jail.h).
  setenv("PTXBENCH_COMPILE_JAIL", "allow-unjailed", 1);
  SandboxOptions o = Shell(dir.path,
                           "env > env.txt; pwd > pwd.txt; ulimit -n > nofile.txt; "
                           "ulimit -c > core.txt; id -u > uid.txt; "
                           "readlink /proc/self/ns/net > netns.txt");
  o.env = MinimalEnv(dir.path);
  auto s = Sandbox::Start(o);
  unsetenv("PTXBENCH_TEST_SECRET_TOKEN");
  unsetenv("PTXBENCH_COMPILE_JAIL");
  REQUIRE(s.ok());
  SandboxExit e = (*s)->Wait();
  REQUIRE(e.exit_code == 0);
  std::string env = testing::ReadWholeFile(dir.path + "/env.txt");
  CHECK(env.find("do-not-leak") == std::string::npos);
  CHECK(env.find("PTXBENCH_COMPILE_JAIL=allow-unjailed\n") != std::string::npos);
  CHECK(env.find("HOME=" + dir.path) != std::string::npos);
  CHECK(env.find("TMPDIR=" + dir.path) != std::string::npos);
  CHECK(testing::ReadWholeFile(dir.path + "/pwd.txt") == dir.path + "\n");
  CHECK(testing::ReadWholeFile(dir.path + "/nofile.txt") == "512\n");
  CHECK(testing::ReadWholeFile(dir.path + "/core.txt") == "0\n");
  const SandboxIsolation& iso = (*s)->isolation();
  char own_ns[128] = {0};
  REQUIRE(readlink("/proc/self/ns/net", own_ns, sizeof own_ns - 1) > 0);
  if (iso.network_isolated) {
    CHECK(testing::ReadWholeFile(dir.path + "/netns.txt") != std::string(own_ns) + "\n");
  } else {
    WARN("network namespace not permitted here: " << iso.network_method);
  }
  if (geteuid() == 0) {
    CHECK(iso.privileges_dropped);
    CHECK(testing::ReadWholeFile(dir.path + "/uid.txt") == "65534\n");
    CHECK(iso.uid == 65534);
  } else {
    CHECK_FALSE(iso.privileges_dropped);
  }
}

TEST_CASE("cancellation kills the process", "[sandbox]") {
  TempDir dir;
  std::atomic<bool> cancel{false};
  SandboxOptions o = Shell(dir.path, "sleep 100", 60);
  o.cancel = &cancel;
  auto s = Sandbox::Start(o);
  REQUIRE(s.ok());
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    cancel = true;
  });
  auto event = (*s)->Next();
  t.join();
  CHECK(event.status().code() == absl::StatusCode::kCancelled);
  SandboxExit e = (*s)->Wait();
  CHECK(e.cancelled);
  CHECK_FALSE(e.timed_out);
}

TEST_CASE("a program that cannot start is an error, not a hang", "[sandbox]") {
  TempDir dir;
  SandboxOptions o = Shell(dir.path, "");
  o.argv = {"/nonexistent/evaluator"};
  auto s = Sandbox::Start(o);
  REQUIRE_FALSE(s.ok());
  CHECK(std::string(s.status().message()).find("execve") != std::string::npos);
}

TEST_CASE("malformed event lines are reported, not trusted", "[sandbox]") {
  TempDir dir;
  auto s = Sandbox::Start(Shell(dir.path, "echo 'not json' >&3"));
  REQUIRE(s.ok());
  auto event = (*s)->Next(10);
  CHECK(event.status().code() == absl::StatusCode::kDataLoss);
  (*s)->Wait();
}

TEST_CASE("private directories are 0700 and owned by the sandbox user", "[sandbox]") {
  TempDir dir;
  struct stat st;
  REQUIRE(stat(dir.path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  if (geteuid() == 0) CHECK(st.st_uid == 65534u);
}

}  // namespace
}  // namespace ptxbench::engine
