// The process helper of the tests and benchmarks (tests/support/process.h) with real
// processes (/bin/sh): the log, the wait for a line, a process that ends before it, the stop
// (SIGTERM, then SIGKILL), process groups, and ptxbench-server's serving address.
#include "tests/support/process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "tests/support/temp_files.h"

namespace ptxbench::testing {
namespace {

TEST_CASE("process: the log holds stdout and stderr; a line is waited for") {
  ScopedTempDir dir;
  auto child = ChildProcess::Start(
      {"/bin/sh", "-c", "echo to-out; echo to-err >&2; sleep 0.2; echo ready now; sleep 30"},
      dir.path() + "/child.log");
  REQUIRE(child != nullptr);
  const std::optional<std::string> line = child->WaitForLogLine("ready", absl::Seconds(10));
  REQUIRE(line.has_value());
  CHECK(*line == "ready now");
  CHECK(absl::StrContains(child->Log(), "to-out\n"));
  CHECK(absl::StrContains(child->Log(), "to-err\n"));
  CHECK_FALSE(child->ended());
  CHECK_FALSE(child->Wait(absl::Milliseconds(50)).has_value());
}

TEST_CASE("process: a process that ends without the line is noticed before the timeout") {
  ScopedTempDir dir;
  auto child =
      ChildProcess::Start({"/bin/sh", "-c", "echo starting; exit 3"}, dir.path() + "/child.log");
  REQUIRE(child != nullptr);
  const absl::Time start = absl::Now();
  CHECK_FALSE(child->WaitForLogLine("serving", absl::Seconds(30)).has_value());
  CHECK(absl::Now() - start < absl::Seconds(10));
  REQUIRE(child->ended());
  const std::optional<int> status = child->Wait(absl::ZeroDuration());
  REQUIRE(status.has_value());
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 3);
  // A line written just before the end is still found.
  auto last_words = ChildProcess::Start({"/bin/sh", "-c",
                                         "echo ptxbench-server serving "
                                         "grpc=127.0.0.1:4242 metrics=off"},
                                        dir.path() + "/last.log");
  REQUIRE(last_words != nullptr);
  REQUIRE(last_words->Wait(absl::Seconds(10)).has_value());
  CHECK(WaitForServingAddress(*last_words, absl::Seconds(1)) == "127.0.0.1:4242");
  CHECK(WaitForServingAddress(*child, absl::Seconds(1)).empty());
}

TEST_CASE("process: Stop sends SIGTERM, and SIGKILL to a process that ignores it") {
  ScopedTempDir dir;
  auto polite =
      ChildProcess::Start({"/bin/sh", "-c", "echo up; exec sleep 30"}, dir.path() + "/polite.log");
  REQUIRE(polite != nullptr);
  REQUIRE(polite->WaitForLogLine("up", absl::Seconds(10)).has_value());
  int status = polite->Stop(absl::Seconds(10));
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGTERM);

  auto stubborn =
      ChildProcess::Start({"/bin/sh", "-c", "trap '' TERM; echo up; while :; do sleep 0.05; done"},
                          dir.path() + "/stubborn.log");
  REQUIRE(stubborn != nullptr);
  REQUIRE(stubborn->WaitForLogLine("up", absl::Seconds(10)).has_value());
  status = stubborn->Stop(absl::Milliseconds(300));
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
  CHECK(stubborn->ended());
}

TEST_CASE("process: its own process group unless asked to stay in ours") {
  ScopedTempDir dir;
  auto own =
      ChildProcess::Start({"/bin/sh", "-c", "echo up; exec sleep 30"}, dir.path() + "/own.log");
  auto ours = ChildProcess::Start({"/bin/sh", "-c", "echo up; exec sleep 30"},
                                  dir.path() + "/ours.log", {.own_process_group = false});
  REQUIRE(own != nullptr);
  REQUIRE(ours != nullptr);
  // setpgid runs before exec: once the program writes, its group is settled.
  REQUIRE(own->WaitForLogLine("up", absl::Seconds(10)).has_value());
  REQUIRE(ours->WaitForLogLine("up", absl::Seconds(10)).has_value());
  CHECK(getpgid(own->pid()) == own->pid());
  CHECK(getpgid(ours->pid()) == getpgrp());
}

TEST_CASE("process: a program that cannot run exits 127; RunCommand captures the output") {
  const CommandResult missing = RunCommand({"/nonexistent/program"}, absl::Seconds(10));
  CHECK(missing.exit_code == 127);
  const CommandResult echo =
      RunCommand({"/bin/sh", "-c", "echo hello; echo there >&2; exit 4"}, absl::Seconds(10));
  CHECK(echo.exit_code == 4);
  CHECK(echo.output == "hello\nthere\n");
  const CommandResult stdin_closed =
      RunCommand({"/bin/sh", "-c", "cat; echo done"}, absl::Seconds(10));
  CHECK(stdin_closed.exit_code == 0);  // Standard input is /dev/null: nothing waits on it.
  CHECK(stdin_closed.output == "done\n");
}

}  // namespace
}  // namespace ptxbench::testing
