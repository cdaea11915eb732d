// Internal to server/store: the pool of PostgreSQL connections every Store call runs on, and
// the store's reachability signal (store.h: Store::Reachability).
//
// Reconnection: a connection found broken is dropped instead of returned (PooledConnection::
// Discard), which frees its slot, so the next Acquire opens a fresh one. After a database
// restart every idle connection is dead; Store::Run replaces the one it was given and the
// others as they are used, and DropIdle() discards them all at once for a caller that knows.
//
// Reachability: every Acquire that had to open a connection, every connection found broken and
// every Ping records whether PostgreSQL answered; Reachability() reads the last record with no
// round trip, so a health check or a scrape never waits on a dead database.
//
// libpqxx stays out of this header: connections are named by a forward declaration, and only
// the store's .cc files, which include <pqxx/pqxx>, touch them.
#ifndef PTXBENCH_SERVER_STORE_CONNECTION_POOL_H_
#define PTXBENCH_SERVER_STORE_CONNECTION_POOL_H_

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/store/store.h"

namespace pqxx {
class connect_direct;
template <typename Policy>
class basic_connection_base;
// The same alias <pqxx/connection.hxx> declares (libpqxx 6.4); a redeclaration naming the same
// type is allowed ([dcl.typedef]), so this file and pqxx.hxx can both be included.
using connection = basic_connection_base<connect_direct>;
}  // namespace pqxx

namespace ptxbench::store::internal {

class ConnectionPool;

// One connection taken from the pool; returned to it when destroyed, unless discarded.
class PooledConnection {
 public:
  PooledConnection(PooledConnection&& other) noexcept;
  PooledConnection& operator=(PooledConnection&& other) = delete;
  PooledConnection(const PooledConnection&) = delete;
  PooledConnection& operator=(const PooledConnection&) = delete;
  ~PooledConnection();

  pqxx::connection& get() const { return *connection_; }
  // Whether the underlying libpq connection is still open.
  bool is_open() const;
  // The connection broke (or must not be reused): close it instead of returning it, and
  // record the database as unreachable for `why` when it is a connection failure.
  void Discard(const absl::Status& why);

 private:
  friend class ConnectionPool;
  PooledConnection(ConnectionPool* pool, std::unique_ptr<pqxx::connection> connection);
  ConnectionPool* pool_;
  std::unique_ptr<pqxx::connection> connection_;
};

class ConnectionPool {
 public:
  struct Options {
    int size = 8;  // Connections held open at most.
    // A caller waiting this long for a connection is told UNAVAILABLE rather than held
    // forever: with 8 connections and statements of milliseconds, 30 s means the database is
    // stuck.
    absl::Duration acquire_timeout = absl::Seconds(30);
  };

  // Opens nothing yet; `conninfo` is a libpq connection string.
  ConnectionPool(std::string conninfo, Options options);
  ~ConnectionPool();
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  // Takes an idle connection, opens a new one while fewer than `size` are open, or waits.
  // UNAVAILABLE when PostgreSQL cannot be reached (naming it, never its password) or every
  // connection stayed busy for acquire_timeout.
  absl::StatusOr<PooledConnection> Acquire();

  // Closes every idle connection; busy ones are closed when they come back broken or are
  // used. For a caller that knows the database restarted.
  void DropIdle();

  // Records an answer from, or a connection failure of, the database.
  void RecordReachable();
  void RecordUnreachable(const absl::Status& why);
  StoreReachability reachability() const;

  int open_connections() const;
  int idle_connections() const;
  const std::string& conninfo() const { return conninfo_; }

 private:
  friend class PooledConnection;
  void Return(std::unique_ptr<pqxx::connection> connection);

  const std::string conninfo_;
  const Options options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<pqxx::connection>> idle_;
  int open_ = 0;
  StoreReachability reachability_;
};

// A new connection with every statement of queries.cc defined (libpqxx sends the PREPARE on
// first use, so this costs no round trip and works before the schema exists). UNAVAILABLE
// names the database (DescribeDatabaseUrl) when it cannot be reached.
absl::StatusOr<std::unique_ptr<pqxx::connection>> OpenConnection(const std::string& conninfo);

}  // namespace ptxbench::store::internal

#endif  // PTXBENCH_SERVER_STORE_CONNECTION_POOL_H_
