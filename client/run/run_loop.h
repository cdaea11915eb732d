// The multi-turn loop of `ptxbench run`: for every task and trajectory, ask the model, take
// the source out of its reply, have the server evaluate it, turn the verdict into feedback,
// and repeat until the trajectory reaches TIC with the target speedup or its turn limit.
// Every turn is appended to the trajectory's JSONL file as it finishes (client/trajectory.h),
// so a run that is interrupted resumes with the same command where it stopped.
//
// Infrastructure failures (the model API's 429 and 5xx, timeouts, the server unreachable, a
// verdict of infrastructure_failure) are retried with jittered exponential backoff and never
// charged to the model: past the retry budget the failed attempt is recorded (infra_failed)
// and the trajectory stops unfinished, to be resumed by the next run of the same command.
#ifndef PTXBENCH_CLIENT_RUN_RUN_LOOP_H_
#define PTXBENCH_CLIENT_RUN_RUN_LOOP_H_

#include <atomic>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/run/evaluation_client.h"
#include "client/run/progress.h"
#include "client/run/prompt.h"
#include "client/run/provider.h"

namespace ptxbench::client::run {

struct RetryPolicy {
  int max_attempts = 6;      // Attempts of one call, the first included.
  double base_seconds = 2;   // The first wait; doubled each attempt, with jitter.
  double max_seconds = 120;  // The longest wait (a Retry-After hint may ask for more).
};

struct RunOptions {
  std::string model;  // "openai:gpt-5": recorded with every submission and trajectory.
  std::vector<std::string> tasks;
  std::string arch;       // "sm_90a" or "sm_100a".
  std::string knowledge;  // "none", "templates" or "contract".
  int turns = 8;
  int trajectories = 12;
  int concurrency = 4;  // Trajectories in flight.
  ContextPolicy context = ContextPolicy::kFull;
  double target_speedup = 1.0;
  std::string out_dir;
  bool compile_only = false;  // Compile stage only: no turn can reach TIC, every turn runs.
  RetryPolicy retry;
  double verdict_timeout_seconds = 3600;
  std::optional<double> temperature;  // Recorded in the trajectory header.
  int64_t max_tokens = 0;
  // Set when the user interrupts the run (Ctrl-C): nothing more is written or started, so the
  // files hold only finished turns and the same command resumes them. May be null.
  const std::atomic<bool>* interrupted = nullptr;
  std::string server_label;    // Recorded in the header: "host:port" or "embedded".
  std::string client_version;  // Recorded in the header ("" until --version provides one).
};

struct RunSummary {
  int trajectories = 0;
  int tic = 0;
  int correct = 0;
  int failed = 0;
  int compiled = 0;                   // Compile-only trajectories with a turn that compiled.
  int not_compiled = 0;               // Compile-only trajectories without one.
  int infrastructure_stopped = 0;     // Unfinished; the same command resumes them.
  int skipped = 0;                    // Replay only: trajectories the replay has no replies for.
  int turns_run = 0;                  // Charged turns run by this invocation.
  int turns_resumed = 0;              // Charged turns found already done on disk.
  std::vector<std::string> problems;  // One line per infrastructure stop or error.
};

// The session id a trajectory's submissions carry on the server: its path under RUN_DIR and
// the moment it started, so a resumed trajectory keeps it and another run of the same
// configuration gets its own.
std::string SessionId(const std::string& relative_path, const std::string& started_at);

// Runs (or resumes) every trajectory. An error means nothing could run (a task the server
// does not know, an unreadable RUN_DIR); trajectory-level trouble is in the summary.
absl::StatusOr<RunSummary> RunTrajectories(const RunOptions& options, ModelProvider& provider,
                                           EvaluationClient& evaluator, Progress& progress);

}  // namespace ptxbench::client::run

#endif  // PTXBENCH_CLIENT_RUN_RUN_LOOP_H_
