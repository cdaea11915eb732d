// api_flood: does one tenant keep its latency while others flood the API? (issue 12,
// "Medium": unauthenticated 8 MiB Submit bodies took the server from 28 to 474 MB and another
// tenant's Submit from 3 ms to 330-810 ms.)
//
// The server runs in this process (the Server library, real PostgreSQL, real gRPC on
// loopback); the attackers are separate processes, forked before gRPC starts here, so their
// memory and threads are not the server's. A victim tenant submits one request at a time;
// its Submit latency is measured without a flood and right after under each flood (the quiet
// measurement is repeated before every flood, so that the load of a shared machine drifting
// between phases is not counted as the flood's):
//   bodies    unauthenticated Submits: bodies just under the transport's limit (rpc.h) without a
//   token,
//             and 1.9 MiB bodies (under the Submit bound) with guessed, well-formed tokens
//   streams   reflection and WatchSubmission streams opened and left open, with and without
//             guessed tokens
//   tenant    another tenant's valid Submits, as fast as it can send them
// Figures per phase, quiet and under flood: victim Submit latency median and p90 (ms), the
// flood median's ratio to the quiet one (target <= 2), and the server process's peak resident
// memory (MiB). The last line of output is one JSON object with every figure; the exit status is 1
// when a ratio is above 2.
#include <fcntl.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/cli_args.h"
#include "common/files.h"
#include "nlohmann/json.hpp"
#include "proto/dial.h"
#include "ptxbench/v1/admin.grpc.pb.h"
#include "ptxbench/v1/vendor.grpc.pb.h"
#include "server/server.h"

