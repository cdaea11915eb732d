#include "client/run/progress.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ptxbench::client::run {
namespace {

constexpr size_t kColumns = 80;
constexpr int kBarWidth = 12;

}  // namespace

std::string ClockText(double seconds) {
  const int64_t s = static_cast<int64_t>(std::max(0.0, seconds));
  if (s >= 3600) return absl::StrFormat("%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60);
  return absl::StrFormat("%02d:%02d", s / 60, s % 60);
}

Progress::Progress(const std::vector<std::string>& tasks, int trajectories_per_task,
                   int turns_per_trajectory, bool live, std::ostream& terminal)
    : tasks_(tasks),
      turns_per_trajectory_(turns_per_trajectory),
      live_(live),
      terminal_(terminal),
      started_(Clock::now()) {
  for (const std::string& task : tasks) counts_[task].total = trajectories_per_task;
  budget_left_ = static_cast<int>(tasks.size()) * trajectories_per_task * turns_per_trajectory;
}

std::string Progress::Line(const std::string& task, const TaskCounts& c) {
  const int done = c.tic + c.correct + c.failed + c.compiled + c.not_compiled;
  const int filled = c.total > 0 ? std::min(kBarWidth, done * kBarWidth / c.total) : 0;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(kBarWidth - filled), '.');
  // A compile-only trajectory that compiled did all it could: it is "compiled", not "failed".
  const bool compile_only = c.compiled + c.not_compiled > 0 && c.tic + c.correct + c.failed == 0;
  std::string figures =
      compile_only ? absl::StrFormat(" [%s] %d/%d compiled %d not compiled %d", bar, done,
                                     c.total, c.compiled, c.not_compiled)
                   : absl::StrFormat(" [%s] %d/%d TIC %d correct %d failed %d", bar, done,
                                     c.total, c.tic, c.correct, c.failed);
  if (c.running > 0) absl::StrAppendFormat(&figures, " run %d", c.running);
  if (c.infrastructure > 0) absl::StrAppendFormat(&figures, " infra %d", c.infrastructure);
  // The task id takes what is left of 80 columns (cut with '~' when it must be).
  const size_t room = figures.size() < kColumns - 8 ? kColumns - figures.size() : 8;
  std::string name = task.size() <= room ? task : absl::StrCat(task.substr(0, room - 1), "~");
  name.resize(std::max(name.size(), std::min<size_t>(room, 24)), ' ');
  std::string line = absl::StrCat(name, figures);
  if (line.size() > kColumns) line.resize(kColumns);
  return line;
}

std::string Progress::StatusLineLocked() const {
  const double elapsed = std::chrono::duration<double>(Now() - started_).count();
  int turns = 0;
  int retries = 0;
  for (const auto& [task, c] : counts_) {
    turns += c.turns_done;
    retries += c.retries;
  }
  std::string line =
      absl::StrFormat("elapsed %s  turns %d  retries %d", ClockText(elapsed), turns, retries);
  // An upper bound: the turn budget left at this process's turn rate (trajectories that reach
  // TIC early leave their unused turns out of it).
  if (budget_left_ <= 0) {
    absl::StrAppend(&line, "  ETA 00:00");
  } else if (turns_run_ > 0 && elapsed > 0) {
    absl::StrAppend(&line, "  ETA <= ", ClockText(budget_left_ * elapsed / turns_run_));
  } else {
    absl::StrAppend(&line, "  ETA --");
  }
  if (line.size() > kColumns) line.resize(kColumns);
  return line;
}

std::string Progress::StatusLine() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return StatusLineLocked();
}

void Progress::RedrawLocked() {
  if (!live_) return;
  // Move back over the lines drawn before, then rewrite every line (ANSI: cursor up, clear).
  if (drawn_) terminal_ << "\x1b[" << tasks_.size() + 1 << "F";
  for (const std::string& task : tasks_) {
    terminal_ << "\x1b[2K" << Line(task, counts_[task]) << "\n";
  }
  terminal_ << "\x1b[2K" << StatusLineLocked() << "\n";
  terminal_.flush();
  drawn_ = true;
}

void Progress::Started(const std::string& task) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++counts_[task].running;
  RedrawLocked();
}

void Progress::Resumed(const std::string& task, int turns) {
  std::lock_guard<std::mutex> lock(mutex_);
  counts_[task].turns_done += turns;
  budget_left_ -= turns;
  RedrawLocked();
}

void Progress::Retried(const std::string& task) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++counts_[task].retries;
  RedrawLocked();
}

void Progress::TurnDone(const std::string& task, const TurnNote& note) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++counts_[task].turns_done;
  ++turns_run_;
  --budget_left_;
  if (live_) {
    RedrawLocked();
    return;
  }
  terminal_ << absl::StrFormat("%s traj-%02d turn %d/%d: %s | %s\n", task, note.trajectory,
                               note.turn, turns_per_trajectory_, note.outcome, StatusLineLocked());
  terminal_.flush();
}

void Progress::Finished(const std::string& task, TrajectoryOutcome outcome, int charged_turns) {
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
  // What this trajectory did not use (it ended early, was skipped or stopped) leaves the budget.
  budget_left_ -= std::max(0, turns_per_trajectory_ - charged_turns);
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

int Progress::retries() const {
  std::lock_guard<std::mutex> lock(mutex_);
  int retries = 0;
  for (const auto& [task, c] : counts_) retries += c.retries;
  return retries;
}

}  // namespace ptxbench::client::run
