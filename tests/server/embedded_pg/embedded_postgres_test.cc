// The embedded PostgreSQL with the real Debian binaries: data survives a restart, a second
// owner is refused, and a cluster whose owner was SIGKILLed (leaving its postmaster running)
// starts again with its data. Needs no PTXBENCH_TEST_DATABASE_URL: it runs its own clusters.
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/embedded_pg/embedded_postgres.h"
#include "server/store/database.h"
#include "tests/support/status_testing.h"
#include "tests/support/temp_files.h"

namespace ptxbench::embedded_pg {
namespace {

namespace fs = std::filesystem;
using ::ptxbench::testing::ScopedTempDir;
using ::ptxbench::testing::ValueOrFail;

std::string Notes(const std::string& url) {
  store::SqlResult result = ValueOrFail(store::RunSql(url, "SELECT text FROM notes"));
  REQUIRE(result.rows.size() == 1);
  return result.rows[0][0].value();
}

std::optional<pid_t> PostmasterPid(const std::string& data_dir) {
  std::ifstream in(data_dir + "/pgdata/postmaster.pid");
  std::string line;
  pid_t pid = 0;
  if (!std::getline(in, line) || !absl::SimpleAtoi(line, &pid)) return std::nullopt;
  return pid;
}

EmbeddedPostgres::Options At(const std::string& data_dir,
                             const std::string& pg_bin_dir = "/usr/lib/postgresql/15/bin") {
  EmbeddedPostgres::Options options;
  options.data_dir = data_dir;
  options.pg_bin_dir = pg_bin_dir;
  return options;
}

// Alive and not a zombie: an orphaned postmaster is reparented to PID 1, which may reap it
// late, and a zombie is as dead as a process gets.
bool Alive(pid_t pid) {
  if (kill(pid, 0) != 0 && errno != EPERM) return false;
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t end_of_name = text.rfind(')');
  return end_of_name == std::string::npos || text.substr(end_of_name + 2, 1) != "Z";
}

// pg_ctl stop returns once the postmaster removed its pid file, a moment before it exits.
bool GoneWithin(pid_t pid, absl::Duration limit) {
  const absl::Time deadline = absl::Now() + limit;
  while (Alive(pid)) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

TEST_CASE("the embedded cluster keeps its data across a stop and a start", "[embedded_pg]") {
  ScopedTempDir dir("ptxbench-embedded-pg-");
  std::string first_url;
  {
    auto postgres = ValueOrFail(EmbeddedPostgres::Start(At(dir.path())));
    first_url = postgres->database_url();
    REQUIRE_THAT(first_url, Catch::StartsWith("postgresql://ptxbench:"));
    REQUIRE_THAT(first_url, Catch::Contains("@127.0.0.1:"));
    REQUIRE_THAT(first_url, Catch::EndsWith("/ptxbench"));
    REQUIRE_OK(store::RunSql(first_url,
                             "CREATE TABLE notes (text text); INSERT INTO notes VALUES ('kept')"));
    // Loopback only, password required.
    REQUIRE(ValueOrFail(store::RunSql(first_url, "SHOW listen_addresses")).rows[0][0] ==
            "127.0.0.1");
    REQUIRE_FALSE(store::RunSql(absl::StrCat("postgresql://ptxbench:wrong@127.0.0.1:",
                                             postgres->port(), "/ptxbench"),
                                "SELECT 1")
                      .ok());
    // One owner per data_dir.
    auto second = EmbeddedPostgres::Start(At(dir.path()));
    REQUIRE(absl::IsFailedPrecondition(second.status()));
    REQUIRE_THAT(std::string(second.status().message()), Catch::Contains("in use"));

    REQUIRE_OK(postgres->Stop());
    REQUIRE_OK(postgres->Stop());  // Idempotent.
    REQUIRE(absl::IsUnavailable(store::RunSql(first_url, "SELECT 1").status()));
  }
  auto again = ValueOrFail(EmbeddedPostgres::Start(At(dir.path())));
  REQUIRE(Notes(again->database_url()) == "kept");
  REQUIRE_OK(again->Stop());
}

TEST_CASE("the embedded cluster starts again after its owner was SIGKILLed", "[embedded_pg]") {
  ScopedTempDir dir("ptxbench-embedded-pg-");
  int out[2];
  REQUIRE(pipe(out) == 0);
  const pid_t owner = fork();
  REQUIRE(owner >= 0);
  if (owner == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    close(out[1]);
    execl(PTXBENCH_EMBEDDED_PG_HELPER, PTXBENCH_EMBEDDED_PG_HELPER, dir.path().c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  // Wait (bounded) for "READY <url>" from the owner.
  std::string line;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (!absl::StrContains(line, "\n") && absl::Now() < deadline) {
    pollfd readable = {out[0], POLLIN, 0};
    if (poll(&readable, 1, 1000) <= 0) continue;
    char buffer[512];
    const ssize_t n = read(out[0], buffer, sizeof(buffer));
    if (n <= 0) break;
    line.append(buffer, n);
  }
  close(out[0]);
  INFO("helper said: " << line);
  REQUIRE_THAT(line, Catch::StartsWith("READY "));

  REQUIRE(kill(owner, SIGKILL) == 0);
  int status = 0;
  REQUIRE(waitpid(owner, &status, 0) == owner);
  REQUIRE(WIFSIGNALED(status));
  // The owner is gone; its postmaster is not.
  std::optional<pid_t> orphan = PostmasterPid(dir.path());
  REQUIRE(orphan.has_value());
  REQUIRE(Alive(*orphan));

  auto postgres = ValueOrFail(EmbeddedPostgres::Start(At(dir.path())));
  REQUIRE_THAT(Notes(postgres->database_url()), Catch::StartsWith("written by pid "));
  // The orphan was stopped, not left running beside the new server.
  REQUIRE(GoneWithin(*orphan, absl::Seconds(10)));
  REQUIRE(PostmasterPid(dir.path()) != orphan);
  REQUIRE_OK(postgres->Stop());
  REQUIRE_FALSE(PostmasterPid(dir.path()).has_value());
}

TEST_CASE("missing PostgreSQL binaries are named with their package", "[embedded_pg]") {
  ScopedTempDir dir("ptxbench-embedded-pg-");
  auto postgres = EmbeddedPostgres::Start(At(dir.path(), "/nonexistent/pg/bin"));
  REQUIRE(absl::IsFailedPrecondition(postgres.status()));
  REQUIRE_THAT(std::string(postgres.status().message()), Catch::Contains("postgresql-15"));
  REQUIRE_THAT(std::string(postgres.status().message()),
               Catch::Contains("/nonexistent/pg/bin/initdb"));
  REQUIRE_STATUS(EmbeddedPostgres::Start(At("")), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ptxbench::embedded_pg
