#include "client/run/progress.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace ptxbench::client::run {

Progress::Progress(const std::vector<std::string>& tasks, int trajectories_per_task, bool live,
                   std::ostream& terminal)
    : tasks_(tasks), live_(live), terminal_(terminal) {
  for (const std::string& task : tasks) counts_[task].total = trajectories_per_task;
}

std::string Progress::Line(const std::string& task, const TaskCounts& c, int width) {
  const int done = c.tic + c.correct + c.failed + c.compiled + c.not_compiled;
  const int filled = c.total > 0 ? done * width / c.total : 0;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(width - filled), '.');
  // A compile-only trajectory that compiled did all it could: it is "compiled", not "failed".
  const bool compile_only = c.compiled + c.not_compiled > 0 && c.tic + c.correct + c.failed == 0;
  std::string line =
      compile_only
          ? absl::StrFormat("%-28s [%s] %d/%d  compiled %d  not compiled %d", task.substr(0, 28),
                            bar, done, c.total, c.compiled, c.not_compiled)
          : absl::StrFormat("%-28s [%s] %d/%d  TIC %d  correct %d  failed %d", task.substr(0, 28),
                            bar, done, c.total, c.tic, c.correct, c.failed);
  if (c.running > 0) line += absl::StrFormat("  running %d", c.running);
  if (c.infrastructure > 0) line += absl::StrFormat("  infra-stopped %d", c.infrastructure);
  line += absl::StrFormat("  turns %d", c.turns_done);
  return line;
}

void Progress::RedrawLocked() {
  if (!live_) return;
  // Move back over the bars drawn before, then rewrite every line (ANSI: cursor up, clear line).
  if (drawn_) terminal_ << "\x1b[" << tasks_.size() << "F";
  for (const std::string& task : tasks_) {
    terminal_ << "\x1b[2K" << Line(task, counts_[task], 24) << "\n";
  }
  terminal_.flush();
  drawn_ = true;
}

void Progress::Started(const std::string& task) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++counts_[task].running;
  RedrawLocked();
}

void Progress::TurnDone(const std::string& task) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++counts_[task].turns_done;
  RedrawLocked();
}

void Progress::Finished(const std::string& task, TrajectoryOutcome outcome) {
  std::lock_guard<std::mutex> lock(mutex_);
  TaskCounts& c = counts_[task];
  c.running = std::max(0, c.running - 1);
  switch (outcome) {
    case TrajectoryOutcome::kTic:
      ++c.tic;
      break;
    case TrajectoryOutcome::kCorrect:
      ++c.correct;
      break;
    case TrajectoryOutcome::kFailed:
      ++c.failed;
      break;
    case TrajectoryOutcome::kCompiled:
      ++c.compiled;
      break;
    case TrajectoryOutcome::kNotCompiled:
      ++c.not_compiled;
      break;
    case TrajectoryOutcome::kInfrastructure:
      ++c.infrastructure;
      break;
    case TrajectoryOutcome::kSkipped:
      --c.total;
      break;
  }
  RedrawLocked();
}

void Progress::Close() {
  std::lock_guard<std::mutex> lock(mutex_);
  RedrawLocked();
}

std::map<std::string, TaskCounts> Progress::counts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counts_;
}

}  // namespace ptxbench::client::run
