// The client's call retries against a real server over loopback: a refusal the server marks
// "retry shortly" (RESOURCE_EXHAUSTED with the ptxbench-retry-pushback-ms trailer: here, a
// flood of invented tokens holding every lookup slot while a new client's first call arrives)
// is sent again after the pushback and succeeds; a RESOURCE_EXHAUSTED without the mark (a
// tenant's quota) fails at once, since sending it again soon would not help.
#include "client/command_support.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/cli.h"
#include "client/submission_commands.h"
#include "server/api/auth.h"
#include "tests/server/api/api_test_support.h"
#include "tests/support/temp_files.h"

namespace ptxbench::client {
namespace {

using Catch::Matchers::Contains;
using ::ptxbench::testing::ScopedTempDir;

std::string TokenFile(const ScopedTempDir& dir, const std::string& name, const std::string& token) {
  std::string path = absl::StrCat(dir.path(), "/", name);
  std::ofstream(path) << token << "\n";
  return path;
}

TEST_CASE("a call refused 'retry shortly' is sent again and succeeds", "[client][retry]") {
  api_test::TestServer server;
  server.admin_token();  // Ends bootstrap mode: tokens are checked from now on.
  // Never used yet: its first call needs a store lookup, in the unverified slots.
  const std::string newcomer = server.CreateToken("acme", v1::ROLE_VENDOR);
  ScopedTempDir dir("ptxbench-retry-");
  const std::string token_file = TokenFile(dir, "token", newcomer);

  // Every token lookup waits in the store for 1.5 s ...
  std::atomic<bool> locked{false};
  std::thread lock([&] {
    locked = server.database()
                 .Sql("LOCK TABLE api_tokens IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(1.5)")
                 .ok();
  });
  for (const absl::Time until = absl::Now() + absl::Seconds(10); absl::Now() < until;) {
    auto held = server.database().Scalar(
        "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE "
        "c.relname = 'api_tokens' AND l.mode = 'AccessExclusiveLock' AND l.granted");
    if (held.ok() && held->value_or("0") == "1") break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  // ... while invented tokens take every lookup slot (streams reach Authenticate at once).
  std::vector<std::thread> flood;
  flood.reserve(2 * api::kMaxUnverifiedLookups);
  for (int i = 0; i < 2 * api::kMaxUnverifiedLookups; ++i) {
    flood.emplace_back([&] {
      grpc::ClientContext context;
      api_test::WithDeadline(&context);
      Authorize(&context, api::GenerateToken().token);
      v1::WatchSubmissionRequest request;
      request.set_submission_id("00000000-0000-4000-8000-000000000000");
      auto reader = server.submissions()->WatchSubmission(&context, request);
      v1::StageEvent event;
      while (reader->Read(&event)) {
      }
      (void)reader->Finish();
    });
  }
  absl::SleepFor(absl::Milliseconds(300));  // The flood's lookups are in the store now.

  std::ostringstream out;
  std::ostringstream err;
  const absl::Time start = absl::Now();
  const int code =
      TasksCommand({"--server", server.address(), "--token-file", token_file}, out, err);
  const absl::Duration took = absl::Now() - start;
  for (std::thread& call : flood) call.join();
  lock.join();
  REQUIRE(locked);
  INFO(err.str());
  CHECK(code == kExitPass);
  CHECK_THAT(out.str(), Contains(api_test::kTaskId));
  // It was refused at least once, said so, and waited for the flood's lookups to end.
  CHECK_THAT(err.str(), Contains("(RESOURCE_EXHAUSTED); retry 1 of 5"));
  CHECK(took >= absl::Milliseconds(200));
}

TEST_CASE("a RESOURCE_EXHAUSTED without the mark (a tenant's quota) is not retried",
          "[client][retry]") {
  api_test::TestServer server;
  const std::string vendor = server.CreateToken("metered", v1::ROLE_VENDOR, /*per_minute=*/1);
  ScopedTempDir dir("ptxbench-quota-");
  const std::string token_file = TokenFile(dir, "token", vendor);
  const std::string source = absl::StrCat(dir.path(), "/kernel.cu");
  std::ofstream(source) << api_test::ValidSubmit().source();
  const std::string plan = absl::StrCat(dir.path(), "/plan.json");
  std::ofstream(plan) << R"json({"launches": [{"kernel": "gemm",
      "grid": ["ceil_div(M,128)", "ceil_div(N,128)"], "block": ["128"],
      "args": [{"tensor": "A"}, {"tensor": "B"}, {"tensor": "C"}]}]})json";
  const std::vector<std::string> submit = {
      "--server", server.address(), "--token-file",   token_file, "--task", api_test::kTaskId,
      "--arch",   "sm_90a",         "--compile-only", "--plan",   plan,     source};
  std::ostringstream first_out;
  std::ostringstream first_err;
  REQUIRE(SubmitCommand(submit, first_out, first_err) == kExitPass);

  std::ostringstream out;
  std::ostringstream err;
  CHECK(SubmitCommand(submit, out, err) == kExitInfrastructure);
  CHECK_THAT(err.str(), Contains("submissions per minute"));
  CHECK_THAT(err.str(), !Contains("retry 1 of"));
}

}  // namespace
}  // namespace ptxbench::client
