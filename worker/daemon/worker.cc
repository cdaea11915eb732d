#include "worker/daemon/worker.h"

#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status.h"
#include "proto/dial.h"
#include "proto/wire_limits.h"
#include "proto/wire_names.h"
#include "ptxbench/v1/worker.grpc.pb.h"
#include "worker/daemon/artifact_wire.h"
#include "worker/daemon/verdict_wire.h"

namespace ptxbench::worker {
namespace {

std::string Hostname() {
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

// `backoff` scaled by a random factor in [0.5, 1): workers that lost the same server do not
// come back in the same instant.
absl::Duration Jittered(absl::Duration backoff) {
  thread_local std::minstd_rand random(std::random_device{}());
  return backoff * (0.5 + 0.5 * std::uniform_real_distribution<double>(0, 1)(random));
}

// Whether a gRPC failure may go away by itself (server restarting, network blip): those
// calls are retried; anything else is a definite answer.
// How long a registration refused because another token's process still holds the worker id
// is retried: two default lease periods.
constexpr absl::Duration kClaimWait = absl::Seconds(120);

bool Transient(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE ||
         status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
         status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
}

// The daemon's own metric families, defined once.
struct WorkerMetrics {
  explicit WorkerMetrics(prometheus::Registry& registry)
      : jobs(prometheus::BuildCounter()
                 .Name("ptxbench_worker_jobs_total")
                 .Help("Jobs finished by this worker, by job kind and outcome")
                 .Register(registry)),
        stage_seconds(prometheus::BuildHistogram()
                          .Name("ptxbench_worker_stage_seconds")
                          .Help("Wall time of each evaluation stage on this worker")
                          .Register(registry)),
        sandbox_restarts(prometheus::BuildCounter()
                             .Name("ptxbench_worker_sandbox_restarts_total")
                             .Help("Sandboxes that crashed or timed out and were replaced")
                             .Register(registry)
                             .Add({})),
        healthy(prometheus::BuildGauge()
                    .Name("ptxbench_worker_healthy")
                    .Help("1 while the worker's GPU passes its health probe")
                    .Register(registry)
                    .Add({})),
        gpu_gate_wait(prometheus::BuildHistogram()
                          .Name("ptxbench_worker_gpu_gate_wait_seconds")
                          .Help("Seconds an evaluation waited for its GPU's gate (--gpu-pipeline "
                                "2: behind the job on the GPU)")
                          .Register(registry)
                          .Add({}, prometheus::Histogram::BucketBoundaries{0.01, 0.1, 0.5, 1, 2.5,
                                                                           5, 10, 30, 60, 300})),
        compile_cache(prometheus::BuildCounter()
                          .Name("ptxbench_worker_compile_cache_total")
                          .Help("Compile cache lookups by outcome (hit, miss, tampered: an "
                                "entry refused because its bytes no longer matched)")
                          .Register(registry)) {}

  prometheus::Family<prometheus::Counter>& jobs;
  prometheus::Family<prometheus::Histogram>& stage_seconds;
  prometheus::Counter& sandbox_restarts;
  prometheus::Gauge& healthy;
  prometheus::Histogram& gpu_gate_wait;
  prometheus::Family<prometheus::Counter>& compile_cache;
};

struct ActiveJob {
  v1::JobLease lease;
  std::atomic<bool> cancel{false};
  std::atomic<bool> lost{false};  // The server gave the lease to someone else: report nothing.
};

// Two jobs: one on the GPU and the next compiling. A third would only wait for the gate while
// its lease and its early processes' watchdogs run.
constexpr int kMaxGpuPipeline = 2;

// The per-GPU lock's directory: the option, else /run/lock when it is a writable directory, else
// /tmp (a machine without /run/lock: containers, minimal images).
std::string GpuLockDir(const std::string& option) {
  if (!option.empty()) return option;
  return access("/run/lock", W_OK | X_OK) == 0 ? "/run/lock" : "/tmp";
}

}  // namespace

class Worker::Impl {
 public:
  Impl(WorkerOptions options, std::unique_ptr<JobExecutor> executor)
      : options_(std::move(options)), executor_(std::move(executor)) {}

  ~Impl() {
    Abort();
    Join();
  }

