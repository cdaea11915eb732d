#include "server/store/notify_listener.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <pqxx/pqxx>
#include <string>
#include <utility>

#include "server/store/pg_error.h"

namespace ptxbench::store::internal {

class NotifyListener::Receiver : public pqxx::notification_receiver {
 public:
  Receiver(pqxx::connection_base& connection, const std::string& channel, NotifyListener* listener,
           Channel counter)
      : pqxx::notification_receiver(connection, channel), listener_(listener), counter_(counter) {}
  void operator()(const std::string& /*payload*/, int /*backend_pid*/) override {
    listener_->Bump(counter_);
  }

 private:
  NotifyListener* const listener_;
  const Channel counter_;
};

NotifyListener::NotifyListener(std::string conninfo) : conninfo_(std::move(conninfo)) {}

NotifyListener::~NotifyListener() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  Wake();
  if (thread_.joinable()) thread_.join();
  if (wake_fd_ >= 0) close(wake_fd_);
}

uint64_t NotifyListener::Count(Channel channel) {
  EnsureStarted();
  std::lock_guard<std::mutex> lock(mu_);
  return counts_[channel];
}

bool NotifyListener::WaitForChange(Channel channel, uint64_t seen, absl::Duration timeout) {
  EnsureStarted();
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, absl::ToChronoMicroseconds(std::max(timeout, absl::ZeroDuration())),
                      [&] { return counts_[channel] != seen || stopping_; }) &&
         counts_[channel] != seen;
}

void NotifyListener::Reconnect() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!started_) return;  // The first connection is yet to be made anyway.
    reconnect_ = true;
  }
  Wake();
}

bool NotifyListener::listening() const {
  std::lock_guard<std::mutex> lock(mu_);
  return listening_;
}

int NotifyListener::connections() const {
  std::lock_guard<std::mutex> lock(mu_);
  return connections_;
}

void NotifyListener::EnsureStarted() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!started_) {
    started_ = true;
    wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    thread_ = std::thread([this] { Run(); });
  }
  cv_.wait_for(lock, std::chrono::seconds(5), [this] { return attempts_ > 0 || stopping_; });
}

void NotifyListener::Bump(Channel channel) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++counts_[channel];
  }
  cv_.notify_all();
}

void NotifyListener::Wake() {
  if (wake_fd_ < 0) return;
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t ignored = write(wake_fd_, &one, sizeof(one));
}

bool NotifyListener::Sleep(absl::Duration duration) {
  pollfd wake = {wake_fd_, POLLIN, 0};
  poll(&wake, 1, static_cast<int>(absl::ToInt64Milliseconds(duration)));
  uint64_t drained;
  [[maybe_unused]] ssize_t ignored = read(wake_fd_, &drained, sizeof(drained));
  std::lock_guard<std::mutex> lock(mu_);
  return !stopping_;
}

void NotifyListener::Run() {
  constexpr absl::Duration kFirstBackoff = absl::Milliseconds(100);
  absl::Duration backoff = kFirstBackoff;
  bool connected_before = false;
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      reconnect_ = false;
    }
    bool asked_to_reconnect = false;
    try {
      pqxx::connection connection(conninfo_);
      Receiver queue(connection, kQueueChannel, this, kQueue);
      Receiver events(connection, kEventsChannel, this, kEvents);
      // LISTEN takes effect when the receivers are registered; from here on nothing is
      // missed. Notifications sent while we were disconnected are lost, so after a
      // reconnection every waiter is woken to poll.
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++attempts_;
        ++connections_;
        listening_ = true;
        if (connected_before) {
          ++counts_[kQueue];
          ++counts_[kEvents];
        }
      }
      cv_.notify_all();
      connected_before = true;
      backoff = kFirstBackoff;
      while (!asked_to_reconnect) {
        pollfd fds[2] = {{connection.sock(), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
        poll(fds, 2, -1);
        if (fds[1].revents != 0) {
          uint64_t drained;
          [[maybe_unused]] ssize_t ignored = read(wake_fd_, &drained, sizeof(drained));
          std::lock_guard<std::mutex> lock(mu_);
          if (stopping_) {
            listening_ = false;
            return;
          }
          asked_to_reconnect = reconnect_;
        }
        if (fds[0].revents != 0) connection.get_notifs();  // Throws when the link broke.
        if (!connection.is_open()) throw pqxx::broken_connection("listening connection closed");
      }
    } catch (...) {
      // Polling stays the source of truth: waiters time out and poll while we reconnect.
      ClassifyCurrentException("listening for notifications");
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++attempts_;
      }
      cv_.notify_all();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      listening_ = false;
      if (reconnect_) asked_to_reconnect = true;
    }
    if (asked_to_reconnect) continue;
    if (!Sleep(backoff)) return;
    backoff = std::min(backoff * 2, absl::Seconds(5));
  }
}

}  // namespace ptxbench::store::internal
