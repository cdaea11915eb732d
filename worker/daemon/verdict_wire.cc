#include "worker/daemon/verdict_wire.h"

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "proto/wire_names.h"

namespace ptxbench::worker {
namespace {

// The engine's names (common/verdict.h) and the wire's (proto/wire_names.h) are the same
// text; a name either side does not know maps to UNSPECIFIED, which the server refuses.
v1::VerdictClass WireClass(VerdictClass verdict_class) {
  return wire::ParseVerdictClass(VerdictClassName(verdict_class))
      .value_or(v1::VERDICT_CLASS_UNSPECIFIED);
}

v1::Stage WireStage(Stage stage) {
  return wire::ParseStage(StageName(stage)).value_or(v1::STAGE_UNSPECIFIED);
}

v1::StrongCheck WireStrongCheck(StrongCheck state) {
  switch (state) {
    case StrongCheck::kMade:
      return v1::STRONG_CHECK_MADE;
    case StrongCheck::kNotMade:
      return v1::STRONG_CHECK_NOT_MADE;
    case StrongCheck::kNotReached:
      return v1::STRONG_CHECK_NOT_REACHED;
  }
  return v1::STRONG_CHECK_UNSPECIFIED;
}

}  // namespace

v1::StageResult ToWire(const StageReport& report) {
  v1::StageResult out;
  out.set_stage(WireStage(report.stage));
  out.set_ok(report.ok);
  out.set_summary(report.summary);
  out.set_detail_json(report.detail.is_null() ? "{}" : report.detail.dump());
  out.set_seconds(report.seconds);
  return out;
}

v1::Verdict ToWire(const Verdict& verdict) {
  v1::Verdict out;
  out.set_verdict_class(WireClass(verdict.verdict_class));
  out.set_compiled(verdict.compiled);
  out.set_correct(verdict.correct);
  out.set_target_executed(verdict.target_executed);
  out.set_tic(verdict.tic);
  out.set_tic_paper(verdict.tic_paper);
  const TargetWork& work = verdict.target_work;
  v1::TargetWork* wire_work = out.mutable_target_work();
  wire_work->set_strong_check(WireStrongCheck(work.strong_check));
  wire_work->set_reason(work.reason);
  wire_work->set_share_of_task(work.share_of_task);
  wire_work->set_share_of_executed(work.share_of_executed);
  wire_work->set_min_share_of_task(work.min_share_of_task);
  wire_work->set_min_share_of_executed(work.min_share_of_executed);
  wire_work->set_other_work_over_task(work.other_work_over_task);
  wire_work->set_max_other_work_over_task(work.max_other_work_over_task);
  wire_work->set_path_checked(work.path_checked);
  wire_work->set_path_agrees(work.path_agrees);
  wire_work->set_figures_json(work.figures.is_null() ? "{}" : work.figures.dump());
  out.mutable_harness()->set_engine(verdict.harness.engine);
  out.mutable_harness()->set_task_hash(verdict.harness.task_hash);
  if (verdict.sampling.has_value()) {
    const Sampling& s = *verdict.sampling;
    v1::Sampling* wire_sampling = out.mutable_sampling();
    wire_sampling->set_stop_reason(s.stop_reason);
    wire_sampling->set_converged(s.converged);
    wire_sampling->set_speedup_stable(s.speedup_stable);
    wire_sampling->set_candidate_scatter(s.candidate_scatter);
    wire_sampling->set_baseline_scatter(s.baseline_scatter);
    wire_sampling->set_note(s.note);
  }
  out.set_speedup(verdict.speedup);
  out.set_message(verdict.message);
  out.set_runtime_unverified(verdict.runtime_unverified);
  for (const StageReport& stage : verdict.stages) *out.add_stages() = ToWire(stage);
  out.set_report_json(verdict.report.is_null() ? "{}" : verdict.report.dump());
  // To the nanosecond: the service benchmark (bench/service_bench.cc) takes each job's cadence
  // from successive verdicts' finished_at, and whole seconds made a 0.25 s job read 0 or 1 s.
  const int64_t now_nanos = absl::ToUnixNanos(absl::Now());
  out.mutable_finished_at()->set_seconds(now_nanos / 1000000000);
  out.mutable_finished_at()->set_nanos(static_cast<int32_t>(now_nanos % 1000000000));
  return out;
}

}  // namespace ptxbench::worker
