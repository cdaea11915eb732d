#include "client/report/metrics.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "common/verdict.h"
#include "proto/wire_names.h"

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

// 1-based charged turn of the first compiling turn; 0 when there is none.
int FirstCompiledTurn(const std::vector<const TurnRecord*>& charged) {
  for (size_t i = 0; i < charged.size(); ++i) {
    if (IsCompiled(*charged[i])) return static_cast<int>(i) + 1;
  }
  return 0;
}

// The rate of trajectories whose first hit (1-based; 0: none) is within `limit`.
Rate WithinLimit(const std::vector<int>& first_hits, int limit) {
  Rate rate;
  for (int first : first_hits) {
    rate.total += 1;
    rate.hits += (first > 0 && first <= limit) ? 1 : 0;
  }
  return rate;
}

json RateJson(const Rate& rate) {
  const Interval interval = WilsonInterval(rate);
  return {{"hits", rate.hits},
          {"total", rate.total},
          {"rate", rate.value()},
          {"wilson95", {interval.low, interval.high}}};
}

std::optional<double> GeometricMean(const std::vector<double>& values) {
  if (values.empty()) return std::nullopt;
  double log_sum = 0;
  for (double v : values) log_sum += std::log(v);
  return std::exp(log_sum / static_cast<double>(values.size()));
}

std::vector<std::string> Sorted(const std::set<std::string>& values) {
  return {values.begin(), values.end()};
}

// Provenance of the files: every distinct version, server and setting, so that a reader sees
// at once when two runs were made with different harnesses or settings.
Provenance CollectProvenance(const std::vector<const Trajectory*>& trajectories) {
  std::set<std::string> clients, servers, harnesses, gpus, tasks, settings, starts;
  for (const Trajectory* t : trajectories) {
    const RunConfig& r = t->header.run;
    clients.insert(r.client_version.empty() ? "not recorded" : r.client_version);
    servers.insert(r.server.empty() ? "not recorded" : r.server);
    tasks.insert(
        absl::StrCat(r.task, " ", r.task_version.empty() ? "(no version)" : r.task_version));
    settings.insert(absl::StrFormat(
        "%s: provider %s, temperature %s, max_tokens %s, context %s, target speedup %g, "
        "%d turns, scope %s",
        r.model, r.provider.empty() ? "?" : r.provider,
        r.temperature < 0 ? "provider default" : absl::StrFormat("%g", r.temperature),
        r.max_tokens > 0 ? absl::StrCat(r.max_tokens) : "provider default",
        r.context_policy.empty() ? "?" : r.context_policy, r.target_speedup, r.turns,
        wire::ScopeName(r.scope)));
    if (!t->header.started_at.empty()) starts.insert(t->header.started_at);
    for (const TurnRecord& turn : t->turns) {
      if (!turn.verdict.has_value() || !turn.verdict->report.is_object()) continue;
      const json& report = turn.verdict->report;
      if (auto it = report.find("harness_version"); it != report.end() && it->is_string()) {
        harnesses.insert(it->get<std::string>());
      }
      const json::json_pointer gpu("/device/name");
      if (report.contains(gpu) && report.at(gpu).is_string()) {
        gpus.insert(report.at(gpu).get<std::string>());
      }
    }
  }
  Provenance p;
  p.generated_at = NowRfc3339();
  if (!starts.empty()) {
    p.first_started_at = *starts.begin();
    p.last_started_at = *starts.rbegin();
  }
  p.client_versions = Sorted(clients);
  p.servers = Sorted(servers);
  p.harness_versions = Sorted(harnesses);
  p.gpus = Sorted(gpus);
  p.task_versions = Sorted(tasks);
  p.model_settings = Sorted(settings);
  return p;
}

json OptionalNumber(const std::optional<double>& value) {
  return value.has_value() ? json(*value) : json(nullptr);
}

// A TIC turn's speedup is a clean figure unless the timing loop found the candidate's samples
// scattering far more than the library's (Sampling::speedup_stable, issue 11: such a
// submission "does not get a clean speedup"). A verdict without sampling (not timed, or from
// a harness before it was recorded) has nothing that makes its speedup unclean.
bool UnstableSpeedup(const TurnRecord& turn) {
  return turn.verdict.has_value() && turn.verdict->sampling.has_value() &&
         !turn.verdict->sampling->speedup_stable;
}

