// A private PostgreSQL 15 cluster for a server started without --database_url: initialised on
// first use, bound to 127.0.0.1 only, kept across restarts (the data survives), recovered
// after the owning process was killed, stopped on Stop() or destruction.
//
// Layout of Options::data_dir (created if missing):
//   pgdata/          the cluster (PGDATA)
//   password         the superuser's random password (mode 0600); connections need it
//   postgresql.log   the server's log
//   owner.lock       flock()ed by the live EmbeddedPostgres; tells a second server that the
//                    cluster is in use and a restarted one that a running postmaster is an
//                    orphan of a killed owner
//
// initdb refuses to run as root, so when the process is root the cluster belongs to the
// unprivileged 'postgres' user (created by Debian's postgresql-15 package) and initdb/pg_ctl
// run through runuser.
#ifndef PTXBENCH_SERVER_EMBEDDED_PG_EMBEDDED_POSTGRES_H_
#define PTXBENCH_SERVER_EMBEDDED_PG_EMBEDDED_POSTGRES_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ptxbench::embedded_pg {

class EmbeddedPostgres {
 public:
  struct Options {
    std::string data_dir;
    int port = 0;  // 0 = pick a free loopback port.
    std::string pg_bin_dir = "/usr/lib/postgresql/15/bin";
  };

  // Initialises the cluster if data_dir has none, stops an orphaned postmaster left by a
  // killed owner, starts the server and creates the 'ptxbench' database if missing.
  // FAILED_PRECONDITION names the missing piece (binaries, the postgres user, a cluster in
  // use by another live process); UNAVAILABLE carries the tail of the server log when the
  // server does not start.
  static absl::StatusOr<std::unique_ptr<EmbeddedPostgres>> Start(Options options);

  // Stops the server (fast shutdown: sessions are disconnected, data is flushed). Idempotent.
  absl::Status Stop();
  ~EmbeddedPostgres();

  EmbeddedPostgres(const EmbeddedPostgres&) = delete;
  EmbeddedPostgres& operator=(const EmbeddedPostgres&) = delete;

  // "postgresql://ptxbench:<password>@127.0.0.1:<port>/ptxbench".
  std::string database_url() const;
  int port() const { return port_; }

 private:
  EmbeddedPostgres() = default;

  Options options_;
  std::string pgdata_;
  std::string password_;
  int port_ = 0;
  int lock_fd_ = -1;
  bool running_ = false;
};

}  // namespace ptxbench::embedded_pg

#endif  // PTXBENCH_SERVER_EMBEDDED_PG_EMBEDDED_POSTGRES_H_