  absl::Status Init() {
    if (options_.hostname.empty()) options_.hostname = Hostname();
    if (options_.slots < 1) return absl::InvalidArgumentError("--slots must be at least 1");
    if (options_.gpu_pipeline < 1 || options_.gpu_pipeline > kMaxGpuPipeline) {
      return absl::InvalidArgumentError(
          absl::StrCat("--gpu-pipeline: 1 or 2, got ", options_.gpu_pipeline));
    }
    if (options_.compile_only && options_.gpu_pipeline != 1) {
      return absl::InvalidArgumentError(
          "--gpu-pipeline is for GPU workers; a compile-only worker runs --slots jobs at once");
    }
    if (!options_.compile_only) {
      // The measuring phases of a job (correctness, profiling, timing) must have the GPU to
      // themselves (docs/measurement.md, "Exclusivity of the measuring phases").
      // Two jobs on one GPU only through --gpu-pipeline, whose executor gates the GPU stages.
      if (options_.slots != 1) {
        return absl::InvalidArgumentError(
            "--slots: a GPU worker evaluates one job at a time (slots 1; --gpu-pipeline 2 "
            "overlaps the next job's compile under the GPU gate); only a compile-only worker "
            "runs more");
      }
      // No UUID: no GPU was found (a GPU worker without one evaluates nothing on it).
      const std::string uuid = executor_->Identity().gpu_uuid;
      if (!uuid.empty()) {
        ASSIGN_OR_RETURN(gpu_lock_, GpuLock::Acquire(GpuLockDir(options_.gpu_lock_dir), uuid));
      }
    }
    DialOptions dial;
    dial.address = options_.server;
    dial.tls = options_.tls;
    dial.tls_ca_file = options_.tls_ca_file;
    // Reconnect at our own retry pace (proto/dial.h): within ~2 s of a server restart.
    dial.max_reconnect_backoff = options_.reconnect_backoff_max;
    ASSIGN_OR_RETURN(channel_, Dial(dial));
    stub_ = v1::WorkerService::NewStub(channel_);
    if (!options_.metrics_listen.empty()) {
      try {
        exposer_ = std::make_unique<prometheus::Exposer>(options_.metrics_listen);
      } catch (const std::exception& e) {
        return absl::InvalidArgumentError(
            absl::StrCat("--metrics-listen ", options_.metrics_listen, ": ", e.what()));
      }
      exposer_->RegisterCollectable(registry_);
    }
    metrics_.healthy.Set(1);
    return absl::OkStatus();
  }

  absl::Status Start() {
    RETURN_IF_ERROR(Register());
    lease_thread_ = std::thread([this] { LeaseLoop(); });
    heartbeat_thread_ = std::thread([this] { HeartbeatLoop(); });
    return absl::OkStatus();
  }

  void GracefulStop() {
    if (stopping_.exchange(true)) return;
    spdlog::info("worker {}: draining; no new job will be taken", worker_id_);
    CancelLeaseStream();
    wake_.notify_all();
  }

  void Abort() {
    aborting_ = true;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [id, job] : active_) job->cancel = true;
    }
    GracefulStop();
  }

  void Wait() { Join(); }

  const std::string& worker_id() const { return worker_id_; }
  int metrics_port() const {
    if (!exposer_) return 0;
    auto ports = exposer_->GetListeningPorts();
    return ports.empty() ? 0 : ports.front();
  }
  int64_t jobs_finished() const { return jobs_finished_; }
  bool healthy() const { return healthy_; }

 private:
  // The executor's compile cache counts so far, added to the counters as deltas (jobs may end
  // on several threads at once).
  void UpdateCompileCacheMetrics() {
    const JobExecutor::CompileCacheCounts now = executor_->CompileCache();
    std::lock_guard<std::mutex> lock(compile_cache_mu_);
    const std::pair<const char*, int64_t> deltas[] = {
        {"hit", now.hits - compile_cache_seen_.hits},
        {"miss", now.misses - compile_cache_seen_.misses},
        {"tampered", now.tampered - compile_cache_seen_.tampered}};
    for (const auto& [outcome, delta] : deltas) {
      if (delta > 0) {
        metrics_.compile_cache.Add({{"outcome", outcome}}).Increment(static_cast<double>(delta));
      }
    }
    compile_cache_seen_ = now;
  }

  void Authorize(grpc::ClientContext* context) const {
    ::ptxbench::Authorize(context, options_.token);
  }

