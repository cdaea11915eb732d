// The server supervises its store (issue 13): a real Server with its embedded PostgreSQL
// (real Debian binaries), its postmaster SIGKILLed and kept from restarting for a while;
// and a Server on an external database that dies and comes back. Meanwhile health says
// NOT_SERVING and calls get UNAVAILABLE with a plain message (no database user, address or
// database name: issue 12); afterwards SERVING again, and nothing accepted was lost. With
// --database-url the server starts nothing.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <fstream>
#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/files.h"
#include "server/api/health_check.h"
#include "server/embedded_pg/embedded_postgres.h"
#include "tests/server/api/api_test_support.h"
#include "tests/support/status_testing.h"
#include "tests/support/temp_files.h"

namespace ptxbench::api_test {
namespace {

using ::ptxbench::testing::ScopedTempDir;
using ::ptxbench::testing::ValueOrFail;

// The pid and port in postmaster.pid (its first and fourth lines).
struct Postmaster {
  pid_t pid = 0;
  int port = 0;
};

Postmaster ReadPostmaster(const std::string& pgdata) {
  std::ifstream in(pgdata + "/postmaster.pid");
  std::string line;
  Postmaster postmaster;
  for (int i = 1; std::getline(in, line) && i <= 4; ++i) {
    if (i == 1) REQUIRE(absl::SimpleAtoi(line, &postmaster.pid));
    if (i == 4) REQUIRE(absl::SimpleAtoi(line, &postmaster.port));
  }
  REQUIRE(postmaster.pid > 0);
  REQUIRE(postmaster.port > 0);
  return postmaster;
}

bool Dead(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  const std::string text = ReadFileOrEmpty(absl::StrCat("/proc/", pid, "/stat"));
  const size_t end = text.rfind(')');
  return end != std::string::npos && text.substr(end + 2, 1) == "Z";
}

void KillAndWait(pid_t pid) {
  REQUIRE(kill(pid, SIGKILL) == 0);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!Dead(pid)) {
    REQUIRE(absl::Now() < deadline);
    absl::SleepFor(absl::Milliseconds(1));
  }
}

// Listens on 127.0.0.1:port, retrying while the dead postmaster's socket lets go of it.
int OccupyPort(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    REQUIRE(absl::Now() < deadline);
    absl::SleepFor(absl::Milliseconds(1));
  }
  REQUIRE(listen(fd, 16) == 0);
  return fd;
}

std::string Health(const server::Server& server) {
  api::HealthCheckOptions options;
  options.address = absl::StrCat("127.0.0.1:", server.port());
  options.timeout = absl::Seconds(2);
  auto status = api::CheckHealth(options);
  return status.ok() ? *status : status.status().ToString();
}

bool HealthBecomes(const server::Server& server, const std::string& wanted,
                   absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (Health(server) == wanted) return true;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return false;
}

std::unique_ptr<server::Server> StartServer(const std::string& data_dir,
                                            const std::string& database_url) {
  server::ServerOptions options;
  options.listen = "127.0.0.1:0";
  options.metrics_listen = "";
  options.data_dir = data_dir;
  options.database_url = database_url;
  options.tasks_dir = TestTasksDir();
  options.migrations_dir = SourceDir() + "/migrations";
  options.store_pool_size = 4;
  options.shutdown_grace = absl::Seconds(2);
  options.supervise_interval = absl::Milliseconds(200);
  options.restart_backoff_max = absl::Seconds(2);
  auto server = server::Server::Create(options);
  INFO(server.status().ToString());
  REQUIRE(server.ok());
  REQUIRE_OK((*server)->Start());
  return *std::move(server);
}

grpc::Status Submit(const server::Server& server, v1::SubmitResponse* response) {
  auto channel = DialTestServer(absl::StrCat("127.0.0.1:", server.port()));
  grpc::ClientContext context;
  WithDeadline(&context, absl::Seconds(10));
  return v1::SubmissionService::NewStub(channel)->Submit(&context, ValidSubmit(), response);
}

grpc::Status Get(const server::Server& server, const std::string& id) {
  auto channel = DialTestServer(absl::StrCat("127.0.0.1:", server.port()));
  grpc::ClientContext context;
  WithDeadline(&context, absl::Seconds(10));
  v1::GetSubmissionRequest request;
  request.set_submission_id(id);
  v1::Submission response;
  return v1::SubmissionService::NewStub(channel)->GetSubmission(&context, request, &response);
}

