#include "proto/dial.h"

#include <grpcpp/grpcpp.h>
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <vector>

#include "absl/strings/match.h"
#include "ptxbench/v1/vendor.grpc.pb.h"
#include "tests/support/temp_files.h"
#include "tests/support/test_ca.h"

namespace ptxbench {
namespace {

using testing::ReadWholeFile;
using testing::ScopedTempDir;
using testing::TestCa;

// A SubmissionService that answers ListTasks and records the metadata each call carried.
class RecordingService final : public v1::SubmissionService::Service {
 public:
  grpc::Status ListTasks(grpc::ServerContext* context, const v1::ListTasksRequest*,
                         v1::ListTasksResponse* response) override {
    std::lock_guard<std::mutex> lock(mutex_);
    peers_.insert(context->peer());
    for (const auto& [key, value] : context->client_metadata()) {
      metadata_[std::string(key.data(), key.size())] = std::string(value.data(), value.size());
    }
    response->add_tasks()->set_id("recorded");
    return grpc::Status::OK;
  }
  std::string Metadata(const std::string& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    return metadata_.count(key) > 0 ? metadata_.at(key) : "";
  }
  // The distinct client addresses (one per TCP connection) that called.
  size_t Peers() {
    std::lock_guard<std::mutex> lock(mutex_);
    return peers_.size();
  }

 private:
  std::mutex mutex_;
  std::map<std::string, std::string> metadata_;
  std::set<std::string> peers_;
};

// A real gRPC server on 127.0.0.1:0, plaintext or TLS with the given certificate.
class LoopbackServer {
 public:
  explicit LoopbackServer(const TestCa* tls = nullptr) {
    std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
    if (tls != nullptr) {
      grpc::SslServerCredentialsOptions ssl;
      ssl.pem_key_cert_pairs.push_back(
          {ReadWholeFile(tls->server_key()), ReadWholeFile(tls->server_cert())});
      credentials = grpc::SslServerCredentials(ssl);
    }
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", credentials, &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    REQUIRE(server_ != nullptr);
  }
  ~LoopbackServer() { server_->Shutdown(); }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  RecordingService& service() { return service_; }