  absl::Status Register() {
    const ExecutorIdentity identity = executor_->Identity();
    v1::RegisterRequest request;
    v1::WorkerIdentity* wire = request.mutable_identity();
    wire->set_hostname(options_.hostname);
    wire->set_arch(options_.compile_only
                       ? v1::ARCH_UNSPECIFIED
                       : wire::ParseArch(identity.arch).value_or(v1::ARCH_UNSPECIFIED));
    wire->set_gpu_name(identity.gpu_name);
    wire->set_gpu_uuid(identity.gpu_uuid);
    wire->set_driver_version(identity.driver_version);
    wire->set_cuda_version(identity.cuda_version);
    wire->set_cublas_version(identity.cublas_version);
    wire->set_cudnn_version(identity.cudnn_version);
    wire->set_harness_version(identity.harness_version);
    wire->set_compile_only(options_.compile_only);
    if (!options_.compile_only && wire->arch() == v1::ARCH_UNSPECIFIED) {
      return absl::FailedPreconditionError(
          "this worker has no GPU of a supported arch (sm_90a, sm_100a); run it with "
          "--compile-only on machines without one");
    }
    absl::Duration backoff = absl::Milliseconds(200);
    const absl::Time started = absl::Now();
    for (int attempt = 0;; ++attempt) {
      if (stopping_) return absl::CancelledError("stopping");
      grpc::ClientContext context;
      Authorize(&context);
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      v1::RegisterResponse response;
      grpc::Status status = stub_->Register(&context, request, &response);
      if (status.ok()) {
        worker_id_ = response.worker_id();
        lease_seconds_ = std::max(3, response.lease_seconds());
        spdlog::info("worker {}: registered with {} ({}, lease {} s)", worker_id_, options_.server,
                     options_.compile_only ? "compile-only" : identity.arch, lease_seconds_);
        return absl::OkStatus();
      }
      // ABORTED: this GPU's worker id is held by another token whose process was seen within
      // a lease period (store.h, RegisterWorker): a token rotation whose old process just
      // stopped. The id moves to this token once that process has been silent for a lease
      // period (60 s by default), so that wait is retried too, up to kClaimWait.
      const bool claim_pending =
          status.error_code() == grpc::StatusCode::ABORTED && absl::Now() - started < kClaimWait;
      if (claim_pending && attempt % 10 == 0) {
        spdlog::warn("worker: registering with {}: {}; retrying", options_.server,
                     status.error_message());
      }
      if (!claim_pending && (!Transient(status) || attempt >= 40 || stopping_)) {
        return absl::UnavailableError(
            absl::StrCat("registering with ", options_.server, ": ", status.error_message()));
      }
      SleepInterruptibly(Jittered(backoff));
      backoff = std::min(backoff * 2, options_.reconnect_backoff_max);
    }
  }

  void CancelLeaseStream() {
    std::lock_guard<std::mutex> lock(mu_);
    if (lease_context_ != nullptr) lease_context_->TryCancel();
  }

  void SleepInterruptibly(absl::Duration duration) {
    std::unique_lock<std::mutex> lock(mu_);
    wake_.wait_for(lock, absl::ToChronoMilliseconds(duration), [this] { return stopping_.load(); });
  }

