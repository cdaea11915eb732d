// The embedded PostgreSQL with the real Debian binaries: data survives a restart, a second
// owner is refused, a cluster whose owner was SIGKILLed (leaving its postmaster running)
// starts again with its data, a postmaster killed under its owner is restarted by Restart(),
// the server connects as a role without superuser rights, and the data folder's files are
// never written through links another user planted (issue 12, "High": the exploits are the
// tests). Needs no PTXBENCH_TEST_DATABASE_URL: it runs its own clusters.
#include "server/embedded_pg/embedded_postgres.h"

#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdlib>
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
#include "common/files.h"
#include "server/store/database.h"
#include "tests/support/status_testing.h"
#include "tests/support/temp_files.h"

namespace ptxbench::embedded_pg {
namespace {

namespace fs = std::filesystem;
using ::ptxbench::testing::ReadWholeFile;
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
  // A process that exits meanwhile reads as "" (common/files.h says why not ifstream).
  const std::string text = ReadFileOrEmpty(absl::StrCat("/proc/", pid, "/stat"));
  if (text.empty()) return false;
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
    REQUIRE_THAT(first_url, Catch::StartsWith("postgresql://ptxbench_app:"));
    REQUIRE_THAT(first_url, Catch::Contains("@127.0.0.1:"));
    REQUIRE_THAT(first_url, Catch::EndsWith("/ptxbench"));
    REQUIRE_OK(store::RunSql(first_url,
                             "CREATE TABLE notes (text text); INSERT INTO notes VALUES ('kept')"));
    // Loopback only, password required.
    REQUIRE(ValueOrFail(store::RunSql(first_url, "SHOW listen_addresses")).rows[0][0] ==
            "127.0.0.1");
    REQUIRE_FALSE(store::RunSql(absl::StrCat("postgresql://ptxbench_app:wrong@127.0.0.1:",
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

TEST_CASE("PostgreSQL's processes never see the server's secrets", "[embedded_pg]") {
  // What a deployment puts in the server's environment (docs/operations.md).
  setenv("PTXBENCH_ADMIN_TOKEN", "admin-secret-2b7e", 1);
  setenv("PTXBENCH_DATABASE_URL", "postgresql://u:db-secret-c4d1@elsewhere/db", 1);
  ScopedTempDir dir("ptxbench-embedded-pg-");
  auto postgres = ValueOrFail(EmbeddedPostgres::Start(At(dir.path())));
  unsetenv("PTXBENCH_ADMIN_TOKEN");
  unsetenv("PTXBENCH_DATABASE_URL");
  // A backend's child inherits the postmaster's environment as pg_ctl started it (the
  // postmaster's own /proc/<pid>/environ is overwritten by its process title, so it would
  // prove nothing). COPY FROM PROGRAM runs `env` under the backend.
  store::SqlResult env = ValueOrFail(
      store::RunSql(postgres->superuser_url("postgres"),
                    "CREATE TEMP TABLE child_env (line text); COPY child_env FROM PROGRAM 'env'; "
                    "SELECT line FROM child_env"));
  std::string all;
  for (const auto& row : env.rows) absl::StrAppend(&all, row[0].value_or(""), "\n");
  INFO(all);
  CHECK(absl::StrContains(all, "PATH="));
  CHECK_FALSE(absl::StrContains(all, "secret"));
  CHECK_FALSE(absl::StrContains(all, "PTXBENCH_"));
  REQUIRE_OK(postgres->Stop());
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

TEST_CASE("a postmaster killed under its owner is started again by Restart", "[embedded_pg]") {
  ScopedTempDir dir("ptxbench-embedded-pg-");
  auto postgres = ValueOrFail(EmbeddedPostgres::Start(At(dir.path())));
  REQUIRE(postgres->Running());
  REQUIRE_OK(
      store::RunSql(postgres->database_url(),
                    "CREATE TABLE notes (text text); INSERT INTO notes VALUES ('committed')"));
  const int port = postgres->port();
  const std::optional<pid_t> first = postgres->postmaster_pid();
  REQUIRE(first.has_value());
  REQUIRE(kill(*first, SIGKILL) == 0);
  REQUIRE(GoneWithin(*first, absl::Seconds(10)));
  REQUIRE_FALSE(postgres->Running());
  REQUIRE(absl::IsUnavailable(store::RunSql(postgres->database_url(), "SELECT 1").status()));

  // Backends of the killed postmaster may hold its shared memory for a moment; the server's
  // supervisor retries with backoff, and so does this test.
  absl::Status restarted;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!(restarted = postgres->Restart()).ok() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(500));
  }
  REQUIRE_OK(restarted);
  REQUIRE(postgres->Running());
  REQUIRE(postgres->port() == port);  // The store's URL stays valid.
  REQUIRE(postgres->postmaster_pid() != first);
  REQUIRE(Notes(postgres->database_url()) == "committed");  // WAL replayed: nothing lost.
  REQUIRE_OK(postgres->Restart());                          // Running: nothing to do.
  REQUIRE_OK(postgres->Stop());
  REQUIRE_STATUS(postgres->Restart(), absl::StatusCode::kFailedPrecondition);
}

// pg_ctl start -w gives up after its timeout while the postmaster it started goes on coming up
// (under load); the next Restart() must keep that postmaster, not fail on its pid file forever.
// Simulated: the postmaster is killed, then started again on the same port behind the owner's
// back, as pg_ctl of a timed-out attempt would have left it.
TEST_CASE("Restart keeps a postmaster an earlier start attempt left coming up", "[embedded_pg]") {
  ScopedTempDir dir("ptxbench-embedded-pg-");
  auto postgres = ValueOrFail(EmbeddedPostgres::Start(At(dir.path())));
  REQUIRE_OK(
      store::RunSql(postgres->database_url(),
                    "CREATE TABLE notes (text text); INSERT INTO notes VALUES ('committed')"));
  const int port = postgres->port();
  const std::optional<pid_t> first = postgres->postmaster_pid();
  REQUIRE(first.has_value());
  REQUIRE(kill(*first, SIGKILL) == 0);
  REQUIRE(GoneWithin(*first, absl::Seconds(10)));

  // As the cluster's owner (postgres when this runs as root), the options StartServer uses.
  const std::string pgdata = dir.path() + "/pgdata";
  struct stat owner_stat {};
  REQUIRE(stat(pgdata.c_str(), &owner_stat) == 0);
  const passwd* owner = getpwuid(owner_stat.st_uid);
  REQUIRE(owner != nullptr);
  const std::string as_owner =
      geteuid() == owner_stat.st_uid ? "" : absl::StrCat("runuser -u ", owner->pw_name, " -- ");
  const std::string start = absl::StrCat(
      as_owner, "/usr/lib/postgresql/15/bin/pg_ctl start -D ", pgdata, " -l ", pgdata,
      "/external.log -w -t 60 -o \"-p ", port,
      " -c listen_addresses=127.0.0.1 -c unix_socket_directories=''\" >/dev/null 2>&1");
  // The killed postmaster's backends may hold its shared memory for a moment.
  int rc = -1;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while ((rc = std::system(start.c_str())) != 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(500));
  }
  REQUIRE(rc == 0);
  const std::optional<pid_t> external = PostmasterPid(dir.path());
  REQUIRE(external.has_value());
  REQUIRE(Alive(*external));

  REQUIRE_OK(postgres->Restart());
  CHECK(postgres->Running());
  CHECK(postgres->postmaster_pid() == external);  // Kept, not replaced.
  CHECK(postgres->port() == port);
  CHECK(Notes(postgres->database_url()) == "committed");
  REQUIRE_OK(postgres->Stop());
  CHECK(GoneWithin(*external, absl::Seconds(10)));
}

TEST_CASE("the server's role is not a superuser and owns only its database", "[embedded_pg]") {
  ScopedTempDir dir("ptxbench-embedded-pg-");
  auto postgres = ValueOrFail(EmbeddedPostgres::Start(At(dir.path())));
  const std::string url = postgres->database_url();
  store::SqlResult me = ValueOrFail(
      store::RunSql(url,
                    "SELECT current_user, rolsuper, rolcreaterole, rolcreatedb FROM pg_roles "
                    "WHERE rolname = current_user"));
  REQUIRE(me.rows.at(0)[0] == "ptxbench_app");
  REQUIRE(me.rows.at(0)[1] == "f");
  REQUIRE(me.rows.at(0)[2] == "f");
  REQUIRE(me.rows.at(0)[3] == "f");
  // What a SQL injection would reach for with superuser rights.
  REQUIRE_FALSE(store::RunSql(url, "SELECT pg_read_file('/etc/passwd')").ok());
  REQUIRE_FALSE(store::RunSql(url, "COPY (SELECT 1) TO PROGRAM 'true'").ok());
  REQUIRE_FALSE(store::RunSql(url, "ALTER SYSTEM SET listen_addresses = '*'").ok());
  REQUIRE_FALSE(store::RunSql(url, "CREATE ROLE intruder LOGIN SUPERUSER").ok());
  // The migrations' work: it owns the database, so it may create and alter its objects.
  REQUIRE_OK(
      store::RunSql(url, "CREATE TABLE t (id bigserial PRIMARY KEY); ALTER TABLE t ADD x int"));
  REQUIRE(ValueOrFail(store::RunSql(url,
                                    "SELECT pg_get_userbyid(datdba) FROM pg_database "
                                    "WHERE datname = current_database()"))
              .rows.at(0)[0] == "ptxbench_app");
  // The maintenance database is closed to it.
  REQUIRE_FALSE(store::RunSql(url.substr(0, url.rfind('/')) + "/postgres", "SELECT 1").ok());
  // The superuser is still there for the owner's own start-up work.
  REQUIRE(ValueOrFail(store::RunSql(postgres->superuser_url("postgres"),
                                    "SELECT rolsuper FROM pg_roles WHERE rolname = current_user"))
              .rows.at(0)[0] == "t");
  REQUIRE_OK(postgres->Stop());
}

TEST_CASE("objects a superuser created before the role existed are handed to it", "[embedded_pg]") {
  ScopedTempDir dir("ptxbench-embedded-pg-");
  {
    auto postgres = ValueOrFail(EmbeddedPostgres::Start(At(dir.path())));
    // A cluster of an earlier version: every object made by the superuser.
    REQUIRE_OK(store::RunSql(postgres->superuser_url("ptxbench"), R"sql(
      CREATE TYPE mood AS ENUM ('calm', 'busy');
      CREATE DOMAIN positive AS integer CHECK (VALUE > 0);
      CREATE SEQUENCE free_counter;
      CREATE TABLE legacy (id bigserial PRIMARY KEY, note text, m mood, p positive,
                           n bigint GENERATED ALWAYS AS IDENTITY);
      CREATE VIEW legacy_view AS SELECT id, note FROM legacy;
      CREATE FUNCTION legacy_touch() RETURNS trigger LANGUAGE plpgsql AS
        $$BEGIN NEW.note := coalesce(NEW.note, 'touched'); RETURN NEW; END$$;
      CREATE TRIGGER legacy_touch BEFORE INSERT ON legacy FOR EACH ROW EXECUTE FUNCTION legacy_touch();
      INSERT INTO legacy (note, m, p) VALUES ('old', 'calm', 1);
    )sql"));
    REQUIRE_FALSE(store::RunSql(postgres->database_url(), "ALTER TABLE legacy ADD extra int").ok());
    REQUIRE_OK(postgres->Stop());
  }
  auto postgres = ValueOrFail(EmbeddedPostgres::Start(At(dir.path())));
  const std::string url = postgres->database_url();
  store::SqlResult foreign = ValueOrFail(store::RunSql(url, R"sql(
    SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = 'public' AND pg_get_userbyid(c.relowner) <> 'ptxbench_app'
    UNION ALL SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
      WHERE n.nspname = 'public' AND pg_get_userbyid(p.proowner) <> 'ptxbench_app'
    UNION ALL SELECT t.typname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
      WHERE n.nspname = 'public' AND pg_get_userbyid(t.typowner) <> 'ptxbench_app'
  )sql"));
  INFO("not handed over: " << foreign.rows.size());
  REQUIRE(foreign.rows.empty());
  REQUIRE_OK(store::RunSql(url,
                           "ALTER TABLE legacy ADD extra int; INSERT INTO legacy (m, p) "
                           "VALUES ('busy', 2); SELECT nextval('free_counter')"));
  REQUIRE(ValueOrFail(store::RunSql(url, "SELECT note FROM legacy_view ORDER BY id DESC LIMIT 1"))
              .rows.at(0)[0] == "touched");
  REQUIRE_OK(postgres->Stop());
}

uid_t NobodyUid() {
  const passwd* nobody = getpwnam("nobody");
  REQUIRE(nobody != nullptr);
  return nobody->pw_uid;
}

struct FileFacts {
  std::string contents;
  mode_t mode = 0;
  uid_t uid = 0;
  bool operator==(const FileFacts&) const = default;
};

FileFacts FactsOf(const std::string& path) {
  struct stat st;
  REQUIRE(stat(path.c_str(), &st) == 0);
  return {ReadWholeFile(path), st.st_mode & 07777, st.st_uid};
}

// The exploit of issue 12: another local user prepares the data folder under a shared parent
// (sticky, like /tmp) before the root-run server first starts, with 'password' pointing at a
// file of root's. The old start wrote the password into it, chmodded it 0600 and chowned it to
// 'postgres'.
TEST_CASE("a data folder prepared by another user with planted links is refused", "[embedded_pg]") {
  if (geteuid() != 0) {
    WARN("not root: the planted-symlink exploit needs root to act as another user");
    return;
  }
  ScopedTempDir root("ptxbench-embedded-pg-");
  const std::string shared = root.path() + "/shared";
  REQUIRE(mkdir(shared.c_str(), 0755) == 0);
  REQUIRE(chmod(shared.c_str(), 01777) == 0);
  const std::string victim = root.path() + "/shadow";
  {
    std::ofstream out(victim);
    out << "root:$6$precious:19000:0:99999:7:::\n";
  }
  REQUIRE(chmod(victim.c_str(), 0640) == 0);
  const FileFacts before = FactsOf(victim);
  const uid_t nobody = NobodyUid();

  SECTION("the folder belongs to the other user") {
    const std::string data = shared + "/ptxbench";
    REQUIRE(mkdir(data.c_str(), 0777) == 0);
    REQUIRE(chmod(data.c_str(), 0777) == 0);
    REQUIRE(chown(data.c_str(), nobody, static_cast<gid_t>(-1)) == 0);
    for (const char* name : {"password", "app_password", "owner.lock", "postgresql.log"}) {
      const std::string link = data + "/" + name;
      REQUIRE(symlink(victim.c_str(), link.c_str()) == 0);
      REQUIRE(lchown(link.c_str(), nobody, static_cast<gid_t>(-1)) == 0);
    }
    auto refused = EmbeddedPostgres::Start(At(data));
    REQUIRE(absl::IsFailedPrecondition(refused.status()));
    REQUIRE_THAT(std::string(refused.status().message()), Catch::Contains(data));
  }
  SECTION("the folder is the other user's symlink to a folder of root's") {
    const std::string target = root.path() + "/etc";
    REQUIRE(mkdir(target.c_str(), 0755) == 0);
    const std::string data = shared + "/ptxbench";
    REQUIRE(symlink(target.c_str(), data.c_str()) == 0);
    REQUIRE(lchown(data.c_str(), nobody, static_cast<gid_t>(-1)) == 0);
    auto refused = EmbeddedPostgres::Start(At(data + "/postgres"));
    REQUIRE(absl::IsFailedPrecondition(refused.status()));
    REQUIRE_THAT(std::string(refused.status().message()), Catch::Contains("symlink owned by uid"));
    REQUIRE_FALSE(std::filesystem::exists(target + "/postgres"));
  }
  SECTION("a parent is writable by everyone without the sticky bit") {
    REQUIRE(chmod(shared.c_str(), 0777) == 0);
    auto refused = EmbeddedPostgres::Start(At(shared + "/ptxbench"));
    REQUIRE(absl::IsFailedPrecondition(refused.status()));
    REQUIRE_THAT(std::string(refused.status().message()),
                 Catch::Contains(shared + " is writable by other users"));
    REQUIRE_FALSE(std::filesystem::exists(shared + "/ptxbench"));
  }
  REQUIRE(FactsOf(victim) == before);  // Not written, not chmodded, not chowned.
}

// 'postgres' owns the data folder when the server runs as root, so it can plant names in it;
// it must not be able to turn root's writes into writes elsewhere either.
TEST_CASE("links planted inside the data folder are replaced or refused, never followed",
          "[embedded_pg]") {
  ScopedTempDir root("ptxbench-embedded-pg-");
  REQUIRE(chmod(root.path().c_str(), 0755) == 0);  // 'postgres' must reach data/.
  const std::string victim = root.path() + "/victim";
  {
    std::ofstream out(victim);
    out << "precious\n";
  }
  REQUIRE(chmod(victim.c_str(), 0644) == 0);
  const FileFacts before = FactsOf(victim);
  const std::string data = root.path() + "/data";
  REQUIRE(mkdir(data.c_str(), 0700) == 0);
  const passwd* postgres_user = getpwnam("postgres");
  auto plant = [&](const std::string& name) {
    const std::string link = data + "/" + name;
    std::filesystem::remove(link);
    REQUIRE(symlink(victim.c_str(), link.c_str()) == 0);
    if (geteuid() == 0 && postgres_user != nullptr) {
      REQUIRE(lchown(link.c_str(), postgres_user->pw_uid, static_cast<gid_t>(-1)) == 0);
    }
  };

  SECTION("the lock file") {
    plant("owner.lock");
    auto refused = EmbeddedPostgres::Start(At(data));
    REQUIRE(absl::IsFailedPrecondition(refused.status()));
    REQUIRE_THAT(std::string(refused.status().message()),
                 Catch::Contains("owner.lock is a symlink"));
  }
  SECTION("the password files of a new cluster") {
    plant("password");
    plant("app_password");
    auto postgres = ValueOrFail(EmbeddedPostgres::Start(At(data)));
    struct stat st;
    REQUIRE(lstat((data + "/password").c_str(), &st) == 0);
    REQUIRE(S_ISREG(st.st_mode));
    REQUIRE((st.st_mode & 0777) == 0600);
    REQUIRE(lstat((data + "/app_password").c_str(), &st) == 0);
    REQUIRE(S_ISREG(st.st_mode));
    REQUIRE_OK(store::RunSql(postgres->database_url(), "SELECT 1"));
    REQUIRE_OK(postgres->Stop());
    // An existing cluster reads its password without following a link.
    plant("password");
    auto refused = EmbeddedPostgres::Start(At(data));
    REQUIRE(absl::IsFailedPrecondition(refused.status()));
    REQUIRE_THAT(std::string(refused.status().message()),
                 Catch::Contains("/password is a symlink"));
  }
  REQUIRE(FactsOf(victim) == before);
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
