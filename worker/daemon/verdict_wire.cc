#include "worker/daemon/verdict_wire.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace ptxbench::worker {
namespace {

v1::VerdictClass WireClass(VerdictClass verdict_class) {
  v1::VerdictClass out = v1::VERDICT_CLASS_UNSPECIFIED;
  // The text names are the enum names without prefix, lower-cased; parse them back rather
  // than keep a second table that could drift from the proto.
  v1::VerdictClass_Parse(
      absl::StrCat("VERDICT_CLASS_", absl::AsciiStrToUpper(VerdictClassName(verdict_class))), &out);
  return out;
}

v1::Stage WireStage(Stage stage) {
  v1::Stage out = v1::STAGE_UNSPECIFIED;
  v1::Stage_Parse(absl::StrCat("STAGE_", absl::AsciiStrToUpper(StageName(stage))), &out);
  return out;
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
  out.set_speedup(verdict.speedup);
  out.set_message(verdict.message);
  out.set_runtime_unverified(verdict.runtime_unverified);
  for (const StageReport& stage : verdict.stages) *out.add_stages() = ToWire(stage);
  out.set_report_json(verdict.report.is_null() ? "{}" : verdict.report.dump());
  const absl::Time now = absl::Now();
  out.mutable_finished_at()->set_seconds(absl::ToUnixSeconds(now));
  return out;
}

}  // namespace ptxbench::worker
