// ptxbench-gpu-report: full evaluations on the local GPU, written as one JSON report
// (scripts/gpu-test runs it; docs/measurement.md quotes it).
//
//   ptxbench-gpu-report --tasks-dir tasks --out report.json [--task ID]... [--repeat 5]
//       [--counter-session per_collection|per_configuration|...] [--gap-pad-max-us N]
//                       [--extras-task gemm_n7168_k5120 | --extras-task none]
//                       [--evaluator PATH] [--skip-validation] [--only-path PATH]
//                       [--skip-path SUBSTRING]... [--deadline-seconds S] [--resume PART.json]
//
// 1. Task validation: every solution and decoy of every task under --tasks-dir (or of the
//    --task ones), evaluated through Evaluate() exactly as a worker would, against the verdict
//    task.json expects. A task without solutions or decoys yet is listed with none.
// 2. On the --extras-task (the GEMM by default):
//    a two-kernel plan (a trivial first kernel, then the reference GEMM): the target stage must
//    instrument the GEMM in its own process after the first kernel ran (CUPTI records only the
//    first kernel function a process patches).
//    Two evaluations pipelined through one GPU gate, as ptxbench-worker --gpu-pipeline 2 runs
//    them (the second starts when the first reaches its target stage, so its processes start
//    while the first one measures): both must pass with the strong check made (H100 run 17 lost
//    it when the second's CUPTI queries ran before its turn at the gate).
// 3. Stability: the reference solution over --repeat separate evaluations: speedup and absolute
//    times, max/min; wall time of one evaluation split by stage.
// A device call has a wall-clock limit (600 s) shorter than the whole validation, so a run can be
// cut into parts (scripts/gpu-test --merge joins them): --deadline-seconds S starts no source
// and no extra after S seconds (they are listed "not_reached"), --resume PART.json leaves out
// the sources and extras an earlier part's report already holds, and the report is rewritten
// after every source, so a call killed at its limit still leaves what it measured.
// Exit code 0 only when every expectation held (of what ran; "complete" says whether all ran).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/eval_command.h"
#include "common/files.h"
#include "common/task.h"
#include "common/verdict.h"
#include "nlohmann/json.hpp"
#include "worker/engine/evaluate.h"
#include "worker/engine/gpu/protocol_messages.h"
#include "worker/engine/gpu_gate.h"

