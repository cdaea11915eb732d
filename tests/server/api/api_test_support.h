// What the API tests share: a real Server on 127.0.0.1:0 over a fresh PostgreSQL database,
// real gRPC stubs over loopback, token helpers and a fake worker that speaks WorkerService
// exactly as ptxbench-worker does.
#ifndef PTXBENCH_TESTS_SERVER_API_API_TEST_SUPPORT_H_
#define PTXBENCH_TESTS_SERVER_API_API_TEST_SUPPORT_H_

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/time/time.h"
#include "proto/dial.h"
#include "ptxbench/v1/admin.grpc.pb.h"
#include "ptxbench/v1/vendor.grpc.pb.h"
#include "ptxbench/v1/worker.grpc.pb.h"
#include "server/server.h"
#include "tests/support/pg_fixture.h"

namespace ptxbench::api_test {

// A task defined for sm_90a and sm_100a, and one for sm_90a only ("arch not defined" cases).
inline constexpr char kTaskId[] = "api_test_gemm";
inline constexpr char kSm90OnlyTaskId[] = "api_test_sm90_only";

// A tasks folder holding those two tasks, built once per process under a temporary folder
// from the real GEMM task's definition (see WriteTestTask).
std::string TestTasksDir();
std::string SourceDir();

// A fresh, empty database (tests/support) that lives as long as the returned object; the
// server under test applies the migrations itself.
std::unique_ptr<testing::TestDatabase> FreshDatabase();

struct TestServerOptions {
  int submissions_per_minute = 600;
  int max_queued = 10000;
  int lease_seconds = 60;
  absl::Duration poll_interval = absl::Seconds(1);
  absl::Duration reap_interval = absl::Seconds(5);
  absl::Duration min_client_ping_interval = absl::Seconds(10);
  // The /metrics endpoint; off by default because stopping civetweb takes ~1.5 s (its
  // master thread's poll timeout), which most tests do not need to pay.
  bool metrics = false;
  std::string database_url;  // Empty: a fresh database.
  // Stream caps (server.h); small values let tests reach them.
  int max_watches_per_tenant = 128;
  int max_unauthenticated_streams = 32;
  server::TlsOptions tls;  // Files; the test channel then trusts tls.cert_file.
};

class TestServer {
 public:
  explicit TestServer(const TestServerOptions& options = {});
  ~TestServer();

  server::Server& server() { return *server_; }
  std::string address() const;
  std::shared_ptr<grpc::Channel> channel() const { return channel_; }
  std::unique_ptr<v1::SubmissionService::Stub> submissions() const;
  std::unique_ptr<v1::WorkerService::Stub> workers() const;
  std::unique_ptr<v1::AdminService::Stub> admin() const;
  // The server's database, for assertions on rows no RPC returns and for ageing rows.
  const testing::TestDatabase& database() const { return *database_; }

  // The first call makes tenant "ops" and an admin token over the loopback bootstrap, which
  // ends bootstrap mode: from then on every call needs a token.
  const std::string& admin_token();
  // Creates `tenant` (if missing, with the given limits; 0 = server default) and a token.
  std::string CreateToken(const std::string& tenant, v1::Role role, int per_minute = 0,
                          int max_queued = 0);

 private:
  std::unique_ptr<testing::TestDatabase> database_;
  std::unique_ptr<server::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::string admin_token_;
};

// A channel to a test server through the programs' own Dial (proto/dial.h), trusting
// `tls_ca_file` when set; FAILs the test when Dial refuses. Calls are authorised with
// ptxbench::Authorize (proto/dial.h) like the client's.
std::shared_ptr<grpc::Channel> DialTestServer(const std::string& address,
                                              const std::string& tls_ca_file = "");
// A deadline so that a broken server fails a test instead of hanging it.
void WithDeadline(grpc::ClientContext* context, absl::Duration timeout = absl::Seconds(30));

// SubmissionService.Submit as the holder of `token`, with WithDeadline's default.
grpc::Status Submit(TestServer& server, const std::string& token, const v1::SubmitRequest& request,
                    v1::SubmitResponse* response = nullptr);

// A valid Submit request for kTaskId on sm_90a, compile-only scope unless `full`.
v1::SubmitRequest ValidSubmit(bool full = false);

// A worker speaking WorkerService over the test server's channel.
class FakeWorker {
 public:
  FakeWorker(std::shared_ptr<grpc::Channel> channel, std::string token, v1::Arch arch,
             std::string gpu_uuid, bool compile_only = false);
  ~FakeWorker();