  void LeaseLoop() {
    absl::Duration backoff = absl::Milliseconds(200);
    while (!stopping_ && healthy_) {
      grpc::ClientContext context;
      Authorize(&context);
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) break;
        lease_context_ = &context;
      }
      v1::LeaseRequest request;
      request.set_worker_id(worker_id_);
      request.set_slots(options_.compile_only ? options_.slots : options_.gpu_pipeline);
      const absl::Time opened = absl::Now();
      auto reader = stub_->Lease(&context, request);
      v1::LeasedJob job;
      bool got_any = false;
      while (reader->Read(&job)) {
        got_any = true;
        StartJob(job);
      }
      // A stream that stayed open a while was a working connection: a server restart that
      // ends it is met with a fast reconnection, not with the backoff of an earlier outage.
      const bool was_working = got_any || absl::Now() - opened > absl::Seconds(2);
      grpc::Status status = reader->Finish();
      {
        std::lock_guard<std::mutex> lock(mu_);
        lease_context_ = nullptr;
      }
      if (stopping_) break;
      if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
        // The server no longer knows this worker (its database was reset): register again.
        if (!Register().ok()) SleepInterruptibly(backoff);
        continue;
      }
      if (!status.ok()) {
        spdlog::warn("worker {}: lease stream ended: {} ({}); reconnecting", worker_id_,
                     status.error_message(), static_cast<int>(status.error_code()));
      }
      if (was_working) backoff = absl::Milliseconds(200);
      SleepInterruptibly(Jittered(backoff));
      backoff = std::min(backoff * 2, options_.reconnect_backoff_max);
    }
  }

  void StartJob(const v1::LeasedJob& job) {
    auto active = std::make_shared<ActiveJob>();
    active->lease.set_job_id(job.job_id());
    active->lease.set_worker_id(worker_id_);
    active->lease.set_attempt(job.attempt());
    std::lock_guard<std::mutex> lock(mu_);
    active_[job.job_id()] = active;
    job_threads_.emplace_back([this, job, active] {
      RunJob(job, *active);
      std::lock_guard<std::mutex> inner(mu_);
      active_.erase(job.job_id());
    });
  }

  JobSpec SpecOf(const v1::LeasedJob& job) const {
    JobSpec spec;
    spec.job_id = job.job_id();
    spec.attempt = job.attempt();
    spec.compile_only = job.kind() == v1::JOB_KIND_COMPILE;
    spec.submission_id = job.submission_id();
    spec.task_id = job.task_id();
    spec.task_version_hash = job.task_version_hash();
    spec.arch = wire::ArchName(job.arch());
    spec.language = job.language() == v1::SOURCE_LANGUAGE_PTX ? "ptx" : "cuda";
    spec.source = job.source();
    if (job.has_launch_plan()) {
      google::protobuf::util::JsonPrintOptions print;
      print.preserve_proto_field_names = true;
      (void)google::protobuf::util::MessageToJsonString(job.launch_plan(), &spec.launch_plan_json,
                                                        print);
    }
    if (job.has_artifact()) spec.artifact = FromWire(job.artifact());
    return spec;
  }

  // The Complete of a finished job: its verdict, a compile job's module for the evaluate job
  // when it is within the wire's limits (proto/wire_limits.h; a larger one is left out and the
  // GPU worker compiles), and what became of an artifact the lease carried.
  v1::CompleteRequest CompleteRequestOf(const ActiveJob& job, const Verdict& verdict,
                                        const JobResult& result) const {
    v1::CompleteRequest request;
    *request.mutable_lease() = job.lease;
    *request.mutable_verdict() = ToWire(verdict);
    if (result.artifact.has_value()) {
      const engine::CompileArtifact& artifact = *result.artifact;
      if (artifact.cubin.size() + artifact.ptx.size() <= wire::kMaxArtifactModuleBytes &&
          artifact.compile_event_json.size() <= wire::kMaxArtifactEventBytes) {
        *request.mutable_artifact() = ToWire(artifact);
      } else {
        spdlog::info("worker {}: job {}: module of {} bytes not sent as an artifact (limit {})",
                     worker_id_, job.lease.job_id(), artifact.cubin.size() + artifact.ptx.size(),
                     wire::kMaxArtifactModuleBytes);
      }
    }
    if (result.artifact_use.has_value()) {
      *request.mutable_artifact_use() = ToWire(*result.artifact_use);
    }
    return request;
  }

  // Calls `rpc` until it succeeds, fails definitely, or the lease can no longer matter.
  template <typename Call>
  grpc::Status CallWithRetry(ActiveJob& job, Call rpc) {
    absl::Duration backoff = absl::Milliseconds(100);
    const absl::Time give_up = absl::Now() + absl::Seconds(lease_seconds_);
    for (;;) {
      grpc::ClientContext context;
      Authorize(&context);
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      grpc::Status status = rpc(context);
      if (status.ok() || !Transient(status) || absl::Now() > give_up || aborting_) return status;
      absl::SleepFor(backoff);
      backoff = std::min(backoff * 2, absl::Seconds(2));
    }
  }

  void MarkLostIfFenced(const grpc::Status& status, ActiveJob& job) {
    if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
      job.lost = true;
      job.cancel = true;
    }
  }

  void RunJob(const v1::LeasedJob& leased, ActiveJob& job) {
    const JobSpec spec = SpecOf(leased);
    const std::string kind = spec.compile_only ? "compile" : "evaluate";
    spdlog::info("worker {}: job {} (submission {}, {} {} {}) started", worker_id_, spec.job_id,
                 spec.submission_id, kind, spec.task_id, spec.arch);
    auto on_stage = [&](const StageReport& report) {
      metrics_.stage_seconds
          .Add({{"stage", StageName(report.stage)}},
               prometheus::Histogram::BucketBoundaries{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120,
                                                       300})
          .Observe(report.seconds);
      if (job.lost) return;
      v1::ReportStageRequest request;
      *request.mutable_lease() = job.lease;
      *request.mutable_result() = ToWire(report);
      v1::ReportStageResponse response;
      grpc::Status status = CallWithRetry(job, [&](grpc::ClientContext& context) {
        return stub_->ReportStage(&context, request, &response);
      });
      MarkLostIfFenced(status, job);
    };
    absl::StatusOr<JobResult> result = executor_->RunWithArtifacts(spec, on_stage, job.cancel);
    const absl::Status& run_status = result.status();
    if (job.lost || job.cancel) {
      spdlog::info("worker {}: job {} stopped ({}); reporting nothing", worker_id_, spec.job_id,
                   job.lost ? "lease lost" : "cancelled");
      metrics_.jobs.Add({{"kind", kind}, {"outcome", "abandoned"}}).Increment();
      return;
    }
    bool probe = false;
    if (!run_status.ok()) {
      spdlog::error("worker {}: job {} infrastructure failure: {}", worker_id_, spec.job_id,
                    std::string(run_status.message()));
      v1::FailRequest request;
      *request.mutable_lease() = job.lease;
      request.set_kind(v1::FAILURE_KIND_INFRASTRUCTURE);
      request.set_reason(std::string(run_status.message()));
      v1::FailResponse response;
      grpc::Status status = CallWithRetry(job, [&](grpc::ClientContext& context) {
        return stub_->Fail(&context, request, &response);
      });
      if (!status.ok()) {
        spdlog::warn("worker {}: reporting failure of job {}: {}", worker_id_, spec.job_id,
                     status.error_message());
      }
      metrics_.jobs.Add({{"kind", kind}, {"outcome", "infrastructure_failure"}}).Increment();
      probe = !options_.compile_only;
    } else {
      Verdict complete = result->verdict;
      complete.report["worker"] = {
          {"worker_id", worker_id_},
          {"hostname", options_.hostname},
          {"job_id", spec.job_id},
          {"attempt", spec.attempt},
      };
      v1::CompleteRequest request = CompleteRequestOf(job, complete, *result);
      v1::CompleteResponse response;
      grpc::Status status = CallWithRetry(job, [&](grpc::ClientContext& context) {
        return stub_->Complete(&context, request, &response);
      });
      // A server that refuses the artifact (validate.h names the field first) still takes the
      // verdict: the evaluate job then compiles, where a lost Complete would cost the job's lease
      // and a retry.
      if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT && request.has_artifact() &&
          absl::StartsWith(status.error_message(), "artifact")) {
        spdlog::warn("worker {}: job {}: artifact refused ({}); completing without it", worker_id_,
                     spec.job_id, status.error_message());
        request.clear_artifact();
        status = CallWithRetry(job, [&](grpc::ClientContext& context) {
          return stub_->Complete(&context, request, &response);
        });
      }
      if (!status.ok()) {
        spdlog::warn("worker {}: completing job {}: {}", worker_id_, spec.job_id,
                     status.error_message());
      }
      const std::string outcome = VerdictClassName(complete.verdict_class);
      metrics_.jobs.Add({{"kind", kind}, {"outcome", outcome}}).Increment();
      // The engine records the gate wait in the verdict (evaluate.cc, Evaluate).
      if (const auto gate = complete.report.find("gpu_gate");
          gate != complete.report.end() && gate->is_object() && gate->contains("wait_seconds") &&
          (*gate)["wait_seconds"].is_number()) {
        metrics_.gpu_gate_wait.Observe((*gate)["wait_seconds"].get<double>());
      }
      UpdateCompileCacheMetrics();
      spdlog::info("worker {}: job {} (submission {}) finished: {}{}", worker_id_, spec.job_id,
                   spec.submission_id, outcome,
                   result->artifact_use.has_value()
                       ? absl::StrCat("; compile artifact ",
                                      engine::ArtifactOutcomeName(result->artifact_use->outcome),
                                      ": ", result->artifact_use->detail)
                       : std::string());
      probe = !options_.compile_only && (complete.verdict_class == VerdictClass::kTimeout ||
                                         complete.verdict_class == VerdictClass::kRuntimeError);
    }
    ++jobs_finished_;
    if (probe) {
      // A sandbox that crashed or hung may have left the GPU in a bad state (an Xid, a
      // context that cannot be torn down); prove the GPU works before taking another job.
      metrics_.sandbox_restarts.Increment();
      absl::Status health = executor_->HealthProbe();
      if (!health.ok()) {
        spdlog::error("worker {}: GPU health probe failed: {}; no longer leasing", worker_id_,
                      std::string(health.message()));
        health_detail_ = std::string(health.message());
        healthy_ = false;
        metrics_.healthy.Set(0);
        CancelLeaseStream();
      }
    }
  }

  void HeartbeatLoop() {
    const absl::Duration interval = absl::Milliseconds(lease_seconds_ * 1000 / 3);
    absl::Duration wait = interval;
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait_for(lock, absl::ToChronoMilliseconds(wait),
                       [this] { return stopping_ && active_.empty(); });
        if (stopping_ && active_.empty()) return;
      }
      v1::HeartbeatRequest request;
      request.set_worker_id(worker_id_);
      request.set_healthy(healthy_);
      request.set_health_detail(health_detail_);
      std::map<std::string, std::shared_ptr<ActiveJob>> snapshot;
      {
        std::lock_guard<std::mutex> lock(mu_);
        snapshot = active_;
      }
      for (auto& [id, job] : snapshot) *request.add_leases() = job->lease;
      grpc::ClientContext context;
      Authorize(&context);
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      v1::HeartbeatResponse response;
      grpc::Status status = stub_->Heartbeat(&context, request, &response);
      if (!status.ok()) {
        // Try again soon rather than a third of a lease later: the server may be restarting,
        // and the leases run out meanwhile.
        spdlog::warn("worker {}: heartbeat failed: {}", worker_id_, status.error_message());
        wait = std::min(interval, Jittered(options_.reconnect_backoff_max));
        continue;
      }
      wait = interval;
      for (const v1::JobLease& lost : response.lost()) {
        if (auto it = snapshot.find(lost.job_id()); it != snapshot.end()) {
          spdlog::warn("worker {}: lease of job {} lost; stopping it", worker_id_, lost.job_id());
          it->second->lost = true;
          it->second->cancel = true;
        }
      }
      for (const std::string& id : response.cancelled_job_ids()) {
        if (auto it = snapshot.find(id); it != snapshot.end()) it->second->cancel = true;
      }
      if (response.drain()) GracefulStop();
    }
  }

  void Join() {
    if (lease_thread_.joinable()) lease_thread_.join();
    std::vector<std::thread> jobs;
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs.swap(job_threads_);
    }
    for (std::thread& t : jobs) t.join();
    wake_.notify_all();
    if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
  }

  WorkerOptions options_;
  std::unique_ptr<JobExecutor> executor_;
  std::unique_ptr<GpuLock> gpu_lock_;  // Held while this GPU worker lives.
  std::mutex compile_cache_mu_;
  JobExecutor::CompileCacheCounts compile_cache_seen_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;
  std::shared_ptr<prometheus::Registry> registry_ = std::make_shared<prometheus::Registry>();
  WorkerMetrics metrics_{*registry_};
  std::unique_ptr<prometheus::Exposer> exposer_;

  std::string worker_id_;
  int lease_seconds_ = 60;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> aborting_{false};
  std::atomic<bool> healthy_{true};
  std::string health_detail_;
  std::atomic<int64_t> jobs_finished_{0};

  std::mutex mu_;
  std::condition_variable wake_;
  grpc::ClientContext* lease_context_ = nullptr;              // Guarded by mu_.
  std::map<std::string, std::shared_ptr<ActiveJob>> active_;  // Guarded by mu_.
  std::vector<std::thread> job_threads_;                      // Guarded by mu_.
  std::thread lease_thread_;
  std::thread heartbeat_thread_;
};

absl::StatusOr<std::unique_ptr<Worker>> Worker::Create(const WorkerOptions& options,
                                                       std::unique_ptr<JobExecutor> executor) {
  if (executor == nullptr) return absl::InvalidArgumentError("no job executor");
  auto impl = std::make_unique<Impl>(options, std::move(executor));
  absl::Status status = impl->Init();
  if (!status.ok()) return status;
  return std::unique_ptr<Worker>(new Worker(std::move(impl)));
}

Worker::Worker(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Worker::~Worker() = default;
absl::Status Worker::Start() { return impl_->Start(); }
void Worker::GracefulStop() { impl_->GracefulStop(); }
void Worker::Abort() { impl_->Abort(); }
void Worker::Wait() { impl_->Wait(); }
const std::string& Worker::worker_id() const { return impl_->worker_id(); }
int Worker::metrics_port() const { return impl_->metrics_port(); }
int64_t Worker::jobs_finished() const { return impl_->jobs_finished(); }
bool Worker::healthy() const { return impl_->healthy(); }

}  // namespace ptxbench::worker
