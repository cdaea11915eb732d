// What a person sees while `ptxbench run` works, on stderr. On a terminal: one bar per task
// with live counts of trajectories that reached TIC, were correct (without TIC), failed, or
// were stopped by infrastructure failures, and a status line with the elapsed time, an
// estimate of the time left and the retries so far, redrawn in place; every line fits 80
// columns. Not on a terminal (a Slurm or nohup log): one line per finished turn instead, with
// the same figures, and nothing redrawn. The summary at the end is printed either way.
#ifndef PTXBENCH_CLIENT_RUN_PROGRESS_H_
#define PTXBENCH_CLIENT_RUN_PROGRESS_H_

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace ptxbench::client::run {

// kSkipped: a replay without that trajectory; it leaves the task's total. kCompiled and
// kNotCompiled are the outcomes of compile-only trajectories, which can never be TIC.
enum class TrajectoryOutcome {
  kTic,
  kCorrect,
  kFailed,
  kCompiled,
  kNotCompiled,
  kInfrastructure,
  kSkipped
};

struct TaskCounts {
  int total = 0;
  int running = 0;
  int tic = 0;
  int correct = 0;         // Correct at some turn, TIC at none.
  int failed = 0;          // Neither.
  int compiled = 0;        // Compile-only trajectories with a turn that compiled.
  int not_compiled = 0;    // Compile-only trajectories without one.
  int infrastructure = 0;  // Stopped unfinished by infrastructure failures; resumable.
  int turns_done = 0;      // Charged turns, over the task's trajectories (resumed ones too).
  int retries = 0;         // Model calls and evaluations sent again after a transient failure.
};

// One finished turn, for the log line.
struct TurnNote {
  int trajectory = 0;
  int turn = 0;
  std::string outcome;  // "compile_error", "pass", "no code in the reply", ...
};

class Progress {
 public:
  using Clock = std::chrono::steady_clock;

  // `live`: redraw bars on `terminal` (a TTY); otherwise one line per finished turn.
  Progress(const std::vector<std::string>& tasks, int trajectories_per_task,
           int turns_per_trajectory, bool live, std::ostream& terminal);

  void Started(const std::string& task);
  // A resumed trajectory brought `turns` charged turns from disk.
  void Resumed(const std::string& task, int turns);
  void Retried(const std::string& task);
  void TurnDone(const std::string& task, const TurnNote& note);
  // `charged_turns`: the trajectory's charged turns when it ended (its unused budget leaves the
  // estimate).
  void Finished(const std::string& task, TrajectoryOutcome outcome, int charged_turns);
  // Leaves the bars on screen and moves below them.
  void Close();

  std::map<std::string, TaskCounts> counts() const;
  int retries() const;

  // The bar line of one task (at most 80 columns, without escape codes; also used by the
  // summary and by tests).
  static std::string Line(const std::string& task, const TaskCounts& counts);
  // "elapsed 01:02:03  turns 12 (budget left 84)  retries 2  ETA <= 00:41:10".
  std::string StatusLine() const;

  // For tests: the clock the estimate reads.
  void set_now_for_testing(std::optional<Clock::time_point> now) { now_for_testing_ = now; }

 private:
  void RedrawLocked();
  std::string StatusLineLocked() const;
  Clock::time_point Now() const { return now_for_testing_.value_or(Clock::now()); }

  mutable std::mutex mutex_;
  std::vector<std::string> tasks_;
  std::map<std::string, TaskCounts> counts_;
  int turns_per_trajectory_;
  bool live_;
  std::ostream& terminal_;
  bool drawn_ = false;
  Clock::time_point started_;
  std::optional<Clock::time_point> now_for_testing_;
  int turns_run_ = 0;    // Charged turns run by this process (the rate of the estimate).
  int budget_left_ = 0;  // Turns the unfinished trajectories may still take, at most.
};

// "01:02:03" (or "02:03" under an hour).
std::string ClockText(double seconds);

}  // namespace ptxbench::client::run

#endif  // PTXBENCH_CLIENT_RUN_PROGRESS_H_
