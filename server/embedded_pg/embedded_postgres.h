// A private PostgreSQL 15 cluster for a server started without --database_url: initialised on
// first use, bound to 127.0.0.1 only, kept across restarts (the data survives), recovered
// after the owning process was killed, restarted by its owner when the postmaster dies
// (server/server.cc supervises it), stopped on Stop() or destruction.
//
// Layout of Options::data_dir (created if missing; every file of it is created and opened
// without following links, and the folder and its parents must be changeable only by root
// or this user: trusted_dir.h):
//   pgdata/          the cluster (PGDATA)
//   password         the superuser's random password (mode 0600); used only to create the
//                    application role and database at start
//   app_password     the application role's random password (mode 0600)
//   postgresql.log   the server's log
//   owner.lock       flock()ed by the live EmbeddedPostgres; tells a second server that the
//                    cluster is in use and a restarted one that a running postmaster is an
//                    orphan of a killed owner
//
// Roles: the superuser 'ptxbench' (initdb's bootstrap user) and the application role
// 'ptxbench_app': LOGIN, no SUPERUSER, CREATEDB, CREATEROLE, REPLICATION or BYPASSRLS, owner
// of the 'ptxbench' database and of every object in its public schema, and the only role
// besides the superuser allowed to connect to it. database_url() is the application role's:
// the server, its migrations and its maintenance verbs never hold superuser rights, so a SQL
// injection could not reach COPY ... PROGRAM, pg_read_file or ALTER SYSTEM. Clusters made
// before the role existed (their objects owned by the superuser) are handed over at start.
//
// initdb refuses to run as root, so when the process is root the cluster belongs to the
// unprivileged 'postgres' user (created by Debian's postgresql-15 package) and initdb/pg_ctl
// run through runuser.
#ifndef PTXBENCH_SERVER_EMBEDDED_PG_EMBEDDED_POSTGRES_H_
#define PTXBENCH_SERVER_EMBEDDED_PG_EMBEDDED_POSTGRES_H_

#include <sys/types.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ptxbench::embedded_pg {

class TrustedDir;

inline constexpr char kSuperuser[] = "ptxbench";
inline constexpr char kAppRole[] = "ptxbench_app";
inline constexpr char kAppDatabase[] = "ptxbench";

class EmbeddedPostgres {
 public:
  struct Options {
    std::string data_dir;
    int port = 0;  // 0 = pick a free loopback port (kept across Restart()).
    std::string pg_bin_dir = "/usr/lib/postgresql/15/bin";
  };

  // Initialises the cluster if data_dir has none, stops an orphaned postmaster left by a
  // killed owner, starts the server, and creates (or updates) the application role and its
  // database. FAILED_PRECONDITION names the missing piece (binaries, the postgres user, a
  // cluster in use by another live process) or the untrusted path (a folder others can
  // write, a planted symlink); UNAVAILABLE carries the tail of the server log when the
  // server does not start.
  static absl::StatusOr<std::unique_ptr<EmbeddedPostgres>> Start(Options options);

  // Whether the postmaster this object started is still alive (not a zombie). Cheap (a
  // kill(pid, 0) and a read of /proc/<pid>/stat): the server's supervisor calls it every
  // second.
  bool Running() const;
  // Starts the server again on the same port after its postmaster died (crash recovery is
  // PostgreSQL's own: it replays the WAL), then re-checks the role and database. OK at once
  // when it is running. UNAVAILABLE when it does not start (the caller retries with backoff).
  absl::Status Restart();

  // Stops the server (fast shutdown: sessions are disconnected, data is flushed). Idempotent.
  absl::Status Stop();
  ~EmbeddedPostgres();

  EmbeddedPostgres(const EmbeddedPostgres&) = delete;
  EmbeddedPostgres& operator=(const EmbeddedPostgres&) = delete;

  // "postgresql://ptxbench_app:<password>@127.0.0.1:<port>/ptxbench".
  std::string database_url() const;
  // The superuser's URL to database `database`; for tests and operators' maintenance.
  std::string superuser_url(const std::string& database) const;
  int port() const { return port_; }
  // The pid of the postmaster this object started; nullopt when stopped.
  std::optional<pid_t> postmaster_pid() const;

 private:
  struct RunAs {
    bool needed = false;
    uid_t uid = 0;
    gid_t gid = 0;
    std::string runuser;  // Path of runuser(1).
  };

  EmbeddedPostgres();
  static absl::StatusOr<RunAs> DecideUser();
  // pg_ctl start (on port_ when `keep_port`, else as Options::port says) and the roles.
  absl::Status StartServer(bool keep_port);
  absl::Status EnsureAppDatabase();

  mutable std::mutex mu_;  // Serialises Restart and Stop.
  Options options_;
  RunAs run_as_;
  std::unique_ptr<TrustedDir> dir_;
  std::string pgdata_;
  std::string superuser_password_;
  std::string app_password_;
  int port_ = 0;
  int lock_fd_ = -1;
  bool running_ = false;
  bool app_ready_ = false;  // The role and database were checked since the last start.
  std::optional<pid_t> postmaster_;
};

}  // namespace ptxbench::embedded_pg

#endif  // PTXBENCH_SERVER_EMBEDDED_PG_EMBEDDED_POSTGRES_H_