namespace {

using json = nlohmann::json;
using ptxbench::Verdict;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// json::value() throws on a null or non-object; a verdict from a failed stage may hold either.
template <typename T>
T ValueOr(const json& j, const char* key, T fallback) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return fallback;
  try {
    return j[key].get<T>();
  } catch (const json::exception&) {
    return fallback;
  }
}
json ValueOr(const json& j, const char* key, const json& fallback) {  // NOLINT: overload.
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return fallback;
  return j[key];
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// How counted launches differed from timed ones, in time and in the idle GPU before them
// (docs/measurement.md, "Counted launches and their gap"): the counted launches' median time
// over the timed median (a kernel that takes another path when counted changes it), and the
// counters' Begin cost that shows as idle GPU before a counted launch.
json CountedLaunchFigures(const json& result) {
  std::vector<double> counted_ms = ValueOr(result, "counted_ms", std::vector<double>{});
  std::vector<double> begin_us, idle_us;
  for (const json& c :
       ValueOr(result, "counters", json::object()).value("samples", json::array())) {
    begin_us.push_back(ValueOr(c, "begin_us", 0.0));
    idle_us.push_back(ValueOr(c, "idle_us", 0.0));
  }
  const double timed_median = ValueOr(result["candidate"], "median_ms", 0.0);
  return {{"n", counted_ms.size()},
          {"median_ms", Median(counted_ms)},
          {"over_timed_median", timed_median > 0 ? Median(counted_ms) / timed_median : 0.0},
          {"begin_us_median", Median(begin_us)},
          {"idle_us_median", Median(idle_us)},
          {"timed_idle_us_mean", ValueOr(result, "timed_idle_us_mean", 0.0)},
          {"gap_pad_us", ValueOr(result, "gap_pad_us", 0.0)},
          {"gap_pad_seconds", ValueOr(result, "gap_pad_seconds", 0.0)},
          {"gap_pad_exceeded", ValueOr(result, "gap_pad_exceeded", 0)}};
}

json Summarize(const Verdict& v, double seconds) {
  json stages = json::array();
  for (const ptxbench::StageReport& s : v.stages) {
    stages.push_back({{"stage", ptxbench::StageName(s.stage)},
                      {"ok", s.ok},
                      {"seconds", s.seconds},
                      {"summary", s.summary.substr(0, 300)}});
  }
  json out = {{"verdict", ptxbench::VerdictClassName(v.verdict_class)},
              {"tic", v.tic},
              {"tic_paper", v.tic_paper},
              // Issue 11's figures: the work share and path agreement (strong check), the
              // derived watchdogs, sampling honesty and the harness.
              {"target_work", ptxbench::ToJson(v.target_work)},
              {"watchdogs", ValueOr(v.report, "watchdogs", json::object())},
              {"sampling", v.sampling ? ptxbench::ToJson(*v.sampling) : json()},
              {"harness", {{"engine", v.harness.engine}, {"task_hash", v.harness.task_hash}}},
              {"speedup", v.speedup},
              {"message", v.message.substr(0, 1500)},
              {"seconds", seconds},
              {"stages", stages},
              {"wall", ValueOr(v.report, "wall", json::object())},
              {"processes", ValueOr(v.report, "processes", json::array())}};
  for (const ptxbench::StageReport& s : v.stages) {
    if (s.stage == ptxbench::Stage::kTiming && s.detail.contains("timing")) {
      const json& r = s.detail["timing"]["result"];
      out["timing"] = {{"candidate", r["candidate"]},
                       {"baseline", r["baseline"]},
                       {"stop_reason", r["stop_reason"]},
                       {"warmup_pairs", r["warmup_pairs"]},
                       {"sampling_seconds", r["sampling_seconds"]},
                       {"clocks_first", r["clocks"].empty() ? json() : r["clocks"].front()},
                       {"clocks_last", r["clocks"].empty() ? json() : r["clocks"].back()},
                       {"roofline_floor_ms", ValueOr(s.detail, "roofline_floor_ms", 0.0)},
                       {"candidate_tflops", ValueOr(s.detail, "candidate_tflops", 0.0)},
                       {"baseline_tflops", ValueOr(s.detail, "baseline_tflops", 0.0)},
                       {"checks", s.detail["checks"].size()},
                       {"counted_launches", CountedLaunchFigures(r)}};
      out["baseline_library"] = s.detail["timing"]["baseline"];
      // Which candidate, measured in this evaluation or cached, and every candidate's time: the
      // choice moved between processes before it was interleaved (docs/measurement.md, "A fair
      // baseline"), and a report that cannot show it cannot show that it holds still.
      out["baseline_choice"] = ValueOr(s.detail["timing"], "baseline_choice", json::object());
    }
    if (s.stage == ptxbench::Stage::kTargetInstructions) {
      out["target"] = {{"families", ValueOr(s.detail, "families", json::array())},
                       {"detail", ValueOr(s.detail, "detail", json::object())}};
    }
    if (s.stage == ptxbench::Stage::kTargetInstructions && s.detail.contains("sass")) {
      out["sass"] = s.detail["sass"];
    }
    if (s.stage == ptxbench::Stage::kCorrectness && s.detail.contains("trials")) {
      json seconds = json::array();
      for (const json& t : s.detail["trials"]) {
        seconds.push_back({{"workload", ValueOr(t, "workload", std::string())},
                           {"seconds", ValueOr(t, "seconds", json::object())}});
      }
      out["trial_seconds"] = seconds;
      // Tolerance figures per output: the worst matched ratio and relative norm over the
      // trials, and whether each declared rule held (the margins of docs/task-authoring.md).
      json tolerance = json::object();
      for (const json& t : s.detail["trials"]) {
        if (!t.contains("compare") || !t["compare"].contains("tensors")) continue;
        for (const auto& [name, c] : t["compare"]["tensors"].items()) {
          json& row = tolerance[name];
          const double ratio = ValueOr(c, "matched_ratio", 1.0);
          const double norm =
              c["relative_norm"].is_number() ? c["relative_norm"].get<double>() : 1e30;
          row["min_matched_ratio"] = std::min(ValueOr(row, "min_matched_ratio", 1.0), ratio);
          row["max_relative_norm"] = std::max(ValueOr(row, "max_relative_norm", 0.0), norm);
          row["max_abs_error"] =
              std::max(ValueOr(row, "max_abs_error", 0.0), ValueOr(c, "max_abs_error", 0.0));
          if (c.contains("rules")) row["rules"] = c["rules"];
          // The block rule's worst block over the trials (its headroom on the H200).
          if (c.contains("block_rows") && ValueOr(c, "block_rows", int64_t{0}) > 0) {
            const double block = c["worst_block_relative_norm"].is_number()
                                     ? c["worst_block_relative_norm"].get<double>()
                                     : 1e30;
            if (block >= ValueOr(row, "max_block_relative_norm", -1.0)) {
              row["max_block_relative_norm"] = block;
              row["worst_block"] = ValueOr(c, "worst_block", int64_t{-1});
              row["worst_block_workload"] = ValueOr(t, "workload", std::string());
            }
          }
          // The fp64 reference rule: the output's worst figure against the fp64 backward, and
          // the library's own on the same inputs (both over the correctness trials).
          if (c.contains("fp64_reference") && c["fp64_reference"].is_object()) {
            const json& f = c["fp64_reference"];
            const double fp64 =
                f["relative_norm"].is_number() ? f["relative_norm"].get<double>() : 1e30;
            if (fp64 >= ValueOr(row, "max_fp64_relative_norm", -1.0)) {
              row["max_fp64_relative_norm"] = fp64;
              row["fp64_workload"] = ValueOr(t, "workload", std::string());
            }
            const double library = ValueOr(f, "library_relative_norm", -1.0);
            if (library >= 0) {
              row["max_library_fp64_relative_norm"] =
                  std::max(ValueOr(row, "max_library_fp64_relative_norm", 0.0), library);
            }
            if (ValueOr(f, "checked", false)) {
              row["fp64_bound"] = ValueOr(f, "max_relative_norm", 0.0);
            }
          }
        }
      }
      out["tolerance_figures"] = tolerance;
    }
    if (s.stage == ptxbench::Stage::kTiming && s.detail.contains("timing")) {
      out["timing_process_seconds"] = {
          {"setup", ValueOr(s.detail["timing"], "setup_seconds", 0.0)},
          {"checks", ValueOr(s.detail["timing"], "check_seconds", 0.0)},
          {"total", ValueOr(s.detail["timing"], "seconds", 0.0)}};
    }
    if (s.stage == ptxbench::Stage::kCorrectness && !s.ok && s.detail.contains("trials")) {
      out["failing_trials"] = s.detail["trials"];
    }
    if (s.detail.contains("compute_sanitizer"))
      out["compute_sanitizer"] = s.detail["compute_sanitizer"];
  }
  return out;
}

// The reference solution with a trivial kernel added in front, as a two-launch plan.
std::string TwoKernelSource(const std::string& source) {
  return source +
         "\nextern \"C\" __global__ void ptxbench_test_prologue(int* scratch) {\n"
         "  if (threadIdx.x == 0 && blockIdx.x == 0) scratch[0] = 1;\n}\n";
}

std::string TwoKernelPlan(const std::string& source) {
  // The solution's own plan block, with the prologue launch prepended.
  size_t begin = source.find("PTXBENCH_PLAN");
  size_t end = source.find("*/", begin);
  json plan = json::parse(source.substr(begin + 13, end - begin - 13));
  json prologue = {{"kernel", "ptxbench_test_prologue"},
                   {"grid", {"1"}},
                   {"block", {"32"}},
                   {"cluster", json::array()},
                   {"dynamic_shared_bytes", "0"},
                   {"args", {{{"scratch", "flag"}}}}};
  plan["launches"].insert(plan["launches"].begin(), prologue);
  plan["scratch"].push_back({{"name", "flag"}, {"bytes", "256"}});
  return plan.dump();
}

}  // namespace

