// Why the synchronous gRPC API. Lease and WatchSubmission are long-lived server streams, and
// the callback API would let an idle one cost no thread. But every handler here spends its
// time in blocking libpqxx calls, so the callback API would still need a thread pool of our
// own for every store call, plus a reactor state machine per stream; the sync API gives each
// call a thread from gRPC's pool and lets handlers read top to bottom. An idle stream costs
// one parked thread: ~8 MiB of address space but only the touched stack pages of RSS (the
// scheduler benchmark measures the whole server with its streams, docs/results/). The
// expected load is tens of workers and hundreds of watchers, well inside that budget.
// Streams wait on an in-process change signal (api/notifier.h) fed by the RPCs themselves and
// by PostgreSQL NOTIFY listener threads, and re-poll the store every poll_interval as a
// fallback, checking every 200 ms whether their client left (a sync handler cannot be
// interrupted otherwise) and whether the server is stopping.
#include "server/server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/impl/service_type.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/status.h"
#include "common/task.h"
#include "server/api/admission.h"
#include "server/api/api_context.h"
#include "server/api/auth.h"
#include "server/api/call_guard.h"
#include "server/api/job_tracker.h"
#include "server/api/lease_dispatcher.h"
#include "server/api/log_text.h"
#include "server/api/notifier.h"
#include "server/api/rpc.h"
#include "server/api/services.h"
#include "server/api/tenant_limiter.h"
#include "server/embedded_pg/embedded_postgres.h"
#include "server/metrics.h"
#include "spdlog/spdlog.h"