 private:
  RecordingService service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

grpc::Status ListTasks(const std::shared_ptr<grpc::Channel>& channel, const std::string& token) {
  auto stub = v1::SubmissionService::NewStub(channel);
  grpc::ClientContext context;
  Authorize(&context, token);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ListTasksResponse response;
  return stub->ListTasks(&context, v1::ListTasksRequest(), &response);
}

TEST_CASE("Dial: plaintext, our User-Agent and the bearer token reach the server") {
  LoopbackServer server;
  DialOptions options;
  options.address = server.address();
  auto channel = Dial(options);
  REQUIRE(channel.ok());
  REQUIRE(ListTasks(*channel, "ptxb_abc_secret").ok());
  CHECK(absl::StartsWith(server.service().Metadata("user-agent"), "ptxbench/"));
  CHECK(server.service().Metadata("authorization") == "Bearer ptxb_abc_secret");
  // No token, no header (a loopback server in bootstrap mode takes calls without one).
  LoopbackServer bare;
  options.address = bare.address();
  REQUIRE(ListTasks(*Dial(options), "").ok());
  CHECK(bare.service().Metadata("authorization").empty());
}

TEST_CASE("Dial: channels share a connection unless own_connection asks for one each") {
  LoopbackServer shared_server;
  DialOptions options;
  options.address = shared_server.address();
  auto first = Dial(options);
  auto second = Dial(options);
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  REQUIRE(ListTasks(*first, "").ok());
  REQUIRE(ListTasks(*second, "").ok());
  CHECK(shared_server.service().Peers() == 1);

  LoopbackServer own_server;
  options.address = own_server.address();
  options.own_connection = true;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < 3; ++i) {
    auto channel = Dial(options);
    REQUIRE(channel.ok());
    REQUIRE(ListTasks(*channel, "").ok());
    channels.push_back(*channel);  // Kept open so that no port is reused.
  }
  CHECK(own_server.service().Peers() == 3);
}

TEST_CASE("Dial: TLS with a private CA is trusted only through --tls-ca") {
  const TestCa ca;
  LoopbackServer server(&ca);
  DialOptions options;
  options.address = server.address();
  options.tls_ca_file = ca.ca_cert();  // Implies TLS.
  auto trusted = Dial(options);
  REQUIRE(trusted.ok());
  grpc::Status status = ListTasks(*trusted, "");
  INFO(status.error_message());
  CHECK(status.ok());

  // The system roots do not know the private CA, and another CA is no better.
  options.tls_ca_file.clear();
  options.tls = true;
  CHECK(ListTasks(*Dial(options), "").error_code() == grpc::StatusCode::UNAVAILABLE);
  const TestCa other;
  options.tls_ca_file = other.ca_cert();
  CHECK(ListTasks(*Dial(options), "").error_code() == grpc::StatusCode::UNAVAILABLE);
  // Plaintext to a TLS server fails too.
  options.tls = false;
  options.tls_ca_file.clear();
  CHECK_FALSE(ListTasks(*Dial(options), "").ok());
}

TEST_CASE("Dial: a bad address or CA file is an error naming it") {
  DialOptions options;
  options.address = "";
  CHECK(absl::IsInvalidArgument(Dial(options).status()));
  options.address = "127.0.0.1:1";
  options.tls_ca_file = "/nonexistent/ca.pem";
  auto missing = Dial(options);
  CHECK(absl::IsNotFound(missing.status()));
  CHECK(absl::StrContains(missing.status().message(), "--tls-ca"));
  ScopedTempDir dir;
  const std::string not_pem = dir.path() + "/ca.pem";
  std::ofstream(not_pem) << "not a certificate\n";
  options.tls_ca_file = not_pem;
  auto garbage = Dial(options);
  CHECK(absl::IsInvalidArgument(garbage.status()));
  CHECK(absl::StrContains(garbage.status().message(), "holds no PEM certificate"));
}

absl::StatusOr<Connection> FromFlags(const std::vector<std::string>& args, std::ostream& warnings,
                                     const std::string& default_server = kDefaultServerAddress) {
  auto parsed = ParseArgs(args, ConnectionFlags(default_server));
  REQUIRE(parsed.ok());
  return ConnectionFromFlags(*parsed, warnings);
}

TEST_CASE("Connection flags: token file over environment over --token, which is warned about") {
  unsetenv("PTXBENCH_SERVER");
  unsetenv("PTXBENCH_TOKEN");
  unsetenv("PTXBENCH_TOKEN_FILE");
  ScopedTempDir dir;
  const std::string file = dir.path() + "/token";
  std::ofstream(file) << "ptxb_file_secret\n";
  std::ostringstream warnings;

  auto defaults = FromFlags({}, warnings);
  REQUIRE(defaults.ok());
  CHECK(defaults->dial.address == kDefaultServerAddress);
  CHECK_FALSE(defaults->server_given);
  CHECK(defaults->token.empty());
  CHECK_FALSE(defaults->dial.tls);

  auto from_file = FromFlags({"--token-file", file, "--token", "ptxb_flag"}, warnings);
  REQUIRE(from_file.ok());
  CHECK(from_file->token == "ptxb_file_secret");  // Trailing newline dropped.
  CHECK(warnings.str().empty());

  auto from_flag = FromFlags({"--token", "ptxb_flag"}, warnings);
  REQUIRE(from_flag.ok());
  CHECK(from_flag->token == "ptxb_flag");
  CHECK(absl::StrContains(warnings.str(), "--token is visible to every user"));

  setenv("PTXBENCH_TOKEN", "ptxb_env", 1);
  std::ostringstream quiet;
  auto from_env = FromFlags({}, quiet);
  REQUIRE(from_env.ok());
  CHECK(from_env->token == "ptxb_env");
  setenv("PTXBENCH_TOKEN_FILE", file.c_str(), 1);
  CHECK(FromFlags({}, quiet)->token == "ptxb_file_secret");
  CHECK(quiet.str().empty());
  unsetenv("PTXBENCH_TOKEN");
  unsetenv("PTXBENCH_TOKEN_FILE");

  const std::string empty = dir.path() + "/empty";
  std::ofstream(empty) << "\n";
  auto blank = FromFlags({"--token-file", empty}, quiet);
  CHECK(absl::IsInvalidArgument(blank.status()));
  CHECK(absl::StrContains(blank.status().message(), "is empty"));
  CHECK(absl::IsNotFound(FromFlags({"--token-file", dir.path() + "/none"}, quiet).status()));
}

TEST_CASE("Connection flags: server from flag or PTXBENCH_SERVER; --tls-ca implies TLS") {
  std::ostringstream warnings;
  setenv("PTXBENCH_SERVER", "10.0.0.1:7000", 1);
  auto env = FromFlags({}, warnings, /*default_server=*/"");
  REQUIRE(env.ok());
  CHECK(env->server_given);
  CHECK(env->dial.address == "10.0.0.1:7000");
  auto flag = FromFlags({"--server", "10.0.0.2:7000", "--tls-ca", "/ca.pem"}, warnings);
  REQUIRE(flag.ok());
  CHECK(flag->dial.address == "10.0.0.2:7000");
  CHECK(flag->dial.tls);
  CHECK(flag->dial.tls_ca_file == "/ca.pem");
  unsetenv("PTXBENCH_SERVER");
  auto none = FromFlags({}, warnings, /*default_server=*/"");
  REQUIRE(none.ok());
  CHECK_FALSE(none->server_given);
  CHECK(none->dial.address.empty());
}

}  // namespace
}  // namespace ptxbench