int main(int argc, char** argv) {
  std::string tasks_dir = "tasks", task_id = "gemm_n7168_k5120", out_path = "gpu-report.json";
  std::vector<std::string> only_tasks;  // --task; empty: every task.
  std::string only_path;                // --only-path: validate only sources with this path.
  std::vector<std::string> skip_paths;  // --skip-path: sources whose "task/path" contains this are
                                        // listed as skipped (a call that must save GPU time).
  std::string evaluator;
  int repeat = 5;
  bool skip_validation = false;
  // --counter-session / --gap-pad-max-us: the timing loop's counter options (protocol_messages.h
  // TimingLoopOptions), to measure a policy on the GPU before it becomes the default.
  std::string counter_session;
  double gap_pad_max_us = -1;
  double deadline_seconds = 0;  // --deadline-seconds; 0: none.
  std::string resume_path;      // --resume: an earlier part's report.
  const double started = Now();
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--tasks-dir")
      tasks_dir = next();
    else if (a == "--task")
      only_tasks.push_back(next());
    else if (a == "--extras-task")
      task_id = next();
    else if (a == "--out")
      out_path = next();
    else if (a == "--repeat")
      repeat = std::atoi(next().c_str());
    else if (a == "--evaluator")
      evaluator = next();
    else if (a == "--only-path")
      only_path = next();
    else if (a == "--skip-path")
      skip_paths.push_back(next());
    else if (a == "--skip-validation")
      skip_validation = true;
    else if (a == "--counter-session")
      counter_session = next();
    else if (a == "--gap-pad-max-us")
      gap_pad_max_us = std::atof(next().c_str());
    else if (a == "--deadline-seconds")
      deadline_seconds = std::atof(next().c_str());
    else if (a == "--resume")
      resume_path = next();
    else {
      std::cerr << "unknown flag " << a << "\n";
      return 2;
    }
  }
  auto catalog = ptxbench::TaskCatalog::Load(tasks_dir);
  if (!catalog.ok()) {
    std::cerr << catalog.status().message() << "\n";
    return 2;
  }
  // What an earlier part already measured: "task/path" of every evaluated source, and whether
  // its extras ran.
  std::set<std::string> done_in_part;
  bool extras_in_part = false;
  if (!resume_path.empty()) {
    absl::StatusOr<std::string> text =
        ptxbench::ReadFileToString(resume_path, "--resume", {.max_bytes = size_t{1} << 30});
    if (!text.ok()) {
      std::cerr << text.status().message() << "\n";
      return 2;
    }
    json part;
    try {
      part = json::parse(*text);
    } catch (const json::exception& e) {
      std::cerr << "--resume " << resume_path << ": not a gpu-report JSON (" << e.what() << ")\n";
      return 2;
    }
    if (part.contains("gpu_report")) part = part["gpu_report"];  // A gpu-test report.
    for (const json& row : ValueOr(part, "validation", json::array())) {
      if (row.contains("verdict") || row.contains("error")) {
        done_in_part.insert(ValueOr(row, "task", std::string()) + "/" +
                            ValueOr(row, "path", std::string()));
      }
    }
    extras_in_part = part.contains("stability");
    std::cout << "resuming " << resume_path << ": " << done_in_part.size()
              << " sources evaluated there" << (extras_in_part ? ", and the extras" : "") << "\n";
  }
  auto past_deadline = [&] { return deadline_seconds > 0 && Now() - started > deadline_seconds; };
  for (const std::string& id : only_tasks) {
    if (catalog->Find(id) == nullptr) {
      std::cerr << "no task " << id << " under " << tasks_dir << "\n";
      return 2;
    }
  }
  const bool extras = task_id != "none" && !task_id.empty();
  const ptxbench::Task* task = extras ? catalog->Find(task_id) : nullptr;
  if (extras && task == nullptr) {
    std::cerr << "no task " << task_id << " under " << tasks_dir << " for the extras\n";
    return 2;
  }
  ptxbench::engine::EngineOptions options;
  options.evaluator_path = evaluator;
  options.trial_timeout_seconds = 20;  // The hang decoy need not take a minute here.
  if (!counter_session.empty()) {
    auto session = ptxbench::gpu::EnumFromName<ptxbench::gpu::CounterSession>(counter_session);
    if (!session.has_value()) {
      std::cerr
          << "--counter-session: '" << counter_session
          << "' is not one of per_collection, per_configuration, per_configuration_started_early\n";
      return 2;
    }
    options.timing.counter_session = *session;
  }
  if (gap_pad_max_us >= 0) options.timing.gap_pad_max_us = gap_pad_max_us;
  json report = {
      {"task", extras ? json(task_id) : json()},
      {"counter_session", std::string(ptxbench::gpu::NameOf(options.timing.counter_session))},
      {"gap_pad_max_us", options.timing.gap_pad_max_us},
      {"task_version_hash", extras ? json(task->version_hash) : json()}};
  auto health = ptxbench::engine::HealthProbe(options);
  report["health"] = health.ok() ? *health : json(std::string(health.status().message()));
  bool all_ok = health.ok();

  auto evaluate_task = [&](const ptxbench::Task& on, const std::string& arch,
                           const std::string& source,
                           const std::string& plan) -> std::pair<absl::StatusOr<Verdict>, double> {
    ptxbench::engine::EvaluationRequest r;
    r.task = &on;
    r.arch = arch;
    r.source = source;
    r.launch_plan_json = plan;
    double t0 = Now();
    auto v = ptxbench::engine::Evaluate(r, options, nullptr);
    return {std::move(v), Now() - t0};
  };
  auto evaluate = [&](const std::string& arch, const std::string& source, const std::string& plan) {
    return evaluate_task(*task, arch, source, plan);
  };

  // 1. Task validation, every task (rows of all tasks also flattened into "validation").
  json validation = json::array();
  json per_task = json::array();
  int not_reached = 0;
  auto write_report = [&](bool final_write) {
    report["validation"] = validation;
    report["tasks"] = per_task;
    report["not_reached"] = not_reached;
    report["finished"] = final_write;
    report["complete"] = final_write && not_reached == 0 && done_in_part.empty() &&
                         only_tasks.empty() && skip_paths.empty() && only_path.empty() &&
                         !skip_validation;
    report["all_expectations_met"] = all_ok;
    std::ofstream(out_path) << report.dump(2) << "\n";
  };
  if (!skip_validation) {
    for (const ptxbench::Task& t : catalog->tasks()) {
      if (!only_tasks.empty() &&
          std::find(only_tasks.begin(), only_tasks.end(), t.id) == only_tasks.end()) {
        continue;
      }
      std::vector<ptxbench::SourceRef> refs = t.solutions;
      refs.insert(refs.end(), t.decoys.begin(), t.decoys.end());
      bool task_ok = true;
      json rows = json::array();
      for (const ptxbench::SourceRef& ref : refs) {
        if (!only_path.empty() && ref.path != only_path) continue;
        const std::string named = t.id + "/" + ref.path;  // What --skip-path words match.
        if (std::any_of(skip_paths.begin(), skip_paths.end(),
                        [&](const std::string& p) { return named.find(p) != std::string::npos; })) {
          std::cout << t.id << " " << ref.path << ": skipped (--skip-path)\n" << std::flush;
          rows.push_back({{"task", t.id}, {"path", ref.path}, {"skipped", true}});
          continue;
        }
        if (done_in_part.count(named) > 0) {
          rows.push_back(
              {{"task", t.id}, {"path", ref.path}, {"skipped", true}, {"in_part", resume_path}});
          continue;
        }
        if (past_deadline()) {
          std::cout << t.id << " " << ref.path << ": not reached (--deadline-seconds)\n"
                    << std::flush;
          rows.push_back({{"task", t.id}, {"path", ref.path}, {"not_reached", true}});
          ++not_reached;
          continue;
        }
        auto [v, seconds] =
            evaluate_task(t, ref.arch, ptxbench::ReadFileOrEmpty(t.dir + "/" + ref.path), "");
        json row = {{"task", t.id}, {"path", ref.path}, {"arch", ref.arch}, {"expect", ref.expect}};
        if (!v.ok()) {
          row["error"] = std::string(v.status().message());
          row["match"] = false;
        } else {
          row.update(Summarize(*v, seconds));
          row["match"] = ptxbench::VerdictClassName(v->verdict_class) == ref.expect;
        }
        task_ok = task_ok && row["match"].get<bool>();
        std::cout << absl::StrFormat("%-26s %-45s expect %-20s got %-20s %6.1f s %s\n", t.id,
                                     ref.path, ref.expect,
                                     row.value("verdict", std::string("ERROR")), seconds,
                                     row["match"].get<bool>() ? "ok" : "MISMATCH")
                  << std::flush;
        if (v.ok()) {
          // The figures the lead's GPU run must show for every source (issue 11).
          const ptxbench::TargetWork& w = v->target_work;
          std::cout << absl::StrFormat(
                           "    strong check %s: share of task %.4g (min %.3g), of executed %.4g "
                           "(min %.3g), path %s; watchdogs timing %.1f s, instrument %.1f s%s\n",
                           ptxbench::StrongCheckName(w.strong_check), w.share_of_task,
                           w.min_share_of_task, w.share_of_executed, w.min_share_of_executed,
                           !w.path_checked ? "not checked" : (w.path_agrees ? "agrees" : "DIFFERS"),
                           ValueOr(row["watchdogs"], "timing_seconds", 0.0),
                           ValueOr(row["watchdogs"], "instrument_seconds", 0.0),
                           w.reason.empty() ? "" : absl::StrCat(" (", w.reason.substr(0, 160), ")"))
                    << std::flush;
          if (row.contains("tolerance_figures")) {
            for (const auto& [name, f] : row["tolerance_figures"].items()) {
              std::cout << absl::StrFormat("    %s: min matched ratio %.6f, max relative norm %.3g",
                                           name, ValueOr(f, "min_matched_ratio", 1.0),
                                           ValueOr(f, "max_relative_norm", 0.0));
              if (f.contains("max_block_relative_norm")) {
                std::cout << absl::StrFormat(", worst block %.3g (block %d of %s)",
                                             ValueOr(f, "max_block_relative_norm", 0.0),
                                             ValueOr(f, "worst_block", int64_t{-1}),
                                             ValueOr(f, "worst_block_workload", std::string()));
              }
              std::cout << "\n";
            }
          }
        }
        rows.push_back(row);
        validation.push_back(row);
        write_report(false);  // A call killed at its limit keeps every source measured so far.
      }
      if (refs.empty()) std::cout << t.id << ": no solutions or decoys yet\n" << std::flush;
      all_ok = all_ok && task_ok;
      per_task.push_back({{"task", t.id},
                          {"task_version_hash", t.version_hash},
                          {"sources", refs.size()},
                          {"all_match", task_ok},
                          {"validation", rows}});
    }
  }
  if (extras && (extras_in_part || past_deadline())) {
    // The extras ran in an earlier part, or there is no time left for them in this one.
    report[extras_in_part ? "extras_in_part" : "extras_not_reached"] = true;
    if (!extras_in_part) ++not_reached;
    write_report(true);
    std::cout << "extras " << (extras_in_part ? "in the earlier part" : "not reached")
              << "; report written to " << out_path
              << "; all expectations met: " << (all_ok ? "yes" : "NO") << "\n";
    return all_ok ? 0 : 1;
  }
  if (!extras) {
    write_report(true);
    std::cout << "report written to " << out_path
              << "; all expectations met: " << (all_ok ? "yes" : "NO") << "\n";
    return all_ok ? 0 : 1;
  }

  const ptxbench::SourceRef* main_solution = nullptr;
  for (const ptxbench::SourceRef& s : task->solutions) {
    if (s.arch == "sm_90a" && s.expect == "pass" && !main_solution) main_solution = &s;
  }
  if (main_solution == nullptr) {
    std::cerr << "no sm_90a solution expected to pass\n";
    return 2;
  }
  std::string source = ptxbench::ReadFileOrEmpty(task->dir + "/" + main_solution->path);

  // 2. Two-kernel plan.
  {
    auto [v, seconds] = evaluate("sm_90a", TwoKernelSource(source), TwoKernelPlan(source));
    json row = {{"what", "reference solution behind a trivial first kernel (2-launch plan)"},
                {"expect", "pass"}};
    if (!v.ok()) {
      row["error"] = std::string(v.status().message());
      row["match"] = false;
    } else {
      row.update(Summarize(*v, seconds));
      row["match"] = v->verdict_class == ptxbench::VerdictClass::kPass;
    }
    all_ok = all_ok && row["match"].get<bool>();
    std::cout << "two-kernel plan: " << row.value("verdict", std::string("ERROR")) << " "
              << row.value("error", std::string()) << "\n";
    report["two_kernel_plan"] = row;
  }

  // 2b. Local mode, as `ptxbench eval` runs it (table output, exit code 0 only for a pass).
  {
    std::ostringstream out, err;
    double t0 = Now();
    int rc = ptxbench::client::EvalCommand(
        {"--task", task_id, "--tasks-dir", tasks_dir, task->dir + "/" + main_solution->path}, out,
        err);
    report["local_mode"] = {
        {"command", "ptxbench eval --task " + task_id + " --arch sm_90a " + main_solution->path},
        {"exit_code", rc},
        {"seconds", Now() - t0},
        {"stdout", out.str()}};
    all_ok = all_ok && rc == 0;
    std::cout << "local mode (ptxbench eval): exit " << rc << "\n" << out.str() << std::flush;
  }

  // 2c. Two evaluations pipelined through one GPU gate.
  {
    ptxbench::engine::EngineOptions gated = options;
    gated.gpu_gate = std::make_shared<ptxbench::engine::GpuGate>();
    ptxbench::engine::EvaluationRequest r;
    r.task = task;
    r.arch = "sm_90a";
    r.source = source;
    std::promise<void> first_at_target;
    bool signalled = false;
    absl::StatusOr<Verdict> first = absl::UnknownError("not run");
    absl::StatusOr<Verdict> second = absl::UnknownError("not run");
    std::thread a([&] {
      first = ptxbench::engine::Evaluate(r, gated, [&](const ptxbench::StageReport& stage) {
        // The correctness stage's report: the target stage and the timing come next.
        if (stage.stage == ptxbench::Stage::kCorrectness && !signalled) {
          signalled = true;
          first_at_target.set_value();
        }
      });
      if (!signalled) first_at_target.set_value();  // Ended early: let the second go.
    });
    first_at_target.get_future().wait();
    ptxbench::engine::EvaluationRequest r2 = r;
    r2.source = source + "\n// the second of a pipelined pair\n";
    std::thread b([&] { second = ptxbench::engine::Evaluate(r2, gated, nullptr); });
    a.join();
    b.join();
    json pair = json::array();
    bool pair_ok = true;
    for (const absl::StatusOr<Verdict>* v : {&first, &second}) {
      if (!v->ok()) {
        pair.push_back({{"error", std::string(v->status().message())}});
        pair_ok = false;
        continue;
      }
      json row = Summarize(**v, 0);
      row["gpu_gate"] = ValueOr((*v)->report, "gpu_gate", json());
      pair.push_back(row);
      pair_ok = pair_ok && (*v)->verdict_class == ptxbench::VerdictClass::kPass &&
                (*v)->target_work.strong_check == ptxbench::StrongCheck::kMade;
    }
    report["pipelined_pair"] = {{"what",
                                 "two evaluations through one GPU gate, the second "
                                 "started when the first reached its target stage"},
                                {"expect", "both pass with the strong check made"},
                                {"match", pair_ok},
                                {"evaluations", pair}};
    all_ok = all_ok && pair_ok;
    std::cout << "pipelined pair through one GPU gate: " << (pair_ok ? "both pass, strong" : "NO")
              << "\n"
              << std::flush;
  }

  // 3. Stability over separate evaluations.
  json runs = json::array();
  std::vector<double> speedups, candidate_ms, baseline_ms;
  for (int i = 0; i < repeat; ++i) {
    auto [v, seconds] = evaluate("sm_90a", source, "");
    if (!v.ok()) {
      runs.push_back({{"error", std::string(v.status().message())}});
      all_ok = false;
      continue;
    }
    json row = Summarize(*v, seconds);
    runs.push_back(row);
    if (v->verdict_class != ptxbench::VerdictClass::kPass) all_ok = false;
    if (row.contains("timing")) {
      speedups.push_back(v->speedup);
      candidate_ms.push_back(row["timing"]["candidate"]["median_ms"].get<double>());
      baseline_ms.push_back(row["timing"]["baseline"]["median_ms"].get<double>());
    }
    std::cout << absl::StrFormat(
                     "repeat %d: %s speedup %.4f candidate %.4f ms baseline %.4f ms "
                     "(%.1f s)\n",
                     i, ptxbench::VerdictClassName(v->verdict_class), v->speedup,
                     candidate_ms.empty() ? 0 : candidate_ms.back(),
                     baseline_ms.empty() ? 0 : baseline_ms.back(), seconds)
              << std::flush;
  }
  auto spread = [](const std::vector<double>& v) -> json {
    if (v.empty()) return json();
    double lo = *std::min_element(v.begin(), v.end()), hi = *std::max_element(v.begin(), v.end());
    return {{"min", lo}, {"max", hi}, {"max_over_min", hi / lo}, {"values", v}};
  };
  report["stability"] = {{"evaluations", repeat},
                         {"speedup", spread(speedups)},
                         {"candidate_median_ms", spread(candidate_ms)},
                         {"baseline_median_ms", spread(baseline_ms)},
                         {"runs", runs}};
  if (!speedups.empty()) {
    double ratio = report["stability"]["speedup"]["max_over_min"].get<double>();
    report["stability"]["speedup_target_met"] = ratio <= 1.02;
  }
  write_report(true);
  std::cout << "report written to " << out_path
            << "; all expectations met: " << (all_ok ? "yes" : "NO") << "\n";
  return all_ok ? 0 : 1;
}