namespace ptxbench::bench {
namespace {

constexpr double kTargetRatio = 2.0;
constexpr char kTaskId[] = "gemm_n7168_k5120";

[[noreturn]] void Die(const std::string& message) {
  std::cerr << "api_flood: " << message << "\n";
  std::exit(1);
}

// One connection per channel, as separate attackers and tenants would have. A client's sends
// are unbounded by default, so the oversized bodies reach the server.
std::shared_ptr<grpc::Channel> NewChannel(const std::string& address) {
  DialOptions options;
  options.address = address;
  options.own_connection = true;
  auto channel = Dial(options);
  if (!channel.ok()) Die(channel.status().ToString());
  return *std::move(channel);
}

v1::SubmitRequest ValidSubmit(const std::string& source) {
  v1::SubmitRequest request;
  request.set_task_id(kTaskId);
  request.set_arch(v1::ARCH_SM_90A);
  request.set_language(v1::SOURCE_LANGUAGE_CUDA);
  request.set_source(source);
  request.set_model("bench:model");
  request.set_knowledge_level(v1::KNOWLEDGE_LEVEL_NONE);
  request.set_scope(v1::EVALUATION_SCOPE_COMPILE_ONLY);
  return request;
}

std::string GuessedToken(uint64_t n) {
  std::string secret = absl::StrCat(n);
  secret.insert(0, 64 - secret.size(), 'a');
  return absl::StrCat("ptxb_00000000deadbeef_", secret);
}

// ---- Attackers: each runs in its own process until killed. ----

// Each attacker writes one byte here per call answered, so that the parent can say how hard it
// was pushed (calls and bytes per second).
int g_tally_fd = -1;

void Tally() {
  const char one = 1;
  [[maybe_unused]] ssize_t ignored = write(g_tally_fd, &one, 1);
}

[[noreturn]] void FloodBodies(const std::string& address, int index) {
  auto channel = NewChannel(address);
  auto stub = v1::SubmissionService::NewStub(channel);
  const v1::SubmitRequest large = ValidSubmit(std::string((4 << 20) - 4096, 'x'));
  const v1::SubmitRequest medium = ValidSubmit(std::string(1900 << 10, 'x'));
  for (uint64_t n = 0;; ++n) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    const bool with_token = (n % 2) == 1;
    if (with_token) Authorize(&context, GuessedToken(n * 64 + index));
    v1::SubmitResponse response;
    stub->Submit(&context, with_token ? medium : large, &response);
    Tally();
  }
}

[[noreturn]] void FloodStreams(const std::string& address, int index,
                               const std::string& submission_id) {
  auto channel = NewChannel(address);
  grpc::GenericStub generic(channel);
  auto stub = v1::SubmissionService::NewStub(channel);
  struct Held {
    std::unique_ptr<grpc::ClientContext> context;
    std::unique_ptr<grpc::GenericClientAsyncReaderWriter> reflection;
    std::unique_ptr<grpc::ClientReader<v1::StageEvent>> watch;
  };
  std::vector<Held> held;
  grpc::CompletionQueue cq;
  std::thread drain([&cq] {
    void* tag = nullptr;
    bool ok = false;
    while (cq.Next(&tag, &ok)) {
    }
  });
  for (uint64_t n = 0;; ++n) {
    Held h;
    h.context = std::make_unique<grpc::ClientContext>();
    if (n % 2 == 0) {
      h.reflection = generic.PrepareCall(
          h.context.get(), "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
      h.reflection->StartCall(reinterpret_cast<void*>(1));
    } else {
      if (n % 4 == 1) Authorize(h.context.get(), GuessedToken(n * 64 + index));
      v1::WatchSubmissionRequest request;
      request.set_submission_id(submission_id);
      h.watch = stub->WatchSubmission(h.context.get(), request);
    }
    held.push_back(std::move(h));
    Tally();
    // Keep a few hundred open per attacker; replace the oldest.
    if (held.size() > 256) {
      held.front().context->TryCancel();
      held.erase(held.begin());
    }
    absl::SleepFor(absl::Milliseconds(2));
  }
}

[[noreturn]] void FloodTenant(const std::string& address, const std::string& token) {
  auto stub = v1::SubmissionService::NewStub(NewChannel(address));
  const v1::SubmitRequest request = ValidSubmit("__global__ void k() {}\n");
  while (true) {
    grpc::ClientContext context;
    Authorize(&context, token);
    v1::SubmitResponse response;
    stub->Submit(&context, request, &response);
    Tally();
  }
}

// A forked attacker: waits for "<mode> <address> <token> <submission>" on its pipe, then
// floods until killed.
struct Attacker {
  pid_t pid = 0;
  int command_fd = -1;
};

Attacker ForkAttacker(int index, int tally_fd) {
  int command[2];
  if (pipe(command) != 0) Die("pipe");
  const pid_t pid = fork();
  if (pid < 0) Die("fork");
  if (pid == 0) {
    close(command[1]);
    // A real attacker's CPU is its own machine's: here it shares two cores with the server,
    // so it runs at the lowest priority, and what it still costs the victim is the server's
    // work of receiving and refusing its calls.
    setpriority(PRIO_PROCESS, 0, 19);
    g_tally_fd = tally_fd;
    std::string line;
    char c;
    while (read(command[0], &c, 1) == 1 && c != '\n') line.push_back(c);
    std::vector<std::string> words = absl::StrSplit(line, ' ');
    if (words.size() != 4) _exit(2);
    const std::string& mode = words[0];
    if (mode == "bodies") FloodBodies(words[1], index);
    if (mode == "streams") FloodStreams(words[1], index, words[3]);
    if (mode == "tenant") FloodTenant(words[1], words[2]);
    _exit(2);
  }
  close(command[0]);
  return {pid, command[1]};
}

// ---- The measuring side. ----

double Quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t index = std::min(values.size() - 1, static_cast<size_t>(q * (values.size() - 1)));
  return values[index];
}

double RssMib() {
  std::istringstream status(ReadFileOrEmpty("/proc/self/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (absl::StartsWith(line, "VmRSS:")) return std::atof(line.c_str() + 6) / 1024;
  }
  return 0;
}

// Sequential victim Submits for `duration`; latencies in ms.
std::vector<double> VictimLatencies(const std::string& address, const std::string& token,
                                    absl::Duration duration, int64_t* failures) {
  auto stub = v1::SubmissionService::NewStub(NewChannel(address));
  const v1::SubmitRequest request = ValidSubmit("__global__ void victim() {}\n");
  std::vector<double> latencies;
  const absl::Time end = absl::Now() + duration;
  while (absl::Now() < end) {
    grpc::ClientContext context;
    Authorize(&context, token);
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::SubmitResponse response;
    const absl::Time start = absl::Now();
    const grpc::Status status = stub->Submit(&context, request, &response);
    if (!status.ok()) {
      ++*failures;
      continue;
    }
    latencies.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
  }
  return latencies;
}

std::string CreateToken(v1::AdminService::Stub& admin, const std::string& admin_token,
                        const std::string& tenant, v1::Role role) {
  {
    grpc::ClientContext context;
    Authorize(&context, admin_token);
    v1::CreateTenantRequest request;
    request.mutable_tenant()->set_name(tenant);
    v1::Tenant created;
    admin.CreateTenant(&context, request, &created);  // ALREADY_EXISTS is fine.
  }
  grpc::ClientContext context;
  Authorize(&context, admin_token);
  v1::CreateTokenRequest request;
  request.set_tenant(tenant);
  request.set_role(role);
  v1::CreateTokenResponse response;
  const grpc::Status status = admin.CreateToken(&context, request, &response);
  if (!status.ok()) Die(absl::StrCat("CreateToken: ", status.error_message()));
  return response.secret();
}

int Main(int argc, char** argv) {
  const std::vector<FlagSpec> specs = {
      {"database-url", true, "PostgreSQL URL of an empty database (required)"},
      {"tasks-dir", true, "task catalog", PTXBENCH_SOURCE_DIR "/tasks"},
      {"migrations-dir", true, "migrations", PTXBENCH_SOURCE_DIR "/migrations"},
      {"seconds", true, "victim measurement per phase", "8"},
      {"attackers", true, "attacker processes per flood", "4"},
      {"output", true, "also write the JSON figures here"},
  };
  auto args = ParseArgs(std::vector<std::string>(argv + 1, argv + argc), specs);
  if (!args.ok()) Die(absl::StrCat(args.status().message(), "\n", FlagHelp(specs)));
  if (args->Get("database-url").empty()) Die("--database-url is required\n" + FlagHelp(specs));
  const absl::Duration phase = absl::Seconds(args->GetInt("seconds", 8).value_or(8));
  const int attackers = static_cast<int>(args->GetInt("attackers", 4).value_or(4));

  // Fork every attacker before this process starts any gRPC thread.
  const std::vector<std::string> modes = {"bodies", "streams", "tenant"};
  std::map<std::string, std::vector<Attacker>> forked;
  std::map<std::string, int> tally_read_fd;
  for (const std::string& mode : modes) {
    int tally[2];
    if (pipe2(tally, O_NONBLOCK) != 0) Die("pipe");
    for (int i = 0; i < attackers; ++i) forked[mode].push_back(ForkAttacker(i, tally[1]));
    close(tally[1]);
    tally_read_fd[mode] = tally[0];
  }
  auto drain_tally = [](int fd) {
    int64_t calls = 0;
    char buffer[4096];
    ssize_t n;
    while ((n = read(fd, buffer, sizeof(buffer))) > 0) calls += n;
    return calls;
  };

  server::ServerOptions options;
  options.listen = "127.0.0.1:0";
  options.metrics_listen = "";
  options.database_url = args->Get("database-url");
  options.tasks_dir = args->Get("tasks-dir");
  options.migrations_dir = args->Get("migrations-dir");
  options.limits.submissions_per_minute = 100000000;
  options.limits.max_queued = 100000000;
  auto server = server::Server::Create(options);
  if (!server.ok()) Die(server.status().ToString());
  if (auto started = (*server)->Start(); !started.ok()) Die(started.ToString());
  const std::string address = absl::StrCat("127.0.0.1:", (*server)->port());

  auto admin = v1::AdminService::NewStub(NewChannel(address));
  const std::string admin_token = CreateToken(*admin, "", "ops", v1::ROLE_ADMIN);
  const std::string victim = CreateToken(*admin, admin_token, "victim", v1::ROLE_VENDOR);
  const std::string noisy = CreateToken(*admin, admin_token, "noisy", v1::ROLE_VENDOR);
  std::string submission_id;
  {
    auto stub = v1::SubmissionService::NewStub(NewChannel(address));
    grpc::ClientContext context;
    Authorize(&context, noisy);
    v1::SubmitResponse response;
    if (!stub->Submit(&context, ValidSubmit("__global__ void w() {}\n"), &response).ok()) {
      Die("first Submit failed");
    }
    submission_id = response.submission().id();
  }

  nlohmann::json figures;
  figures["machine"] = {{"cpus", std::thread::hardware_concurrency()}};
  bool within_target = true;
  auto measure = [&](absl::Duration duration) {
    std::atomic<bool> sampling{true};
    double peak_rss = RssMib();
    std::thread sampler([&] {
      while (sampling) {
        peak_rss = std::max(peak_rss, RssMib());
        absl::SleepFor(absl::Milliseconds(50));
      }
    });
    int64_t failures = 0;
    const std::vector<double> latencies = VictimLatencies(address, victim, duration, &failures);
    sampling = false;
    sampler.join();
    return nlohmann::json{{"victim_submits", latencies.size()},
                          {"victim_failures", failures},
                          {"median_ms", Quantile(latencies, 0.5)},
                          {"p90_ms", Quantile(latencies, 0.9)},
                          {"server_process_peak_rss_mib", peak_rss}};
  };
  for (const std::string& name : modes) {
    nlohmann::json quiet = measure(phase);
    for (const Attacker& attacker : forked[name]) {
      const std::string command =
          absl::StrCat(name, " ", address, " ", noisy, " ", submission_id, "\n");
      if (write(attacker.command_fd, command.data(), command.size()) < 0) Die("write");
    }
    absl::SleepFor(absl::Seconds(1));  // Let the flood build up.
    drain_tally(tally_read_fd[name]);
    const absl::Time flood_start = absl::Now();
    nlohmann::json flood = measure(phase);
    flood["attacker_calls_per_s"] = static_cast<double>(drain_tally(tally_read_fd[name])) /
                                    absl::ToDoubleSeconds(absl::Now() - flood_start);
    for (const Attacker& attacker : forked[name]) {
      kill(attacker.pid, SIGKILL);
      waitpid(attacker.pid, nullptr, 0);
    }
    const double quiet_median = quiet["median_ms"].get<double>();
    const double ratio = quiet_median > 0 ? flood["median_ms"].get<double>() / quiet_median : 0;
    if (ratio > kTargetRatio) within_target = false;
    figures["phases"][name] = {{"quiet", quiet}, {"flood", flood}, {"median_ratio", ratio}};
    std::cerr << "api_flood: " << name << ": " << figures["phases"][name].dump() << "\n";
    absl::SleepFor(absl::Seconds(2));  // Let the server settle between phases.
  }
  figures["target_ratio"] = kTargetRatio;
  figures["within_target"] = within_target;
  (*server)->GracefulStop();
  const std::string out = figures.dump();
  std::cout << out << "\n";
  if (!args->Get("output").empty()) std::ofstream(args->Get("output")) << figures.dump(2) << "\n";
  return within_target ? 0 : 1;
}

}  // namespace
}  // namespace ptxbench::bench

int main(int argc, char** argv) { return ptxbench::bench::Main(argc, argv); }