  const std::string& worker_id() const { return worker_id_; }
  // Acts as an already registered worker (a worker daemon reconnecting does not register).
  void set_worker_id(const std::string& worker_id) { worker_id_ = worker_id; }
  grpc::Status Register();
  // Opens the Lease stream on a thread; jobs arrive in NextJob.
  void OpenLease(int slots);
  std::optional<v1::LeasedJob> NextJob(absl::Duration timeout);
  // Cancels the Lease stream and returns its final status.
  grpc::Status CloseLease();

  grpc::Status ReportStage(const v1::LeasedJob& job, v1::Stage stage, bool ok);
  grpc::Status Complete(const v1::LeasedJob& job, const v1::Verdict& verdict);
  // The same with the rest of `request` as given (a compile artifact, an artifact report); its
  // lease is filled in.
  grpc::Status Complete(const v1::LeasedJob& job, v1::CompleteRequest request);
  grpc::Status Fail(const v1::LeasedJob& job, v1::FailureKind kind, bool* will_retry);
  grpc::Status Heartbeat(const std::vector<v1::LeasedJob>& held, v1::HeartbeatResponse* response);
  static v1::JobLease LeaseOf(const v1::LeasedJob& job, const std::string& worker_id);
  // Heartbeats every `interval` on a thread, listing the jobs leased and not yet completed or
  // failed, as a live worker does (the store marks a silent worker offline).
  void StartHeartbeats(absl::Duration interval);

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;
  std::string token_;
  v1::WorkerIdentity identity_;
  std::string worker_id_;

  std::mutex mu_;
  std::condition_variable arrived_;
  std::deque<v1::LeasedJob> jobs_;
  std::unique_ptr<grpc::ClientContext> lease_context_;
  std::thread lease_thread_;
  grpc::Status lease_status_;
  bool lease_done_ = false;
  std::map<std::string, v1::LeasedJob> held_;  // By job id.
  bool stop_heartbeats_ = false;
  std::thread heartbeat_thread_;
};

// A COMMIT lost in flight, as killing the postmaster under load loses one (the chaos test
// met it: "connection lost during COMMIT"), made exact: InstallSlowCommit makes the COMMIT
// of a transaction that inserted a row of `table` for which `condition` (SQL over NEW) holds
// wait 20 s in a deferred constraint trigger; CallAndLoseTheCommit runs `call` on a thread,
// ends the server's session once it sleeps there (the insert is rolled back, but the server
// cannot know that) and returns the call's status. It REQUIREs that exactly one session was
// ended. RemoveSlowCommit lets later calls commit at once.
void InstallSlowCommit(const testing::TestDatabase& database, const std::string& table,
                       const std::string& condition);
void RemoveSlowCommit(const testing::TestDatabase& database, const std::string& table);
grpc::Status CallAndLoseTheCommit(TestServer& server, const std::function<grpc::Status()>& call);

// A verdict as a worker would send it.
v1::Verdict MakeVerdict(v1::VerdictClass verdict_class);

// GET http://127.0.0.1:<port><path>; the body, or "" on failure.
std::string HttpGet(int port, const std::string& path);

}  // namespace ptxbench::api_test

#endif  // PTXBENCH_TESTS_SERVER_API_API_TEST_SUPPORT_H_