// The verdict as the report's lists show it: "pass (TIC, speedup 1.3)", "wrong_result".
std::string DescribeVerdict(const std::optional<Verdict>& verdict) {
  if (!verdict.has_value()) return "no verdict";
  std::vector<std::string> parts;
  if (verdict->tic) parts.push_back("TIC");
  if (verdict->runtime_unverified) parts.push_back("runtime unverified");
  if (verdict->speedup > 0) parts.push_back(absl::StrFormat("speedup %.4g", verdict->speedup));
  if (verdict->sampling.has_value() && !verdict->sampling->speedup_stable) {
    parts.push_back("unstable speedup");
  }
  return absl::StrCat(VerdictClassName(verdict->verdict_class),
                      parts.empty() ? "" : absl::StrCat(" (", absl::StrJoin(parts, ", "), ")"));
}

// Whether two verdicts give a turn the same figures (what docs/metrics.md reads of a verdict).
bool SameFigures(const std::optional<Verdict>& a, const std::optional<Verdict>& b) {
  if (a.has_value() != b.has_value()) return false;
  if (!a.has_value()) return true;
  auto stable = [](const Verdict& v) {
    return !v.sampling.has_value() || v.sampling->speedup_stable;
  };
  return a->verdict_class == b->verdict_class && a->compiled == b->compiled &&
         a->correct == b->correct && a->tic == b->tic &&
         a->runtime_unverified == b->runtime_unverified && a->speedup == b->speedup &&
         stable(*a) == stable(*b);
}

// The trajectory with every charged turn judged by the current verdicts (ReportOptions), what
// they changed recorded in `source`. The copy leaves out the texts no figure reads (prompts,
// replies, sources, feedback): a report over many runs holds every trajectory at once.
Trajectory JudgedByCurrentVerdicts(const Trajectory& stored, const CurrentVerdicts& current,
                                   VerdictSource* source) {
  Trajectory t;
  t.path = stored.path;
  t.header = stored.header;
  t.end = stored.end;
  t.torn_line = stored.torn_line;
  t.turns.reserve(stored.turns.size());
  for (const TurnRecord& record : stored.turns) {
    TurnRecord turn;
    turn.turn = record.turn;
    turn.extracted = record.extracted;
    turn.submission_id = record.submission_id;
    turn.infra_failed = record.infra_failed;
    turn.usage = record.usage;
    turn.verdict = record.verdict;
    // Infrastructure-failed records count for nothing; a reply without code has no verdict
    // to vouch for.
    if (!turn.infra_failed && (turn.verdict.has_value() || !turn.submission_id.empty())) {
      TurnVerdictNow now = CurrentVerdictOfTurn(current, t.header.run.task, record);
      const ReportedTurn reported{t.path, turn.turn, turn.submission_id, ""};
      if (!now.unverifiable.empty()) {
        source->without_current_verdict.push_back(reported);
        source->without_current_verdict.back().what = std::move(now.unverifiable);
        turn.verdict.reset();
      } else if (!now.hacked_reason.empty()) {
        source->hacked.push_back(reported);
        source->hacked.back().what = std::move(now.hacked_reason);
        turn.verdict.reset();
      } else {
        if (!SameFigures(record.verdict, now.verdict)) {
          source->changed.push_back(reported);
          source->changed.back().what =
              absl::StrCat(DescribeVerdict(record.verdict), " -> ", DescribeVerdict(now.verdict));
        }
        turn.verdict = std::move(now.verdict);
      }
    }
    t.turns.push_back(std::move(turn));
  }
  return t;
}

json ReportedTurnsJson(const std::vector<ReportedTurn>& turns, const char* what) {
  json out = json::array();
  for (const ReportedTurn& turn : turns) {
    out.push_back({{"file", turn.file},
                   {"turn", turn.turn},
                   {"submission_id", turn.submission_id},
                   {what, turn.what}});
  }
  return out;
}

}  // namespace

Interval WilsonInterval(const Rate& rate) {
  if (rate.total <= 0) return {0, 1};
  constexpr double z = 1.959963984540054;  // The 97.5th percentile of the standard normal.
  const double n = rate.total;
  const double p = rate.value();
  const double denominator = 1 + z * z / n;
  const double centre = (p + z * z / (2 * n)) / denominator;
  const double half = z * std::sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator;
  // At 0/n and n/n the bound is exactly 0 or 1 (the formula gives it up to rounding).
  return {rate.hits == 0 ? 0.0 : std::max(0.0, centre - half),
          rate.hits == rate.total ? 1.0 : std::min(1.0, centre + half)};
}

