// What a person sees while `ptxbench run` works: on a terminal, one progress bar per task with
// live counts of trajectories that reached TIC, were correct (without TIC), failed, or were
// stopped by infrastructure failures, redrawn in place on stderr; not on a terminal, nothing
// (the summary at the end is printed either way).
#ifndef PTXBENCH_CLIENT_RUN_PROGRESS_H_
#define PTXBENCH_CLIENT_RUN_PROGRESS_H_

#include <map>
#include <mutex>
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
  int turns_done = 0;      // Charged turns, over the task's trajectories.
};

class Progress {
 public:
  // `live`: redraw bars on `terminal` (a TTY); otherwise stay quiet.
  Progress(const std::vector<std::string>& tasks, int trajectories_per_task, bool live,
           std::ostream& terminal);

  void Started(const std::string& task);
  void TurnDone(const std::string& task);
  void Finished(const std::string& task, TrajectoryOutcome outcome);
  // Leaves the bars on screen and moves below them.
  void Close();

  std::map<std::string, TaskCounts> counts() const;
  // The bar line of one task, without escape codes (also used by tests).
  static std::string Line(const std::string& task, const TaskCounts& counts, int width);

 private:
  void RedrawLocked();

  mutable std::mutex mutex_;
  std::vector<std::string> tasks_;
  std::map<std::string, TaskCounts> counts_;
  bool live_;
  std::ostream& terminal_;
  bool drawn_ = false;
};

}  // namespace ptxbench::client::run

#endif  // PTXBENCH_CLIENT_RUN_PROGRESS_H_
