// Internal to server/store: the shared LISTEN connection behind Store::WaitForQueueChange and
// Store::WaitForEvents.
//
// One background thread owns one connection that LISTENs on both channels and counts the
// notifications per channel; any number of threads wait on a condition variable for a counter
// to move. This costs one connection however many gRPC streams wait, where a LISTEN per waiter
// would exhaust max_connections. The thread sleeps in poll() on the libpq socket and an
// eventfd, so shutdown is immediate and an idle server uses no CPU.
//
// Reconnection: when the connection breaks the thread reconnects with backoff (100 ms doubling
// to 5 s) and, since notifications sent meanwhile are lost, moves both counters so that every
// waiter polls. Reconnect() skips the backoff, for a caller that knows the database is back.
#ifndef PTXBENCH_SERVER_STORE_NOTIFY_LISTENER_H_
#define PTXBENCH_SERVER_STORE_NOTIFY_LISTENER_H_

#include <array>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "absl/time/time.h"

namespace ptxbench::store::internal {

// The channels the store NOTIFYs (migrations/0001_initial.up.sql's triggers).
inline constexpr char kQueueChannel[] = "ptxbench_queue";
inline constexpr char kEventsChannel[] = "ptxbench_events";

class NotifyListener {
 public:
  enum Channel { kQueue = 0, kEvents = 1 };

  // Starts nothing until the first Count or WaitForChange.
  explicit NotifyListener(std::string conninfo);
  ~NotifyListener();
  NotifyListener(const NotifyListener&) = delete;
  NotifyListener& operator=(const NotifyListener&) = delete;

  // The channel's change counter. The first call starts the thread and waits (up to 5 s) for
  // its first connection attempt, so that a count read right after start is taken while
  // LISTEN is already in effect.
  uint64_t Count(Channel channel);
  // Blocks until the counter differs from `seen` (true) or `timeout` passes (false).
  bool WaitForChange(Channel channel, uint64_t seen, absl::Duration timeout);

  // Drops the listening connection and connects again now, without waiting out the backoff.
  void Reconnect();
  // Whether LISTEN is in effect right now.
  bool listening() const;
  // Connections made so far (the first included): a test's evidence of a reconnection.
  int connections() const;

 private:
  class Receiver;  // A pqxx::notification_receiver; defined in the .cc file.

  void EnsureStarted();
  void Bump(Channel channel);
  void Wake();
  // Sleeps up to `duration` unless woken; returns false when stopping.
  bool Sleep(absl::Duration duration);
  void Run();

  const std::string conninfo_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool started_ = false;
  bool stopping_ = false;
  bool reconnect_ = false;  // Reconnect() asked; the thread clears it.
  bool listening_ = false;
  int attempts_ = 0;
  int connections_ = 0;
  std::array<uint64_t, 2> counts_ = {0, 0};
  int wake_fd_ = -1;
  std::thread thread_;
};

}  // namespace ptxbench::store::internal

#endif  // PTXBENCH_SERVER_STORE_NOTIFY_LISTENER_H_