absl::StatusOr<std::vector<Trajectory>> LoadTrajectories(const std::vector<std::string>& dirs) {
  std::vector<Trajectory> trajectories;
  for (const std::string& dir : dirs) {
    ASSIGN_OR_RETURN(std::vector<std::string> files, FindTrajectoryFiles(dir));
    for (const std::string& file : files) {
      ASSIGN_OR_RETURN(Trajectory trajectory, ReadTrajectory(file));
      trajectories.push_back(std::move(trajectory));
    }
  }
  if (trajectories.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "no trajectory files (traj-*.jsonl, at any depth) under ", absl::StrJoin(dirs, ", "),
        ": ptxbench run writes them as RUN_DIR/<model>/<task>/<arch>/<knowledge>/traj-NN.jsonl"));
  }
  return trajectories;
}

std::vector<const GroupMetrics*> GroupsOfScope(const Report& report, bool compile_only) {
  std::vector<const GroupMetrics*> groups;
  for (const GroupMetrics& g : report.groups) {
    if (g.key.compile_only() == compile_only) groups.push_back(&g);
  }
  return groups;
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
  report.options.current_verdicts.reset();  // Used here only; the outputs need none of it.
  report.files = static_cast<int>(trajectories.size());
  report.verdicts.from_server = options.current_verdicts.has_value();
  report.verdicts.server = options.current_verdicts_from;

  std::map<GroupKey, std::vector<const Trajectory*>> groups;
  std::set<std::tuple<GroupKey, int, std::string>> seen;
  std::vector<const Trajectory*> counted;
  // With current verdicts, the trajectories as they judge them (reserved: `groups` points into
  // it).
  std::vector<Trajectory> judged;
  if (options.current_verdicts.has_value()) judged.reserve(trajectories.size());
  for (const Trajectory& t : trajectories) {
    const RunConfig& run = t.header.run;
    GroupKey key{run.model, run.task, run.arch, run.knowledge, run.scope};
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
    if (!t.header.scope_recorded && run.scope == v1::EVALUATION_SCOPE_COMPILE_ONLY) {
      report.warnings.push_back(
          absl::StrCat(t.path,
                       ": the header does not record the scope; compile-only inferred from its "
                       "`compiled` verdicts"));
    }
    const Trajectory* member = &t;
    if (options.current_verdicts.has_value()) {
      judged.push_back(JudgedByCurrentVerdicts(t, *options.current_verdicts, &report.verdicts));
      member = &judged.back();
    }
    groups[key].push_back(member);
    counted.push_back(member);
  }
  report.provenance = CollectProvenance(counted);

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
    std::vector<int> first_tic;        // Per trajectory.
    std::vector<int> first_compiled;   // Per trajectory.
    int turns_to_compile_sum = 0;
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
      const int compiled_at = FirstCompiledTurn(charged);
      first_compiled.push_back(compiled_at);
      if (compiled_at > 0) turns_to_compile_sum += compiled_at;
      if (compiled_at != 1) {
        g.compile_repairs.total += 1;
        g.compile_repairs.hits += compiled_at > 1 ? 1 : 0;
      }
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
        if (UnstableSpeedup(*turn)) {
          // TIC, but its speedup is no figure: not in S, never fast, no speed of light.
          ++g.tic_turns_unstable_speedup;
          continue;
        }
        const double speedup = turn->verdict->speedup;
        if (speedup > 0) {
          g.tic_speedups.push_back(speedup);
        } else {
          ++g.tic_turns_without_speedup;
        }
        if (std::optional<double> sol = SpeedOfLight(*turn)) g.tic_speeds_of_light.push_back(*sol);
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
      // A shorter run says nothing about the limit-th turn.
      const bool known = limit <= g.min_budget;
      g.tic_at_limit.push_back(known ? std::optional<Rate>(WithinLimit(first_tic, limit))
                                     : std::nullopt);
      g.compiled_at_limit.push_back(known ? std::optional<Rate>(WithinLimit(first_compiled, limit))
                                          : std::nullopt);
    }
    for (int k = 1; k <= g.min_budget; ++k) {
      g.tic_curve.push_back(WithinLimit(first_tic, k));
      g.compile_curve.push_back(WithinLimit(first_compiled, k));
    }
    if (g.compiled.hits > 0) {
      g.mean_turns_to_compile = static_cast<double>(turns_to_compile_sum) / g.compiled.hits;
    }
    g.geomean_speedup = GeometricMean(g.tic_speedups);
    if (!g.tic_speedups.empty()) {
      g.best_speedup = *std::max_element(g.tic_speedups.begin(), g.tic_speedups.end());
    }
    g.geomean_speed_of_light = GeometricMean(g.tic_speeds_of_light);
    if (!g.tic_speeds_of_light.empty()) {
      g.best_speed_of_light =
          *std::max_element(g.tic_speeds_of_light.begin(), g.tic_speeds_of_light.end());
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
    // Compile-only groups have no TIC, correctness, fast_p or speedup figures at all (null),
    // rather than zeros that a table or a script could mix with full-scope figures.
    const bool full = !g.key.compile_only();
    auto full_only = [full](json value) { return full ? std::move(value) : json(nullptr); };
    json tic = json::object();
    json compiled_at = json::object();
    for (size_t i = 0; i < report.options.turn_limits.size(); ++i) {
      const std::string limit = std::to_string(report.options.turn_limits[i]);
      tic[limit] = g.tic_at_limit[i].has_value() ? RateJson(*g.tic_at_limit[i]) : json(nullptr);
      compiled_at[limit] =
          g.compiled_at_limit[i].has_value() ? RateJson(*g.compiled_at_limit[i]) : json(nullptr);
    }
    json curve = json::array();
    for (const Rate& r : g.tic_curve) curve.push_back(r.value());
    json compile_curve = json::array();
    for (const Rate& r : g.compile_curve) compile_curve.push_back(r.value());
    json fast = json::object();
    for (size_t i = 0; i < report.options.fast_p.size(); ++i) {
      fast[FastPLabel(report.options.fast_p[i])] = RateJson(g.fast_p[i]);
    }
    groups.push_back({
        {"model", g.key.model},
        {"task", g.key.task},
        {"arch", g.key.arch},
        {"knowledge", g.key.knowledge},
        {"scope", wire::ScopeName(g.key.scope)},
        {"trajectories", g.trajectories},
        {"unfinished", g.unfinished},
        {"min_budget", g.min_budget},
        {"max_budget", g.max_budget},
        {"tic_rate_at_turn_limit", full_only(std::move(tic))},
        {"tic_rate_curve", full_only(std::move(curve))},
        {"correct_rate", full_only(RateJson(g.correct))},
        {"compiled_rate", RateJson(g.compiled)},
        {"compiled_rate_at_turn_limit", std::move(compiled_at)},
        {"compiled_rate_curve", std::move(compile_curve)},
        {"compile_repairs", RateJson(g.compile_repairs)},
        {"mean_turns_to_compile", OptionalNumber(g.mean_turns_to_compile)},
        {"fast_p", full_only(std::move(fast))},
        {"tic_speedups", full_only(g.tic_speedups)},
        {"tic_turns_without_speedup", g.tic_turns_without_speedup},
        {"tic_turns_unstable_speedup", g.tic_turns_unstable_speedup},
        {"geomean_speedup", OptionalNumber(g.geomean_speedup)},
        {"best_speedup", OptionalNumber(g.best_speedup)},
        {"tic_speeds_of_light", full_only(g.tic_speeds_of_light)},
        {"geomean_speed_of_light", OptionalNumber(g.geomean_speed_of_light)},
        {"best_speed_of_light", OptionalNumber(g.best_speed_of_light)},
        {"charged_turns", g.charged_turns},
        {"infra_failed_turns", g.infra_failed_turns},
        {"runtime_unverified_turns", g.runtime_unverified_turns},
        {"tokens_per_turn",
         {{"input", g.input_tokens_per_turn},
          {"output", g.output_tokens_per_turn},
          {"reasoning", OptionalNumber(g.reasoning_tokens_per_turn)}}},
    });
  }
  const Provenance& p = report.provenance;
  return {{"files", report.files},
          {"provenance",
           {{"generated_at", p.generated_at},
            {"first_started_at", p.first_started_at},
            {"last_started_at", p.last_started_at},
            {"client_versions", p.client_versions},
            {"servers", p.servers},
            {"harness_versions", p.harness_versions},
            {"gpus", p.gpus},
            {"task_versions", p.task_versions},
            {"model_settings", p.model_settings}}},
          {"turn_limits", report.options.turn_limits},
          {"fast_p", report.options.fast_p},
          {"verdicts",
           {{"source", report.verdicts.from_server ? "server" : "trajectory files"},
            {"server", report.verdicts.server},
            {"changed", ReportedTurnsJson(report.verdicts.changed, "change")},
            {"hacked", ReportedTurnsJson(report.verdicts.hacked, "reason")},
            {"without_current_verdict",
             ReportedTurnsJson(report.verdicts.without_current_verdict, "reason")}}},
          {"groups", std::move(groups)},
          {"warnings", report.warnings}};
}

std::string FastPLabel(double p) {
  std::string number = absl::StrFormat("%g", p);
  if (number.find_first_of(".e") == std::string::npos) number += ".0";
  return absl::StrCat("fast_", number);
}

}  // namespace ptxbench::client::report
