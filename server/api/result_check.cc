#include "server/api/result_check.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/expr.h"
#include "common/status.h"
#include "nlohmann/json.hpp"
#include "proto/wire_names.h"

namespace ptxbench::api {
namespace {

struct Peak {
  double flops_per_second;
  double bytes_per_second;
};

// See result_check.h for the sources.
absl::StatusOr<Peak> FastestGpuOf(v1::Arch arch) {
  switch (arch) {
    case v1::ARCH_SM_90A:
      return Peak{132.0 * 4096 * 1.98e9, 2.0 * 3.2e9 * 768};
    case v1::ARCH_SM_100A:
      return Peak{148.0 * 8192 * 1.965e9, 8.0e12};
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("arch ", arch, " has no peak figures on this server"));
  }
}

// The stages a verdict carries, by stage, with whether each passed.
struct StageSet {
  std::map<v1::Stage, const v1::StageResult*> by_stage;
  bool Has(v1::Stage stage) const { return by_stage.count(stage) > 0; }
  bool Passed(v1::Stage stage) const {
    auto it = by_stage.find(stage);
    return it != by_stage.end() && it->second->ok();
  }
};

absl::Status Refuse(const std::string& why) { return absl::InvalidArgumentError(why); }

std::string ClassName(v1::VerdictClass verdict_class) {
  const std::string name = wire::VerdictClassName(verdict_class);
  return name.empty() ? absl::StrCat(verdict_class) : name;
}

// The medians of the timing stage's report (docs/api.md: detail.timing.result), if there.
struct Medians {
  double candidate_ms = 0;
  double baseline_ms = 0;
};
bool ReadMedians(const v1::StageResult& timing, Medians* medians) {
  const auto detail = nlohmann::json::parse(timing.detail_json(), nullptr, false);
  if (!detail.is_object()) return false;
  const nlohmann::json* result = &detail;
  for (const char* key : {"timing", "result"}) {
    if (!result->is_object() || !result->contains(key)) return false;
    result = &(*result)[key];
  }
  auto median = [&](const char* side, double* out) {
    if (!result->is_object() || !result->contains(side) || !(*result)[side].is_object()) {
      return false;
    }
    const auto& value = (*result)[side].value("median_ms", nlohmann::json());
    if (!value.is_number()) return false;
    *out = value.get<double>();
    return true;
  };
  return median("candidate", &medians->candidate_ms) && median("baseline", &medians->baseline_ms);
}

absl::Status CheckCompileJob(const v1::Verdict& verdict, const StageSet& stages) {
  const v1::VerdictClass verdict_class = verdict.verdict_class();
  if (verdict_class != v1::VERDICT_CLASS_COMPILED &&
      verdict_class != v1::VERDICT_CLASS_COMPILE_ERROR &&
      verdict_class != v1::VERDICT_CLASS_PLAN_INVALID) {
    return Refuse(absl::StrCat("a compile job cannot end with verdict class ",
                               ClassName(verdict_class),
                               ": it runs the compile stage only (compiled, compile_error or "
                               "plan_invalid)"));
  }
  for (const auto& [stage, result] : stages.by_stage) {
    if (stage != v1::STAGE_COMPILE) {
      return Refuse(absl::StrCat("a compile job cannot report a ", wire::StageName(stage),
                                 " stage: it runs the compile stage only"));
    }
  }
  if (verdict.correct() || verdict.target_executed() || verdict.tic()) {
    return Refuse(
        "a compile job cannot report correct, target_executed or tic: they need the GPU "
        "stages");
  }
  if (verdict.speedup() != 0) {
    return Refuse(absl::StrCat("a compile job cannot report a speedup (got ", verdict.speedup(),
                               "): it times nothing"));
  }
  if (!stages.Has(v1::STAGE_COMPILE)) {
    return Refuse(absl::StrCat("verdict class ", ClassName(verdict_class),
                               " needs the compile stage's result"));
  }
  if (verdict_class == v1::VERDICT_CLASS_COMPILED &&
      (!verdict.compiled() || !stages.Passed(v1::STAGE_COMPILE))) {
    return Refuse("verdict class compiled needs compiled and a passed compile stage");
  }
  if (verdict_class == v1::VERDICT_CLASS_COMPILE_ERROR && verdict.compiled()) {
    return Refuse("verdict class compile_error contradicts compiled");
  }
  return absl::OkStatus();
}

absl::Status CheckEvaluateJob(const store::CompletingJob& job, const v1::Verdict& verdict,
                              const StageSet& stages, const Task* task) {
  const v1::VerdictClass verdict_class = verdict.verdict_class();
  const bool pass = verdict_class == v1::VERDICT_CLASS_PASS;
  // tic only with pass; a pass without tic is honest (the strong check not made: the judge's
  // Verdict.target_work says why) and gains a forger nothing.
  if (verdict.tic() && !pass) {
    return Refuse(absl::StrCat("tic with verdict class ", ClassName(verdict_class),
                               ": tic holds only for pass"));
  }
  if (pass) {
    if (!verdict.compiled() || !verdict.correct() || !verdict.target_executed()) {
      return Refuse("verdict class pass needs compiled, correct and target_executed");
    }
    if (verdict.runtime_unverified()) {
      return Refuse("verdict class pass cannot be runtime_unverified: its stages ran");
    }
    for (v1::Stage needed :
         {v1::STAGE_COMPILE, v1::STAGE_CORRECTNESS, v1::STAGE_TARGET_INSTRUCTIONS}) {
      if (!stages.Passed(needed)) {
        return Refuse(
            absl::StrCat("verdict class pass needs a passed ", wire::StageName(needed), " stage"));
      }
    }
  }
  // (target_executed may be true here: the families ran but did too little of the work.)
  if (verdict_class == v1::VERDICT_CLASS_TARGET_NOT_EXECUTED &&
      (!verdict.correct() || !stages.Passed(v1::STAGE_CORRECTNESS) ||
       !stages.Has(v1::STAGE_TARGET_INSTRUCTIONS))) {
    return Refuse(
        "verdict class target_not_executed needs correct, a passed correctness stage and a "
        "target_instructions stage");
  }
  if ((verdict.correct() || verdict.target_executed()) && !stages.Has(v1::STAGE_CORRECTNESS)) {
    return Refuse("correct or target_executed without a correctness stage");
  }
  if (verdict_class == v1::VERDICT_CLASS_IMPOSSIBLE_TIME && !stages.Has(v1::STAGE_TIMING)) {
    return Refuse("verdict class impossible_time needs the timing stage's result");
  }
  if (verdict.speedup() == 0) return absl::OkStatus();
  if (!stages.Has(v1::STAGE_TIMING)) {
    return Refuse(absl::StrCat("a speedup (", verdict.speedup(), ") needs a timing stage"));
  }
  // An impossible time is reported with the speedup it claimed; it fails either way.
  if (verdict_class == v1::VERDICT_CLASS_IMPOSSIBLE_TIME) return absl::OkStatus();
  if (verdict.speedup() > kMaxPlausibleSpeedup) {
    return Refuse(absl::StrCat("speedup ", verdict.speedup(),
                               " is above the physical bound (a kernel at the roofline floor is "
                               "at most ",
                               kMaxPlausibleSpeedup, " x faster than the task's library)"));
  }
  Medians medians;
  if (!ReadMedians(*stages.by_stage.at(v1::STAGE_TIMING), &medians)) {
    return Refuse("a speedup needs the timing stage's candidate and baseline medians");
  }
  if (!(medians.candidate_ms > 0) || !(medians.baseline_ms > 0) ||
      !std::isfinite(medians.candidate_ms) || !std::isfinite(medians.baseline_ms)) {
    return Refuse("the timing stage's medians must be positive numbers of milliseconds");
  }
  const double ratio = medians.baseline_ms / medians.candidate_ms;
  if (std::abs(verdict.speedup() - ratio) > 0.02 * ratio) {
    return Refuse(absl::StrCat(
        "speedup ", verdict.speedup(), " is not the timing stage's baseline / candidate medians (",
        medians.baseline_ms, " / ", medians.candidate_ms, " = ", ratio, ")"));
  }
  if (task != nullptr) {
    ASSIGN_OR_RETURN(double floor_ms, ServerRooflineFloorMs(*task, job.arch));
    if (medians.candidate_ms < floor_ms) {
      return Refuse(absl::StrCat(
          "the timed median ", medians.candidate_ms, " ms is below the roofline floor ", floor_ms,
          " ms of the fastest ", wire::ArchName(job.arch), " GPU, yet the class is ",
          ClassName(verdict_class), " (it would be impossible_time)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<double> ServerRooflineFloorMs(const Task& task, v1::Arch arch) {
  ASSIGN_OR_RETURN(Peak peak, FastestGpuOf(arch));
  const Workload& timed = task.TimedWorkload();
  ASSIGN_OR_RETURN(double flops, EvalRealExpr(task.flops_expr, timed.axes));
  ASSIGN_OR_RETURN(double bytes, EvalRealExpr(task.min_bytes_expr, timed.axes));
  const double flops_per_second = peak.flops_per_second * TensorRateOverBf16(task.OperandType());
  return std::max(flops / flops_per_second, bytes / peak.bytes_per_second) * 1e3;
}

absl::Status CheckResult(const store::CompletingJob& job, const v1::Verdict& verdict,
                         const Task* task) {
  StageSet stages;
  for (int i = 0; i < verdict.stages_size(); ++i) {
    const v1::StageResult& result = verdict.stages(i);
    const v1::Stage stage = result.stage();
    if (stage != v1::STAGE_COMPILE && stage != v1::STAGE_CORRECTNESS &&
        stage != v1::STAGE_TARGET_INSTRUCTIONS && stage != v1::STAGE_TIMING) {
      return Refuse(
          absl::StrCat("verdict.stages[", i, "].stage: ", stage, " is not a stage a worker runs"));
    }
    // A stage reported twice counts by its last report (a retried stage, as the engine
    // would send it); a forger gains nothing from the order.
    stages.by_stage[stage] = &result;
  }
  if (!std::isfinite(verdict.speedup()) || verdict.speedup() < 0) {
    return Refuse(absl::StrCat("speedup ", verdict.speedup(), " is not a number >= 0"));
  }
  switch (job.kind) {
    case v1::JOB_KIND_COMPILE:
      return CheckCompileJob(verdict, stages);
    case v1::JOB_KIND_EVALUATE:
      return CheckEvaluateJob(job, verdict, stages, task);
    default:
      return Refuse(absl::StrCat("job kind ", job.kind, " is not one this server runs"));
  }
}

}  // namespace ptxbench::api
