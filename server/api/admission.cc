#include "server/api/admission.h"

#include <algorithm>
#include <memory>
#include <utility>

namespace ptxbench::api {

Admission::Admission(const Options& options) : options_(options) {
  threads_.reserve(options_.threads);
  for (int i = 0; i < std::max(1, options_.threads); ++i) threads_.emplace_back([this] { Loop(); });
}

Admission::~Admission() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (auto& thread : threads_) thread.join();
}

int Admission::RunningLimit(const std::string& lane) const {
  return lane.empty() ? options_.max_running_unverified : options_.max_running_per_lane;
}

int Admission::QueueLimit(const std::string& lane) const {
  return lane.empty() ? options_.max_queued_unverified : options_.max_queued_per_lane;
}

bool Admission::Run(const std::string& lane, std::function<void()> work) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Lane& entry = lanes_[lane];
    if (stopping_ || static_cast<int>(entry.queue.size()) >= QueueLimit(lane)) {
      ++stats_.refused;
      if (entry.queue.empty() && entry.running == 0) lanes_.erase(lane);
      return false;
    }
    entry.queue.push_back(std::move(work));
  }
  ready_.notify_one();
  return true;
}

bool Admission::RunOnCaller(const std::string& lane, const std::function<void()>& work) {
  struct Handoff {
    std::mutex mu;
    std::condition_variable cv;
    bool started = false;
    bool done = false;
  };
  auto handoff = std::make_shared<Handoff>();
  const bool queued = Run(lane, [handoff] {
    std::unique_lock<std::mutex> lock(handoff->mu);
    handoff->started = true;
    handoff->cv.notify_all();
    handoff->cv.wait(lock, [&] { return handoff->done; });
  });
  if (!queued) return false;
  {
    std::unique_lock<std::mutex> lock(handoff->mu);
    handoff->cv.wait(lock, [&] { return handoff->started; });
  }
  work();
  {
    std::lock_guard<std::mutex> lock(handoff->mu);
    handoff->done = true;
  }
  handoff->cv.notify_all();
  return true;
}

Admission::Stats Admission::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

std::map<std::string, Admission::Lane>::iterator Admission::NextReady() {
  auto ready = [this](const std::pair<const std::string, Lane>& entry) {
    return !entry.second.queue.empty() && entry.second.running < RunningLimit(entry.first);
  };
  const auto start = lanes_.upper_bound(cursor_);
  for (auto it = start; it != lanes_.end(); ++it) {
    if (ready(*it)) return it;
  }
  for (auto it = lanes_.begin(); it != start; ++it) {
    if (ready(*it)) return it;
  }
  return lanes_.end();
}

void Admission::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    auto lane = lanes_.end();
    ready_.wait(lock, [&] {
      lane = NextReady();
      return lane != lanes_.end() || (stopping_ && lanes_.empty());
    });
    if (lane == lanes_.end()) return;  // Stopping and nothing left.
    std::function<void()> work = std::move(lane->second.queue.front());
    lane->second.queue.pop_front();
    ++lane->second.running;
    cursor_ = lane->first;
    const std::string name = lane->first;
    lock.unlock();
    work();
    lock.lock();
    ++stats_.run;
    auto done = lanes_.find(name);
    if (--done->second.running == 0 && done->second.queue.empty()) lanes_.erase(done);
    // A lane at its running limit may have work that this thread's finish made runnable.
    ready_.notify_all();
  }
}

}  // namespace ptxbench::api
