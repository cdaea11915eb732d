// The scheduler server as a library: ptxbench-server's main, the API tests and the scheduler
// benchmark all run exactly this. Shaped like Triton's server core: an Options struct,
// Create (everything that can fail before serving: the database, migrations, the task
// catalog), Start (bind and serve), GracefulStop.
//
// gRPC stays out of this header (a translation unit including gRPC costs ~10 s on the
// 2-core build machines); the services live behind a pointer to an implementation.
#ifndef PTXBENCH_SERVER_SERVER_H_
#define PTXBENCH_SERVER_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/store/store.h"

namespace ptxbench::server {

struct TlsOptions {
  std::string cert_file;       // PEM; TLS is on when cert and key are both set.
  std::string key_file;        // PEM.
  std::string client_ca_file;  // PEM; when set, clients must present a certificate it signed.
};

struct LimitOptions {
  // Per-tenant defaults, used where a tenant row says 0. 600/min is ten a second: far more
  // than a repair loop produces (each turn waits for a model's answer and a verdict), while a
  // runaway client is stopped within a minute.
  int submissions_per_minute = 600;
  // Unfinished submissions one tenant may hold; bounds how far one vendor can push everyone
  // else's jobs back in the fair-share order.
  int max_queued = 10000;
};

struct ServerOptions {
  std::string listen = "127.0.0.1:50051";         // host:port; port 0 picks a free port.
  std::string metrics_listen = "127.0.0.1:9464";  // Empty: no /metrics endpoint.
  std::string database_url;                       // Empty: embedded PostgreSQL under data_dir.
  std::string data_dir = "./var/ptxbench";
  std::string pg_bin_dir;      // Embedded PostgreSQL binaries; empty = default.
  std::string tasks_dir;       // Required.
  std::string migrations_dir;  // Required.
  TlsOptions tls;
  int lease_seconds = 60;
  // Store connections. Every unary call and every Lease/Watch iteration holds one for the
  // length of a query. With 16 workers and 8 submitters (bench/scheduler_bench) PostgreSQL's
  // CPU, not the pool, is the limit on the 2-core development machine.
  int store_pool_size = 16;
  LimitOptions limits;
  absl::Duration reap_interval = absl::Seconds(5);
  absl::Duration poll_interval = absl::Seconds(1);
  // Clients keep idle Lease and Watch streams alive with HTTP/2 pings (worker/daemon every
  // 20 s, client/ every 30 s). gRPC's documented server default counts pings closer than
  // 5 minutes on a connection without data as strikes and sends GOAWAY after two
  // (doc/keepalive.md, GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS); pings this far
  // apart are accepted explicitly.
  absl::Duration min_client_ping_interval = absl::Seconds(10);
  // How long GracefulStop lets in-flight calls finish before cancelling them.
  absl::Duration shutdown_grace = absl::Seconds(10);
  // How often the supervisor probes the store (one indexed query) and checks that the
  // embedded postmaster lives; the longest a dead store goes unnoticed by health checks.
  absl::Duration supervise_interval = absl::Seconds(1);
  // Concurrent streams per tenant, and streams without a token in total (api_context.h and
  // api/call_guard.h give the reasons for the defaults).
  int max_watches_per_tenant = 128;
  int max_leases_per_tenant = 1024;
  int max_unauthenticated_streams = 32;
  // Threads gRPC may start for calls (each running or admission-queued unary call and each open
  // Lease, WatchSubmission or reflection stream holds one; ~8 MiB of address space, tens of
  // KiB resident).
  int max_stream_threads = 4096;
  // Restarts of a dead embedded PostgreSQL back off from 1 s, doubling up to this: a cluster
  // that cannot start (disk full, port taken) is retried without flooding the log.
  absl::Duration restart_backoff_max = absl::Seconds(30);
};

// The store a server or a maintenance subcommand (migrate, token create) works on: the given
// database_url, or an embedded PostgreSQL cluster under data_dir that lives as long as this.
class StoreHandle {
 public:
  // Connects; starts the embedded cluster first when options.database_url is empty.
  static absl::StatusOr<std::unique_ptr<StoreHandle>> Open(const ServerOptions& options);
  ~StoreHandle();
  StoreHandle(const StoreHandle&) = delete;
  StoreHandle& operator=(const StoreHandle&) = delete;

  store::Store* store() const { return store_.get(); }
  const std::string& database_url() const { return database_url_; }
  bool embedded() const { return embedded_ != nullptr; }
  // Whether the embedded postmaster is alive; true with an external database (nothing of
  // ours to watch).
  bool EmbeddedRunning() const;
  // Starts the embedded cluster again after its postmaster died (same port, so the store's
  // URL stays valid). Never starts anything with an external database (OK, nothing done).
  absl::Status RestartEmbedded();

 private:
  class Embedded;
  StoreHandle() = default;
  std::unique_ptr<Embedded> embedded_;
  std::unique_ptr<store::Store> store_;
  std::string database_url_;
};

class Server {
 public:
  // Opens the store, applies migrations, loads the task catalog. Serves nothing yet.
  static absl::StatusOr<std::unique_ptr<Server>> Create(ServerOptions options);
  ~Server();  // GracefulStop() if still running.
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the gRPC and metrics ports and starts the background threads.
  absl::Status Start();
  // Stops accepting calls, ends Lease and Watch streams, waits up to shutdown_grace for
  // in-flight calls, then stops background threads, the store and the embedded database.
  // Idempotent and safe from any thread except a gRPC handler's.
  void GracefulStop();

  int port() const;          // The bound gRPC port; 0 before Start.
  int metrics_port() const;  // The bound /metrics port; 0 without one.
  int schema_version() const;
  int tasks_loaded() const;
  const std::string& database_url() const;
  const ServerOptions& options() const;

 private:
  class Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ptxbench::server

#endif  // PTXBENCH_SERVER_SERVER_H_