namespace ptxbench::server {
namespace {

using api::LogQuoted;
// How long a graceful stop answers new Submits UNAVAILABLE before gRPC stops taking calls.
constexpr int kSubmitDrainMs = 300;

// A PEM file named by a TLS option; 1 MiB is far above any certificate chain or key.
absl::StatusOr<std::string> ReadPemFile(const std::string& path, std::string_view field) {
  return ReadFileToString(path, field, {.max_bytes = size_t{1} << 20});
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeCredentials(const TlsOptions& tls) {
  if (tls.cert_file.empty() && tls.key_file.empty()) {
    if (!tls.client_ca_file.empty()) {
      return absl::InvalidArgumentError("tls_client_ca: needs tls_cert and tls_key");
    }
    return grpc::InsecureServerCredentials();
  }
  if (tls.cert_file.empty() || tls.key_file.empty()) {
    return absl::InvalidArgumentError("tls_cert, tls_key: both are needed for TLS");
  }
  grpc::SslServerCredentialsOptions ssl;
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  ASSIGN_OR_RETURN(pair.private_key, ReadPemFile(tls.key_file, "tls_key"));
  ASSIGN_OR_RETURN(pair.cert_chain, ReadPemFile(tls.cert_file, "tls_cert"));
  ssl.pem_key_cert_pairs.push_back(std::move(pair));
  if (!tls.client_ca_file.empty()) {
    ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadPemFile(tls.client_ca_file, "tls_client_ca"));
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// StoreHandle

class StoreHandle::Embedded {
 public:
  std::unique_ptr<embedded_pg::EmbeddedPostgres> postgres;
};

absl::StatusOr<std::unique_ptr<StoreHandle>> StoreHandle::Open(const ServerOptions& options) {
  std::unique_ptr<StoreHandle> handle(new StoreHandle());
  handle->database_url_ = options.database_url;
  if (handle->database_url_.empty()) {
    embedded_pg::EmbeddedPostgres::Options pg;
    pg.data_dir = absl::StrCat(options.data_dir, "/postgres");  // embedded_postgres.h: layout
    pg.port = 0;
    if (!options.pg_bin_dir.empty()) pg.pg_bin_dir = options.pg_bin_dir;
    auto postgres = embedded_pg::EmbeddedPostgres::Start(pg);
    if (!postgres.ok()) return Annotate(postgres.status(), "starting embedded PostgreSQL");
    handle->embedded_ = std::make_unique<Embedded>();
    handle->embedded_->postgres = *std::move(postgres);
    handle->database_url_ = handle->embedded_->postgres->database_url();
    spdlog::info("embedded PostgreSQL started data_dir={}/postgres", options.data_dir);
  }
  store::StoreOptions store_options;
  store_options.database_url = handle->database_url_;
  store_options.pool_size = options.store_pool_size;
  store_options.lease_duration = absl::Seconds(options.lease_seconds);
  // A reaper pass normally follows the last within reap_interval; three intervals without
  // one means the scheduler was down (Store::ReapExpiredLeases grants leases a grace then).
  store_options.outage_threshold = std::max(3 * options.reap_interval, absl::Seconds(1));
  auto store = store::Store::Connect(store_options);
  if (!store.ok()) return Annotate(store.status(), "connecting to the database");
  handle->store_ = *std::move(store);
  return handle;
}

bool StoreHandle::EmbeddedRunning() const {
  return embedded_ == nullptr || embedded_->postgres == nullptr || embedded_->postgres->Running();
}

absl::Status StoreHandle::RestartEmbedded() {
  if (embedded_ == nullptr || embedded_->postgres == nullptr) return absl::OkStatus();
  return embedded_->postgres->Restart();
}

StoreHandle::~StoreHandle() {
  store_.reset();  // Close connections before the cluster goes away.
  if (embedded_ && embedded_->postgres) {
    auto stopped = embedded_->postgres->Stop();
    if (stopped.ok()) {
      spdlog::info("embedded PostgreSQL stopped");
    } else {
      spdlog::warn("stopping embedded PostgreSQL: {}", stopped.ToString());
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Server

class Server::Impl {
 public:
  explicit Impl(ServerOptions options) : options_(std::move(options)) {}
  ~Impl() { GracefulStop(); }

  absl::Status Init() {
    if (options_.tasks_dir.empty()) return absl::InvalidArgumentError("tasks_dir: required");
    if (options_.migrations_dir.empty()) {
      return absl::InvalidArgumentError("migrations_dir: required");
    }
    if (options_.lease_seconds < 3) {
      return absl::InvalidArgumentError(
          absl::StrCat("lease_seconds: must be >= 3 (workers heartbeat every third), got ",
                       options_.lease_seconds));
    }
    ASSIGN_OR_RETURN(credentials_, MakeCredentials(options_.tls));
    auto catalog = TaskCatalog::Load(options_.tasks_dir);
    if (!catalog.ok()) return Annotate(catalog.status(), "loading tasks");
    catalog_ = std::make_unique<TaskCatalog>(*std::move(catalog));
    ASSIGN_OR_RETURN(store_handle_, StoreHandle::Open(options_));
    store::Store* store = store_handle_->store();
    RETURN_IF_ERROR(Annotate(store->MigrateUp(options_.migrations_dir), "migrating the schema"));
    ASSIGN_OR_RETURN(schema_version_, store->SchemaVersion());

    metrics_ = std::make_unique<Metrics>(Metrics::Sources{
        [store] { return store->QueueDepths(); }, [store] { return store->ListWorkers(); }});
    auth_ = std::make_unique<api::Authenticator>(store, api::Authenticator::Options{});
    context_.store = store;
    context_.catalog = catalog_.get();
    context_.metrics = metrics_.get();
    context_.auth = auth_.get();
    context_.leases = &leases_;
    context_.event_changes = &event_changes_;
    context_.jobs = &jobs_;
    context_.options.lease_seconds = options_.lease_seconds;
    context_.options.max_watches_per_tenant = options_.max_watches_per_tenant;
    context_.options.max_leases_per_tenant = options_.max_leases_per_tenant;
    api::TenantLimiter::Options limits;
    limits.default_submissions_per_minute = options_.limits.submissions_per_minute;
    limits.default_max_queued = options_.limits.max_queued;
    limiter_ = std::make_unique<api::TenantLimiter>(store, limits);
    context_.limits = limiter_.get();
    context_.store_health = &store_health_;
    admission_ = std::make_unique<api::Admission>(api::Admission::Options{});
    context_.admission = admission_.get();
    watch_slots_ = std::make_unique<api::StreamSlots>("WatchSubmission",
                                                      context_.options.max_watches_per_tenant);
    lease_slots_ =
        std::make_unique<api::StreamSlots>("Lease", context_.options.max_leases_per_tenant);
    page_tokens_ = std::make_unique<api::PageTokens>(store_handle_->database_url());
    context_.page_tokens = page_tokens_.get();
    context_.watch_slots = watch_slots_.get();
    context_.lease_slots = lease_slots_.get();
    context_.options.poll_interval = options_.poll_interval;
    return absl::OkStatus();
  }

  absl::Status Start() {
    if (server_) return absl::FailedPreconditionError("server already started");
    store::Store* store = store_handle_->store();
    ASSIGN_OR_RETURN(bool bootstrap, auth_->BootstrapMode());
    if (bootstrap) {
      spdlog::warn(
          "no API token exists: accepting loopback clients only, as admin of tenant '{}'. "
          "Create a token with `ptxbench-server token create --tenant T --role admin`.",
          api::kLocalTenant);
      store::TenantRow local;
      local.name = api::kLocalTenant;
      auto created = store->CreateTenant(local, "system:bootstrap");
      if (!created.ok() && !absl::IsAlreadyExists(created)) return created;
    }

    submission_service_ = api::NewSubmissionService(&context_);
    worker_service_ = api::NewWorkerService(&context_);
    admin_service_ = api::NewAdminService(&context_);
    grpc::EnableDefaultHealthCheckService(true);
    // Without this call the linker drops the reflection library (--as-needed) and reflection
    // silently answers UNIMPLEMENTED (docs: toolchain notes).
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
    grpc::ServerBuilder builder;
    builder.AddListeningPort(options_.listen, credentials_, &port_);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    builder.AddChannelArgument(
        GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
        static_cast<int>(absl::ToInt64Milliseconds(options_.min_client_ping_interval)));
    // The server pings too, so that a worker that vanished without closing its connection
    // (power loss, partition) has its Lease stream cancelled within ~80 s instead of the
    // 2-hour default, and its slots stop being counted.
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 60000);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20000);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
    // The largest valid request of any method (rpc.h has each method's own bound, checked
    // before parsing): a Submit slightly over the source limit still reaches the validator
    // and gets "source: N bytes exceeds the 1 MiB limit".
    builder.SetMaxReceiveMessageSize(static_cast<int>(api::kMaxReceiveMessageBytes));
    // A call refused on its headers (no token, a full lane) never has its body read, but a
    // peer may already have sent what the HTTP/2 window allowed, and the server still reads
    // and drops that. gRPC grows the window with its bandwidth probe (to MiBs on loopback), so
    // it stays at HTTP/2's own default of 64 KiB per stream: what one refused call can push.
    // Measured (bench/api_flood, 2 shared cores): with the probe, another tenant's Submit
    // median went 4.9x up under 170 refused 4 MiB bodies/s; with 64 KiB windows 1.6-2.0x
    // under 620-770/s (docs/results/2026-12-01-api-flood.json). The cost: an honest 1 MiB
    // source takes 16 window round trips (0.8 s at 50 ms RTT, nothing on a LAN); typical
    // sources (tens of KB) one.
    builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 64 << 10);
    // Threads for synchronous calls: every call holds one while it runs (a unary call while
    // it waits for its admission lane and runs; a Lease, WatchSubmission or reflection stream
    // while open). Past this many a new call is refused with RESOURCE_EXHAUSTED rather than
    // starving the process; the admission queues and the per-tenant stream caps
    // (api_context.h) keep one caller from reaching it.
    grpc::ResourceQuota quota("ptxbench-server");
    quota.SetMaxThreads(options_.max_stream_threads);
    builder.SetResourceQuota(quota);
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> guards;
    guards.push_back(api::NewCallGuardFactory(options_.max_unauthenticated_streams));
    builder.experimental().SetInterceptorCreators(std::move(guards));
    builder.RegisterService(submission_service_.get());
    builder.RegisterService(worker_service_.get());
    builder.RegisterService(admin_service_.get());
    server_ = builder.BuildAndStart();
    if (!server_ || port_ == 0) {
      server_.reset();
      return absl::UnavailableError(
          absl::StrCat("listen: cannot bind gRPC on '", options_.listen, "'"));
    }
    if (!options_.metrics_listen.empty()) {
      auto status = metrics_->StartExposer(options_.metrics_listen);
      if (!status.ok()) {
        server_->Shutdown();
        server_.reset();
        return status;
      }
    }
    stopping_ = false;
    serving_ = true;
    threads_.emplace_back([this] { SuperviseLoop(); });
    threads_.emplace_back([this] { ReapLoop(); });
    threads_.emplace_back([this] { ListenLoop(/*queue=*/true); });
    threads_.emplace_back([this] { ListenLoop(/*queue=*/false); });
    running_ = true;
    spdlog::info(
        "ptxbench-server serving grpc_port={} metrics_port={} tasks={} schema_version={} "
        "tls={} database={}",
        port_, metrics_->port(), catalog_->tasks().size(), schema_version_,
        !options_.tls.cert_file.empty(), store_handle_->embedded() ? "embedded" : "external");
    return absl::OkStatus();
  }

  void GracefulStop() {
    std::lock_guard<std::mutex> stop_lock(stop_mu_);
    if (running_) {
      spdlog::info("ptxbench-server stopping");
      {
        std::lock_guard<std::mutex> lock(health_mu_);
        serving_ = false;  // The supervisor no longer turns health back to SERVING.
        server_->GetHealthCheckService()->SetServingStatus(false);
      }
      // Streams see this within cancel_check_interval and return; unary calls finish.
      leases_.Shutdown();
      event_changes_.Shutdown();
      // New Submits are answered UNAVAILABLE from here on (submission_service.cc). gRPC's
      // Shutdown cancels calls that arrived but had no handler yet with CANCELLED, which a
      // client may not retry (1 Submit in 6 stops under 8 concurrent submitters before,
      // tests/server/api/worker_flow_test.cc); this drain lets those reach the handler first.
      std::this_thread::sleep_for(std::chrono::milliseconds(kSubmitDrainMs));
      server_->Shutdown(std::chrono::system_clock::now() +
                        absl::ToChronoNanoseconds(options_.shutdown_grace));
      server_->Wait();
      admission_.reset();  // Every call finished; joins the pool before the store goes.
      context_.admission = nullptr;
      {
        std::lock_guard<std::mutex> lock(threads_mu_);
        stopping_ = true;
      }
      threads_cv_.notify_all();
      for (auto& thread : threads_) thread.join();
      threads_.clear();
      metrics_->StopExposer();
      running_ = false;
      spdlog::info("ptxbench-server stopped");
    }
    server_.reset();
    store_handle_.reset();  // Closes connections and stops the embedded cluster.
  }

  int port() const { return port_; }
  int metrics_port() const { return metrics_ ? metrics_->port() : 0; }
  int schema_version() const { return schema_version_; }
  int tasks_loaded() const { return catalog_ ? static_cast<int>(catalog_->tasks().size()) : 0; }
  const std::string& database_url() const {
    static const std::string kNone;
    return store_handle_ ? store_handle_->database_url() : kNone;
  }
  const ServerOptions& options() const { return options_; }

 private:
  // Watches the store: every supervise_interval it checks that the embedded postmaster lives
  // (restarting it with backoff when it died: crash recovery is PostgreSQL's own, it replays
  // the WAL) and that the store answers one query. Health says NOT_SERVING and the API
  // answers UNAVAILABLE while either is down. With --database-url nothing is ever started:
  // the server only waits for the database to come back.
  void SuperviseLoop() {
    store::Store* store = store_handle_->store();
    absl::Duration backoff = absl::Seconds(1);
    absl::Time next_restart = absl::InfinitePast();
    absl::Time down_since = absl::InfinitePast();
    int restart_attempts = 0;
    std::unique_lock<std::mutex> lock(threads_mu_);
    while (!threads_cv_.wait_for(lock, absl::ToChronoNanoseconds(options_.supervise_interval),
                                 [this] { return stopping_; })) {
      lock.unlock();
      bool reachable = true;
      if (!store_handle_->EmbeddedRunning()) {
        reachable = false;
        SetStoreReachable(false, "the embedded PostgreSQL server died");
        if (absl::Now() >= next_restart) {
          ++restart_attempts;
          auto restarted = store_handle_->RestartEmbedded();
          if (restarted.ok()) {
            spdlog::warn("embedded PostgreSQL restarted attempt={}", restart_attempts);
            backoff = absl::Seconds(1);
            restart_attempts = 0;
            reachable = true;
          } else {
            spdlog::error("embedded PostgreSQL restart failed attempt={} retry_in={}s error={}",
                          restart_attempts, absl::ToInt64Seconds(backoff),
                          LogQuoted(restarted.ToString()));
            next_restart = absl::Now() + backoff;
            backoff = std::min(backoff * 2, options_.restart_backoff_max);
          }
        }
      }
      if (reachable) {
        auto probe = store->SchemaVersion();
        reachable = probe.ok();
        if (!reachable) {
          if (down_since == absl::InfinitePast()) down_since = absl::Now();
          SetStoreReachable(false, probe.status().ToString());
        } else {
          if (down_since != absl::InfinitePast()) {
            spdlog::warn("store reachable again after {:.1f}s",
                         absl::ToDoubleSeconds(absl::Now() - down_since));
            down_since = absl::InfinitePast();
          }
          SetStoreReachable(true, "");
        }
      } else if (down_since == absl::InfinitePast()) {
        down_since = absl::Now();
      }
      lock.lock();
    }
  }

  void SetStoreReachable(bool reachable, const std::string& why) {
    std::lock_guard<std::mutex> lock(health_mu_);
    const bool was = store_health_.reachable();
    store_health_.Set(reachable);
    if (was != reachable) {
      if (reachable) {
        spdlog::info("health SERVING: the store answers");
      } else {
        spdlog::error("health NOT_SERVING: the store is unreachable error={}", LogQuoted(why));
      }
    }
    if (serving_ && server_) server_->GetHealthCheckService()->SetServingStatus(reachable);
  }

  // Requeues jobs whose worker stopped heartbeating, so a dead worker delays a job by at most
  // lease_seconds + reap_interval. The first pass runs at start: leases that expired before
  // this server (or its predecessor) went down are taken back at once, and the others, whose
  // workers could not reach a server meanwhile, get a lease period (store.h).
  void ReapLoop() {
    std::unique_lock<std::mutex> lock(threads_mu_);
    do {
      lock.unlock();
      store::ReapReport pass;
      auto reaped = store_handle_->store()->ReapExpiredLeases(&pass);
      if (!reaped.ok()) {
        spdlog::warn("reaper: {}", reaped.status().ToString());
      } else {
        if (pass.outage) {
          spdlog::warn(
              "reaper: no reaper pass for {} (the scheduler was down): {} leases get a lease "
              "period from now",
              absl::FormatDuration(pass.gap), pass.graced);
        }
        if (*reaped > 0) {
          spdlog::info("reaper: requeued {} jobs with expired leases", *reaped);
          leases_.JobsAvailable("");
          event_changes_.Notify();
        }
      }
      lock.lock();
    } while (!threads_cv_.wait_for(lock, absl::ToChronoNanoseconds(options_.reap_interval),
                                   [this] { return stopping_; }));
  }

  // Turns PostgreSQL NOTIFYs (changes made by other replicas, or by this one) into wake-ups.
  void ListenLoop(bool queue) {
    store::Store* store = store_handle_->store();
    // The store's change counter is read before each wait, so a NOTIFY that lands between
    // two waits is not lost.
    uint64_t seen = queue ? store->QueueChangeCount() : store->EventsChangeCount();
    while (true) {
      {
        std::lock_guard<std::mutex> lock(threads_mu_);
        if (stopping_) return;
      }
      // Short waits bound how long GracefulStop waits for this thread.
      auto woken = queue ? store->WaitForQueueChange(seen, absl::Milliseconds(250))
                         : store->WaitForEvents(seen, absl::Milliseconds(250));
      if (woken.ok() && *woken)
        seen = queue ? store->QueueChangeCount() : store->EventsChangeCount();
      if (!woken.ok()) {
        spdlog::warn("listener ({}): {}", queue ? "queue" : "events", woken.status().ToString());
        std::unique_lock<std::mutex> lock(threads_mu_);
        threads_cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_; });
      } else if (*woken) {
        if (queue) {
          leases_.JobsAvailable("");
        } else {
          event_changes_.Notify();
        }
      }
    }
  }

  ServerOptions options_;
  std::shared_ptr<grpc::ServerCredentials> credentials_;
  std::unique_ptr<TaskCatalog> catalog_;
  std::unique_ptr<StoreHandle> store_handle_;
  int schema_version_ = 0;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<api::Authenticator> auth_;
  std::unique_ptr<api::TenantLimiter> limiter_;
  api::LeaseDispatcher leases_;
  api::Notifier event_changes_;
  api::JobTracker jobs_;
  std::unique_ptr<api::Admission> admission_;
  std::unique_ptr<api::StreamSlots> watch_slots_;
  std::unique_ptr<api::StreamSlots> lease_slots_;
  std::unique_ptr<api::PageTokens> page_tokens_;
  api::ApiContext context_;
  std::unique_ptr<grpc::Service> submission_service_;
  std::unique_ptr<grpc::Service> worker_service_;
  std::unique_ptr<grpc::Service> admin_service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;

  api::StoreHealth store_health_;
  std::mutex health_mu_;
  bool serving_ = false;  // Between Start and GracefulStop; guarded by health_mu_.

  std::mutex stop_mu_;
  bool running_ = false;
  std::mutex threads_mu_;
  std::condition_variable threads_cv_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

absl::StatusOr<std::unique_ptr<Server>> Server::Create(ServerOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  RETURN_IF_ERROR(impl->Init());
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Server::~Server() = default;
absl::Status Server::Start() { return impl_->Start(); }
void Server::GracefulStop() { impl_->GracefulStop(); }
int Server::port() const { return impl_->port(); }
int Server::metrics_port() const { return impl_->metrics_port(); }
int Server::schema_version() const { return impl_->schema_version(); }
int Server::tasks_loaded() const { return impl_->tasks_loaded(); }
const std::string& Server::database_url() const { return impl_->database_url(); }
const ServerOptions& Server::options() const { return impl_->options(); }

}  // namespace ptxbench::server
