#include "client/report/metrics.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"

namespace ptxbench::client::report {
namespace {

using json = nlohmann::json;

// The charged turns of a trajectory, in order (infrastructure-failed records dropped).
std::vector<const TurnRecord*> ChargedTurns(const Trajectory& trajectory) {
  std::vector<const TurnRecord*> charged;
  for (const TurnRecord& turn : trajectory.turns) {
    if (!turn.infra_failed) charged.push_back(&turn);
  }
  return charged;
}

// 1-based charged turn of the first TIC turn; 0 when there is none.
int FirstTicTurn(const std::vector<const TurnRecord*>& charged) {
  for (size_t i = 0; i < charged.size(); ++i) {
    if (IsTic(*charged[i])) return static_cast<int>(i) + 1;
  }
  return 0;
}

json RateJson(const Rate& rate) {
  return {{"hits", rate.hits}, {"total", rate.total}, {"rate", rate.value()}};
}

json OptionalNumber(const std::optional<double>& value) {
  return value.has_value() ? json(*value) : json(nullptr);
}

}  // namespace

absl::StatusOr<std::vector<Trajectory>> LoadTrajectories(const std::vector<std::string>& dirs) {
  std::vector<Trajectory> trajectories;
  for (const std::string& dir : dirs) {
    ASSIGN_OR_RETURN(std::vector<std::string> files, FindTrajectoryFiles(dir));
    for (const std::string& file : files) {
      ASSIGN_OR_RETURN(Trajectory trajectory, ReadTrajectory(file));
      trajectories.push_back(std::move(trajectory));
    }
  }
  return trajectories;
}

absl::StatusOr<Report> BuildReport(const std::vector<Trajectory>& trajectories,
                                   const ReportOptions& options) {
  for (int limit : options.turn_limits) {
    if (limit < 1) {
      return absl::InvalidArgumentError(absl::StrCat("turn limit ", limit, " is below 1"));
    }
  }
  for (double p : options.fast_p) {
    if (!(p > 0)) return absl::InvalidArgumentError(absl::StrCat("fast_p threshold ", p, " <= 0"));
  }
  Report report;
  report.options = options;
  report.files = static_cast<int>(trajectories.size());

  std::map<GroupKey, std::vector<const Trajectory*>> groups;
  std::set<std::tuple<GroupKey, int, std::string>> seen;
  for (const Trajectory& t : trajectories) {
    const RunConfig& run = t.header.run;
    GroupKey key{run.model, run.task, run.arch, run.knowledge};
    if (!seen.insert({key, run.trajectory_index, t.header.started_at}).second) {
      report.warnings.push_back(absl::StrCat(t.path, ": same trajectory (index ",
                                             run.trajectory_index, ", started ",
                                             t.header.started_at, ") as an earlier file; skipped"));
      continue;
    }
    if (t.torn_line > 0) {
      report.warnings.push_back(
          absl::StrCat(t.path, ":", t.torn_line, ": torn last line (interrupted write) ignored"));
    }
    groups[key].push_back(&t);
  }

  for (const auto& [key, members] : groups) {
    GroupMetrics g;
    g.key = key;
    g.trajectories = static_cast<int>(members.size());
    g.min_budget = members.front()->header.run.turns;
    g.max_budget = g.min_budget;
    g.fast_p.assign(options.fast_p.size(), Rate{});
    int64_t input_tokens = 0;
    int64_t output_tokens = 0;
    int64_t reasoning_tokens = 0;
    int reasoning_reported_turns = 0;  // Providers that do not report the figure leave it out.
    double log_sum = 0;
    std::vector<int> first_tic;  // Per trajectory.
    for (const Trajectory* t : members) {
      const int budget = t->header.run.turns;
      g.min_budget = std::min(g.min_budget, budget);
      g.max_budget = std::max(g.max_budget, budget);
      if (!t->finished()) ++g.unfinished;
      std::vector<const TurnRecord*> charged = ChargedTurns(*t);
      // A run never charges more turns than its budget; a file that does is counted only up to
      // the budget, so that one overlong run cannot lift its group's rates.
      if (static_cast<int>(charged.size()) > budget) {
        report.warnings.push_back(absl::StrCat(t->path, ": ", charged.size(),
                                               " charged turns exceed the budget of ", budget,
                                               "; turns after ", budget, " ignored"));
        charged.resize(budget);
      }
      g.infra_failed_turns += static_cast<int>(t->turns.size()) - t->charged_turns();
      first_tic.push_back(FirstTicTurn(charged));
      bool any_correct = false;
      bool any_compiled = false;
      std::vector<bool> fast(options.fast_p.size(), false);
      for (const TurnRecord* turn : charged) {
        ++g.charged_turns;
        input_tokens += turn->usage.input_tokens;
        output_tokens += turn->usage.output_tokens;
        if (turn->usage.reasoning_tokens.has_value()) {
          reasoning_tokens += *turn->usage.reasoning_tokens;
          ++reasoning_reported_turns;
        }
        if (turn->verdict.has_value()) {
          if (turn->verdict->runtime_unverified) ++g.runtime_unverified_turns;
          any_compiled = any_compiled || turn->verdict->compiled;
        }
        any_correct = any_correct || IsCorrect(*turn);
        if (!IsTic(*turn)) continue;
        const double speedup = turn->verdict->speedup;
        if (speedup > 0) {
          g.tic_speedups.push_back(speedup);
          log_sum += std::log(speedup);
        } else {
          ++g.tic_turns_without_speedup;
        }
        for (size_t i = 0; i < options.fast_p.size(); ++i) {
          if (speedup >= options.fast_p[i]) fast[i] = true;
        }
      }
      g.correct.total += 1;
      g.correct.hits += any_correct ? 1 : 0;
      g.compiled.total += 1;
      g.compiled.hits += any_compiled ? 1 : 0;
      for (size_t i = 0; i < fast.size(); ++i) {
        g.fast_p[i].total += 1;
        g.fast_p[i].hits += fast[i] ? 1 : 0;
      }
    }
    if (g.unfinished > 0) {
      report.warnings.push_back(absl::StrCat(
          key.model, " ", key.task, " ", key.arch, " ", key.knowledge, ": ", g.unfinished,
          " unfinished trajectories (no end record) counted with the turns they have"));
    }
    for (int limit : options.turn_limits) {
      if (limit > g.min_budget) {
        g.tic_at_limit.push_back(std::nullopt);
        continue;
      }
      Rate rate;
      for (int first : first_tic) {
        rate.total += 1;
        rate.hits += (first > 0 && first <= limit) ? 1 : 0;
      }
      g.tic_at_limit.push_back(rate);
    }
    for (int k = 1; k <= g.min_budget; ++k) {
      Rate rate;
      for (int first : first_tic) {
        rate.total += 1;
        rate.hits += (first > 0 && first <= k) ? 1 : 0;
      }
      g.tic_curve.push_back(rate);
    }
    if (!g.tic_speedups.empty()) {
      g.geomean_speedup = std::exp(log_sum / static_cast<double>(g.tic_speedups.size()));
      g.best_speedup = *std::max_element(g.tic_speedups.begin(), g.tic_speedups.end());
    }
    if (g.charged_turns > 0) {
      const double n = g.charged_turns;
      g.input_tokens_per_turn = static_cast<double>(input_tokens) / n;
      g.output_tokens_per_turn = static_cast<double>(output_tokens) / n;
      if (reasoning_reported_turns > 0) {
        g.reasoning_tokens_per_turn =
            static_cast<double>(reasoning_tokens) / reasoning_reported_turns;
      }
    }
    report.groups.push_back(std::move(g));
  }
  return report;
}

json ReportJson(const Report& report) {
  json groups = json::array();
  for (const GroupMetrics& g : report.groups) {
    json tic = json::object();
    for (size_t i = 0; i < report.options.turn_limits.size(); ++i) {
      tic[std::to_string(report.options.turn_limits[i])] =
          g.tic_at_limit[i].has_value() ? RateJson(*g.tic_at_limit[i]) : json(nullptr);
    }
    json curve = json::array();
    for (const Rate& r : g.tic_curve) curve.push_back(r.value());
    json fast = json::object();
    for (size_t i = 0; i < report.options.fast_p.size(); ++i) {
      fast[FastPLabel(report.options.fast_p[i])] = RateJson(g.fast_p[i]);
    }
    groups.push_back({
        {"model", g.key.model},
        {"task", g.key.task},
        {"arch", g.key.arch},
        {"knowledge", g.key.knowledge},
        {"trajectories", g.trajectories},
        {"unfinished", g.unfinished},
        {"min_budget", g.min_budget},
        {"max_budget", g.max_budget},
        {"tic_rate_at_turn_limit", std::move(tic)},
        {"tic_rate_curve", std::move(curve)},
        {"correct_rate", RateJson(g.correct)},
        {"compiled_rate", RateJson(g.compiled)},
        {"fast_p", std::move(fast)},
        {"tic_speedups", g.tic_speedups},
        {"tic_turns_without_speedup", g.tic_turns_without_speedup},
        {"geomean_speedup", OptionalNumber(g.geomean_speedup)},
        {"best_speedup", OptionalNumber(g.best_speedup)},
        {"charged_turns", g.charged_turns},
        {"infra_failed_turns", g.infra_failed_turns},
        {"runtime_unverified_turns", g.runtime_unverified_turns},
        {"tokens_per_turn",
         {{"input", g.input_tokens_per_turn},
          {"output", g.output_tokens_per_turn},
          {"reasoning", OptionalNumber(g.reasoning_tokens_per_turn)}}},
    });
  }
  return {{"files", report.files},
          {"turn_limits", report.options.turn_limits},
          {"fast_p", report.options.fast_p},
          {"groups", std::move(groups)},
          {"warnings", report.warnings}};
}

std::string FastPLabel(double p) {
  std::string number = absl::StrFormat("%g", p);
  if (number.find_first_of(".e") == std::string::npos) number += ".0";
  return absl::StrCat("fast_", number);
}

}  // namespace ptxbench::client::report
