// docs/api.md's reflection example, run: scripts/grpc-reflect (Python, Debian's python3-grpcio
// and python3-protobuf, no generated code) against a real server lists its services, describes
// one, and calls ListTasks from the descriptors the server sends.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/server/api/api_test_support.h"
#include "tests/support/process.h"

namespace ptxbench::testing {
namespace {

const std::string kScript = std::string(PTXBENCH_SOURCE_DIR_FOR_TESTS) + "/scripts/grpc-reflect";

CommandResult Reflect(const std::string& address, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/usr/bin/python3", kScript, "--server", address};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, absl::Seconds(60));
}

TEST_CASE("reflection from Python: list, describe and call without generated code") {
  if (access("/usr/bin/python3", X_OK) != 0 ||
      RunCommand({"/usr/bin/python3", "-c", "import grpc, google.protobuf"}, absl::Seconds(30))
              .exit_code != 0) {
    FAIL("python3-grpcio and python3-protobuf are needed (scripts/install-deps --test)");
  }
  api_test::TestServer server;
  CommandResult list = Reflect(server.address(), {"list"});
  INFO(list.output);
  REQUIRE(list.exit_code == 0);
  CHECK(absl::StrContains(list.output, "ptxbench.v1.SubmissionService"));
  CHECK(absl::StrContains(list.output, "ptxbench.v1.WorkerService"));
  CHECK(absl::StrContains(list.output, "grpc.health.v1.Health"));

  CommandResult describe = Reflect(server.address(), {"describe", "ptxbench.v1.SubmissionService"});
  INFO(describe.output);
  REQUIRE(describe.exit_code == 0);
  CHECK(absl::StrContains(
      describe.output,
      "rpc Submit(ptxbench.v1.SubmitRequest) returns (ptxbench.v1.SubmitResponse)"));

  CommandResult call =
      Reflect(server.address(), {"call", "ptxbench.v1.SubmissionService/ListTasks", "{}"});
  INFO(call.output);
  REQUIRE(call.exit_code == 0);
  CHECK(absl::StrContains(call.output, api_test::kTaskId));
  // The per-arch target families of TaskSummary, as a vendor reads them.
  CHECK(absl::StrContains(call.output, "\"arch_targets\""));
  CHECK(absl::StrContains(call.output, "\"ARCH_SM_90A\""));

  CommandResult bad = Reflect(
      server.address(),
      {"call", "ptxbench.v1.SubmissionService/GetSubmission", "{\"submission_id\": \"nope\"}"});
  CHECK(bad.exit_code != 0);
  CHECK(absl::StrContains(bad.output, "INVALID_ARGUMENT"));
}

}  // namespace
}  // namespace ptxbench::testing