// After the store came back, each pooled connection that the outage broke fails one call
// before it is replaced (server/store: the pool reconnects on use); a caller retries
// UNAVAILABLE, and so does this.
grpc::Status SubmitRetrying(const server::Server& server, v1::SubmitResponse* response) {
  grpc::Status status;
  for (int attempt = 0; attempt < 10; ++attempt) {
    status = Submit(server, response);
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return status;
    absl::SleepFor(absl::Milliseconds(200));
  }
  return status;
}

void CheckPlainUnavailable(const grpc::Status& status, int port) {
  INFO(status.error_message());
  CHECK(status.error_code() == grpc::StatusCode::UNAVAILABLE);
  CHECK_THAT(status.error_message(), Catch::Contains("database is unavailable"));
  for (const std::string& secret :
       {std::string("ptxbench_app"), std::string("127.0.0.1"), std::to_string(port),
        std::string("dbname"), std::string("password")}) {
    CHECK_FALSE(absl::StrContains(status.error_message(), secret));
  }
}

TEST_CASE("a dead embedded PostgreSQL is restarted; meanwhile NOT_SERVING and UNAVAILABLE",
          "[api][supervision]") {
  ScopedTempDir dir("ptxbench-supervision-");
  REQUIRE(chmod(dir.path().c_str(), 0755) == 0);  // 'postgres' must reach it when root.
  auto server = StartServer(dir.path(), "");
  REQUIRE(Health(*server) == "SERVING");
  v1::SubmitResponse before;
  REQUIRE(Submit(*server, &before).ok());

  const std::string pgdata = dir.path() + "/postgres/pgdata";
  const Postmaster first = ReadPostmaster(pgdata);
  KillAndWait(first.pid);
  // Keep it down: with its port taken the restart fails ("could not bind") and backs off.
  const int blocker = OccupyPort(first.port);
  REQUIRE(HealthBecomes(*server, "NOT_SERVING", absl::Seconds(5)));
  v1::SubmitResponse refused;
  CheckPlainUnavailable(Submit(*server, &refused), first.port);
  CheckPlainUnavailable(Get(*server, before.submission().id()), first.port);

  close(blocker);
  REQUIRE(HealthBecomes(*server, "SERVING", absl::Seconds(30)));
  const Postmaster second = ReadPostmaster(pgdata);
  CHECK(second.pid != first.pid);
  CHECK(second.port == first.port);
  v1::SubmitResponse after;
  grpc::Status submitted = SubmitRetrying(*server, &after);
  INFO(submitted.error_message());
  REQUIRE(submitted.ok());
  CHECK(Get(*server, before.submission().id()).ok());  // Accepted before the crash: kept.
  server->GracefulStop();
}

TEST_CASE("with an external database the server starts nothing and waits for it",
          "[api][supervision]") {
  ScopedTempDir database_dir("ptxbench-supervision-db-");
  ScopedTempDir server_dir("ptxbench-supervision-srv-");
  embedded_pg::EmbeddedPostgres::Options pg;
  pg.data_dir = database_dir.path();
  auto external = ValueOrFail(embedded_pg::EmbeddedPostgres::Start(pg));
  auto server = StartServer(server_dir.path(), external->database_url());
  REQUIRE(Health(*server) == "SERVING");
  v1::SubmitResponse before;
  REQUIRE(Submit(*server, &before).ok());

  const Postmaster postmaster = ReadPostmaster(database_dir.path() + "/pgdata");
  KillAndWait(postmaster.pid);
  REQUIRE(HealthBecomes(*server, "NOT_SERVING", absl::Seconds(5)));
  v1::SubmitResponse refused;
  CheckPlainUnavailable(Submit(*server, &refused), postmaster.port);
  absl::SleepFor(absl::Seconds(2));  // Ten supervision rounds.
  CHECK_FALSE(external->Running());
  std::ifstream pid_file(database_dir.path() + "/pgdata/postmaster.pid");
  std::string pid_line;
  if (std::getline(pid_file, pid_line)) {
    pid_t pid = 0;
    REQUIRE(absl::SimpleAtoi(pid_line, &pid));
    CHECK(pid == postmaster.pid);  // The dead one's file: nobody started another.
  }
  CHECK(Health(*server) == "NOT_SERVING");

  REQUIRE_OK(external->Restart());  // The database's operator brings it back.
  REQUIRE(HealthBecomes(*server, "SERVING", absl::Seconds(10)));
  v1::SubmitResponse after;
  REQUIRE(SubmitRetrying(*server, &after).ok());
  CHECK(Get(*server, before.submission().id()).ok());
  server->GracefulStop();
}

}  // namespace
}  // namespace ptxbench::api_test
