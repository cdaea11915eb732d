// The wire <-> store conversions of server/api/convert.h and the UTF-8 check of validate.h,
// without a server: every enum name round-trips, a verdict survives the store unchanged, and
// every stored event shape becomes the right wire event.
#include "server/api/convert.h"

#include <catch2/catch.hpp>
#include <string>

#include "google/protobuf/util/message_differencer.h"
#include "server/api/validate.h"

namespace ptxbench::api {
namespace {

TEST_CASE("every enum value has a stored name that parses back", "[api][convert]") {
  for (int v = 1; v <= 2; ++v) {
    CHECK(ParseArch(ArchName(static_cast<v1::Arch>(v))).value() == v);
  }
  for (int v = 1; v <= 6; ++v) {
    CHECK(ParseStage(StageName(static_cast<v1::Stage>(v))).value() == v);
  }
  for (int v = 1; v <= 12; ++v) {
    const auto verdict_class = static_cast<v1::VerdictClass>(v);
    CHECK(ParseVerdictClass(VerdictClassName(verdict_class)).value() == verdict_class);
  }
  for (int v = 1; v <= 3; ++v) {
    CHECK(ParseKnowledgeLevel(KnowledgeLevelName(static_cast<v1::KnowledgeLevel>(v))).value() == v);
  }
  CHECK(ArchName(v1::ARCH_SM_100A) == "sm_100a");
  CHECK(VerdictClassName(v1::VERDICT_CLASS_TARGET_NOT_EXECUTED) == "target_not_executed");
  // Unspecified values take the documented defaults (types.proto) or no name.
  CHECK(ScopeName(v1::EVALUATION_SCOPE_UNSPECIFIED) == "full");
  CHECK(LanguageName(v1::SOURCE_LANGUAGE_UNSPECIFIED) == "cuda");
  CHECK(ArchName(v1::ARCH_UNSPECIFIED).empty());
  CHECK(absl::IsInvalidArgument(ParseArch("sm_80").status()));
}

TEST_CASE("a verdict survives the store byte for byte", "[api][convert]") {
  v1::Verdict verdict;
  verdict.set_verdict_class(v1::VERDICT_CLASS_PASS);
  verdict.set_compiled(true);
  verdict.set_correct(true);
  verdict.set_target_executed(true);
  verdict.set_tic(true);
  verdict.set_speedup(1.375);
  verdict.set_message("all 4 workloads within tolerance");
  verdict.set_report_json(R"({"gpu":"NVIDIA H200","seeds":[1,2,3]})");
  auto* stage = verdict.add_stages();
  stage->set_stage(v1::STAGE_TIMING);
  stage->set_ok(true);
  stage->set_summary("0.91 ms vs 1.25 ms");
  stage->set_seconds(3.5);
  *verdict.mutable_finished_at() = ToTimestamp(absl::FromUnixMillis(1796000000123));

  auto row = VerdictToRow(verdict);
  REQUIRE(row.ok());
  CHECK(row->verdict_class == v1::VERDICT_CLASS_PASS);
  CHECK(row->tic);
  CHECK(row->speedup == 1.375);
  // Proto field names in the stored JSON, as reports and SQL read them.
  CHECK(row->verdict_json.find("\"verdict_class\":\"VERDICT_CLASS_PASS\"") != std::string::npos);
  CHECK(row->verdict_json.find("\"report_json\"") != std::string::npos);
  auto back = VerdictFromRow(*row);
  REQUIRE(back.ok());
  CHECK(google::protobuf::util::MessageDifferencer::Equals(*back, verdict));

  // A worker's verdict without a time is stamped when stored.
  verdict.clear_finished_at();
  row = VerdictToRow(verdict);
  REQUIRE(row.ok());
  CHECK(row->finished_at > absl::Now() - absl::Minutes(1));
  // The class is required.
  verdict.set_verdict_class(v1::VERDICT_CLASS_UNSPECIFIED);
  CHECK(absl::IsInvalidArgument(VerdictToRow(verdict).status()));
}

TEST_CASE("stored stage events become wire events", "[api][convert]") {
  store::StageEventRow row;
  row.submission_id = "8e4f3bb4-c743-4083-932c-6fdbeb21d452";
  row.at = absl::FromUnixSeconds(1796000000);

  row.kind = store::EventKind::kStage;
  row.stage = v1::STAGE_QUEUED;
  row.payload_json = "{}";
  auto queued = StageEventFromRow(row);
  REQUIRE(queued.ok());
  CHECK(queued->stage() == v1::STAGE_QUEUED);
  CHECK_FALSE(queued->has_result());
  CHECK(queued->at().seconds() == 1796000000);

  row.stage = v1::STAGE_COMPILE;
  row.payload_json = R"({"stage":"STAGE_COMPILE","ok":true,"summary":"ptxas: 0 spills"})";
  auto compiled = StageEventFromRow(row);
  REQUIRE(compiled.ok());
  CHECK(compiled->result().ok());
  CHECK(compiled->result().summary() == "ptxas: 0 spills");

  row.stage = v1::STAGE_DONE;
  row.payload_json = R"({"verdict_class":"VERDICT_CLASS_WRONG_RESULT","message":"C[3][5]"})";
  auto done = StageEventFromRow(row);
  REQUIRE(done.ok());
  CHECK(done->verdict().verdict_class() == v1::VERDICT_CLASS_WRONG_RESULT);
  CHECK(done->verdict().message() == "C[3][5]");

  row.kind = store::EventKind::kNotice;
  row.stage = v1::STAGE_QUEUED;
  row.payload_json = NoticePayload("no registered worker for sm_100a; waiting");
  auto notice = StageEventFromRow(row);
  REQUIRE(notice.ok());
  CHECK(notice->notice() == "no registered worker for sm_100a; waiting");
  CHECK_FALSE(notice->has_verdict());

  // A stored payload that is not the stage's message is data loss, not a crash.
  row.kind = store::EventKind::kStage;
  row.stage = v1::STAGE_DONE;
  row.payload_json = R"({"verdict_class": 42.5})";
  CHECK(absl::IsDataLoss(StageEventFromRow(row).status()));
}

TEST_CASE("FindInvalidUtf8 follows RFC 3629", "[api][validate]") {
  CHECK_FALSE(FindInvalidUtf8("plain ascii").has_value());
  CHECK_FALSE(FindInvalidUtf8("Σ_k A·B → C, 😀").has_value());
  CHECK(FindInvalidUtf8("ab\xff").value() == 2);                 // Not a lead byte.
  CHECK(FindInvalidUtf8("a\xc3").value() == 1);                  // Truncated sequence.
  CHECK(FindInvalidUtf8("\xc0\xaf").value() == 0);               // Overlong '/'.
  CHECK(FindInvalidUtf8("x\xed\xa0\x80").value() == 1);          // UTF-16 surrogate U+D800.
  CHECK(FindInvalidUtf8("\xf4\x90\x80\x80").value() == 0);       // Above U+10FFFF.
  CHECK_FALSE(FindInvalidUtf8("\xf4\x8f\xbf\xbf").has_value());  // U+10FFFF itself.
}

TEST_CASE("a launch plan's shape is checked field by field", "[api][validate]") {
  v1::LaunchPlan plan;
  auto* launch = plan.add_launches();
  launch->set_kernel("k");
  launch->add_grid("1");
  launch->add_block("128");
  launch->add_args()->set_scalar("M");
  CHECK(ValidateLaunchPlan(plan, "launch_plan").ok());
  launch->add_cluster("2");
  launch->add_cluster("1");
  launch->add_cluster("1");
  launch->add_cluster("1");
  auto status = ValidateLaunchPlan(plan, "launch_plan");
  CHECK(status.message() ==
        "launch_plan.launches[0].cluster: has 4 entries; at most 3 are allowed");
  launch->clear_cluster();
  plan.add_scratch()->set_name("tmp");
  plan.mutable_scratch(0)->set_bytes("M*4");
  plan.add_scratch()->set_name("tmp");
  plan.mutable_scratch(1)->set_bytes("8");
  status = ValidateLaunchPlan(plan, "launch_plan");
  CHECK(status.message() == "launch_plan.scratch[1].name: duplicate scratch buffer 'tmp'");
}

}  // namespace
}  // namespace ptxbench::api
