// The benchmark's figures from trajectory files: per (model, task, arch, knowledge) group, the
// TIC rate at turn limits, correctness, fast_p, speedups and tokens. Every definition, with its
// formula, is in docs/metrics.md; this file is their only implementation.
#ifndef PTXBENCH_CLIENT_REPORT_METRICS_H_
#define PTXBENCH_CLIENT_REPORT_METRICS_H_

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "client/report/current_verdict.h"
#include "client/trajectory.h"
#include "nlohmann/json.hpp"

namespace ptxbench::client::report {

// A group: trajectories of one model on one task, arch and knowledge level, in one scope.
// Compile-only runs are a group of their own and get compile figures only (docs/metrics.md).
struct GroupKey {
  std::string model;
  std::string task;
  std::string arch;
  std::string knowledge;
  v1::EvaluationScope scope = v1::EVALUATION_SCOPE_FULL;

  bool compile_only() const { return scope == v1::EVALUATION_SCOPE_COMPILE_ONLY; }
  bool operator<(const GroupKey& other) const {
    return std::tie(scope, model, task, arch, knowledge) <
           std::tie(other.scope, other.model, other.task, other.arch, other.knowledge);
  }
  bool operator==(const GroupKey& other) const {
    return std::tie(scope, model, task, arch, knowledge) ==
           std::tie(other.scope, other.model, other.task, other.arch, other.knowledge);
  }
};

struct ReportOptions {
  std::vector<int> turn_limits = {1, 4, 8};
  std::vector<double> fast_p = {0.5, 1.0, 1.2};
  // With `ptxbench report --server`: the current verdict of every turn's submission
  // (export_server.h FetchCurrentVerdicts). When set, every charged turn is judged by
  // CurrentVerdictOfTurn (current_verdict.h) instead of the verdict its file recorded: a
  // re-judged turn by its new verdict; a turn marked hacked, or one nothing vouches for (no
  // or an unknown submission id, another kernel's id, a re-judge still running), keeps its
  // place as a charged turn but credits nothing (Report::verdicts lists each).
  std::optional<CurrentVerdicts> current_verdicts;
  std::string current_verdicts_from;  // The server's address, for the outputs.
};

// A rate with its numerator and denominator, so that tables can show either.
struct Rate {
  int hits = 0;
  int total = 0;
  double value() const { return total == 0 ? 0 : static_cast<double>(hits) / total; }
};

// The 95 % Wilson score interval of a rate (z = 1.96): unlike the normal approximation it stays
// inside [0, 1] and is not empty at 0/n or n/n, which matters at the n = 8-12 trajectories of a
// group. {0, 1} for a rate of no trials.
struct Interval {
  double low = 0;
  double high = 1;
};
Interval WilsonInterval(const Rate& rate);

// Where a report's trajectories come from, for a paper or a slide: every distinct value seen.
struct Provenance {
  std::string generated_at;      // When the report was built (RFC 3339 UTC).
  std::string first_started_at;  // Earliest and latest trajectory start.
  std::string last_started_at;
  std::vector<std::string> client_versions;   // Header `client`; "not recorded" when absent.
  std::vector<std::string> servers;           // Header `server`.
  std::vector<std::string> harness_versions;  // Verdict reports' `harness_version` (the engine).
  std::vector<std::string> gpus;              // Verdict reports' device names.
  std::vector<std::string> task_versions;     // "task version" per task.
  std::vector<std::string> model_settings;    // Per model: provider, temperature, max tokens, ...
};

struct GroupMetrics {
  GroupKey key;
  int trajectories = 0;
  int unfinished = 0;  // Without an end record (still running, or interrupted).
  int min_budget = 0;  // Smallest and largest run.turns among the trajectories.
  int max_budget = 0;
  // One per ReportOptions::turn_limits; empty when some trajectory's budget is below the limit
  // (a shorter run cannot say what it would have done at that turn).
  std::vector<std::optional<Rate>> tic_at_limit;
  // TIC rate at every limit k = 1 .. min_budget (the plot's curve).
  std::vector<Rate> tic_curve;
  Rate correct;   // At least one correct charged turn.
  Rate compiled;  // At least one charged turn that compiled.
  // Compiled within each turn limit (as tic_at_limit) and at every k = 1 .. min_budget: the
  // figures of compile-only groups, computed for every group.
  std::vector<std::optional<Rate>> compiled_at_limit;
  std::vector<Rate> compile_curve;
  // Of the trajectories whose first charged turn did not compile, those that compiled later.
  Rate compile_repairs;
  // Mean 1-based charged turn of the first compiling turn, over trajectories that compiled.
  std::optional<double> mean_turns_to_compile;
  std::vector<Rate> fast_p;  // One per ReportOptions::fast_p, over each whole trajectory.
  // Every TIC turn's speedup > 0 that is a clean figure, in file order.
  std::vector<double> tic_speedups;
  int tic_turns_without_speedup = 0;  // TIC turns whose verdict has no speedup (not timed).
  // TIC turns whose speedup is not a clean figure (the verdict's sampling.speedup_stable is
  // false: the candidate's timing samples scatter > 4x the library's). They count as TIC, but
  // their speedup counts nowhere: not in tic_speedups, never fast, no speed of light.
  int tic_turns_unstable_speedup = 0;
  std::optional<double> geomean_speedup;  // Over tic_speedups.
  std::optional<double> best_speedup;
  // SpeedOfLight() of every TIC turn that has one, in file order; geometric mean and best.
  std::vector<double> tic_speeds_of_light;
  std::optional<double> geomean_speed_of_light;
  std::optional<double> best_speed_of_light;
  int charged_turns = 0;
  int infra_failed_turns = 0;
  int runtime_unverified_turns = 0;  // Charged turns whose verdict is runtime_unverified.
  double input_tokens_per_turn = 0;  // Means over charged turns.
  double output_tokens_per_turn = 0;
  // Over the charged turns whose provider reported the figure; absent when none did (printed
  // "not reported", never 0).
  std::optional<double> reasoning_tokens_per_turn;
};

// A turn the current verdicts (ReportOptions::current_verdicts) judged otherwise than its file.
struct ReportedTurn {
  std::string file;
  int turn = 0;  // The charged turn.
  std::string submission_id;
  std::string what;  // "pass (TIC, speedup 1.3) -> wrong_result", the hacked mark's reason, ...
};

// Where a report's verdicts come from, and the turns the server judged otherwise.
struct VerdictSource {
  bool from_server = false;  // False: the verdicts the trajectory files recorded.
  std::string server;
  std::vector<ReportedTurn> changed;  // Current verdict differs from the file's (re-judged).
  std::vector<ReportedTurn> hacked;   // Marked hacked: credits nothing; `what` is the reason.
  std::vector<ReportedTurn> without_current_verdict;  // Credits nothing; `what` says why.
};

struct Report {
  ReportOptions options;
  VerdictSource verdicts;
  std::vector<GroupMetrics> groups;  // Sorted by key: full-scope groups first.
  int files = 0;
  std::vector<std::string> warnings;  // Torn lines, unfinished trajectories, duplicates.
  Provenance provenance;
};

// Every trajectory file under the folders (recursively), read whole. The first malformed file
// fails the load with an error naming its file and line; NOT_FOUND names the folders when none
// holds a trajectory file (traj-*.jsonl), so that a report is never made of nothing.
absl::StatusOr<std::vector<Trajectory>> LoadTrajectories(const std::vector<std::string>& dirs);

// The figures of docs/metrics.md. INVALID_ARGUMENT for options out of range (a turn limit < 1,
// a p <= 0). A file whose (group, trajectory index, started_at) repeats an earlier one's is a
// copy of the same trajectory: it is skipped with a warning.
absl::StatusOr<Report> BuildReport(const std::vector<Trajectory>& trajectories,
                                   const ReportOptions& options);

// The groups of one scope, in report order.
std::vector<const GroupMetrics*> GroupsOfScope(const Report& report, bool compile_only);

nlohmann::json ReportJson(const Report& report);

// "fast_0.5", "fast_1.0", "fast_1.2": the column and JSON key of a fast_p threshold.
std::string FastPLabel(double p);

}  // namespace ptxbench::client::report

#endif  // PTXBENCH_CLIENT_REPORT_METRICS_H_
