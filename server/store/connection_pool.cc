#include "server/store/connection_pool.h"

#include <memory>
#include <mutex>
#include <pqxx/pqxx>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/store/database.h"
#include "server/store/pg_error.h"
#include "server/store/queries.h"

namespace ptxbench::store::internal {

// ---------------------------------------------------------------------------------------
// PooledConnection

PooledConnection::PooledConnection(ConnectionPool* pool,
                                   std::unique_ptr<pqxx::connection> connection)
    : pool_(pool), connection_(std::move(connection)) {}

PooledConnection::PooledConnection(PooledConnection&& other) noexcept
    : pool_(other.pool_), connection_(std::move(other.connection_)) {
  other.pool_ = nullptr;
}

PooledConnection::~PooledConnection() {
  if (pool_ != nullptr && connection_ != nullptr) pool_->Return(std::move(connection_));
}

bool PooledConnection::is_open() const { return connection_ != nullptr && connection_->is_open(); }

void PooledConnection::Discard(const absl::Status& why) {
  if (pool_ == nullptr || connection_ == nullptr) return;
  try {
    connection_->disconnect();
  } catch (...) {
    // Closing a broken connection may throw; it is being dropped either way.
  }
  pool_->Return(nullptr);
  connection_.reset();
  if (!why.ok()) pool_->RecordUnreachable(why);
}

// ---------------------------------------------------------------------------------------
// ConnectionPool

ConnectionPool::ConnectionPool(std::string conninfo, Options options)
    : conninfo_(std::move(conninfo)), options_(options) {
  reachability_.reachable = false;
  reachability_.since = absl::Now();
  reachability_.last_error = "not connected yet";
}

ConnectionPool::~ConnectionPool() {
  std::lock_guard<std::mutex> lock(mu_);
  idle_.clear();
}

absl::StatusOr<PooledConnection> ConnectionPool::Acquire() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    const bool available = cv_.wait_for(lock, absl::ToChronoNanoseconds(options_.acquire_timeout),
                                        [this] { return !idle_.empty() || open_ < options_.size; });
    if (!available) {
      return absl::UnavailableError(absl::StrCat("all ", options_.size,
                                                 " PostgreSQL connections stayed busy for ",
                                                 absl::FormatDuration(options_.acquire_timeout),
                                                 " (raise pool_size or look for slow statements)"));
    }
    if (!idle_.empty()) {
      std::unique_ptr<pqxx::connection> connection = std::move(idle_.back());
      idle_.pop_back();
      return PooledConnection(this, std::move(connection));
    }
    ++open_;
  }
  auto connection = OpenConnection(conninfo_);
  if (!connection.ok()) {
    Return(nullptr);
    RecordUnreachable(connection.status());
    return connection.status();
  }
  RecordReachable();
  return PooledConnection(this, *std::move(connection));
}

void ConnectionPool::Return(std::unique_ptr<pqxx::connection> connection) {
  std::unique_ptr<pqxx::connection> closing;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (connection != nullptr && connection->is_open()) {
      idle_.push_back(std::move(connection));
    } else {
      closing = std::move(connection);  // Destroyed outside the lock.
      --open_;
    }
  }
  cv_.notify_one();
}

void ConnectionPool::DropIdle() {
  std::vector<std::unique_ptr<pqxx::connection>> closing;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing.swap(idle_);
    open_ -= static_cast<int>(closing.size());
  }
  cv_.notify_all();
}

void ConnectionPool::RecordReachable() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!reachability_.reachable) {
    reachability_.reachable = true;
    reachability_.since = absl::Now();
  }
  reachability_.last_error.clear();
}

void ConnectionPool::RecordUnreachable(const absl::Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (reachability_.reachable) {
    reachability_.reachable = false;
    reachability_.since = absl::Now();
  }
  reachability_.last_error = std::string(why.message());
}

StoreReachability ConnectionPool::reachability() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reachability_;
}

int ConnectionPool::open_connections() const {
  std::lock_guard<std::mutex> lock(mu_);
  return open_;
}

int ConnectionPool::idle_connections() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(idle_.size());
}

absl::StatusOr<std::unique_ptr<pqxx::connection>> OpenConnection(const std::string& conninfo) {
  try {
    auto connection = std::make_unique<pqxx::connection>(conninfo);
    for (const auto& statement : AllStatements()) {
      connection->prepare(statement.name, statement.sql);
    }
    return connection;
  } catch (...) {
    return ClassifyCurrentException(
               absl::StrCat("connecting to PostgreSQL at ", DescribeDatabaseUrl(conninfo)))
        .status;
  }
}

}  // namespace ptxbench::store::internal
