// Plans, sources and PTX come from untrusted models: every parser must answer with a value or an
// error for any input, never crash, hang or recurse without bound.
#include <catch2/catch.hpp>
#include <random>
#include <string>

#include "common/expr.h"
#include "worker/engine/plan.h"
#include "worker/engine/ptx_scan.h"
#include "worker/engine/ptxas_info.h"
#include "worker/engine/source_guard.h"
#include "worker/engine/source_lexer.h"

namespace ptxbench {
namespace {

// Random text built from the fragments the parsers care about, so that the inputs reach deep
// into their state machines instead of failing at the first byte.
std::string RandomText(std::mt19937& rng, const std::vector<std::string>& fragments, int pieces) {
  std::string text;
  std::uniform_int_distribution<size_t> pick(0, fragments.size() - 1);
  for (int i = 0; i < pieces; ++i) text += fragments[pick(rng)];
  return text;
}

TEST_CASE("Random plans, sources, PTX and expressions get an answer") {
  std::mt19937 rng(20261130);
  const std::vector<std::string> json_fragments = {"{",
                                                   "}",
                                                   "[",
                                                   "]",
                                                   ",",
                                                   ":",
                                                   "\"launches\"",
                                                   "\"kernel\"",
                                                   "\"grid\"",
                                                   "\"block\"",
                                                   "\"args\"",
                                                   "\"tensor\"",
                                                   "\"scratch\"",
                                                   "\"tensor_maps\"",
                                                   "\"box\"",
                                                   "\"dims\"",
                                                   "1",
                                                   "-5",
                                                   "1e9",
                                                   "\"M\"",
                                                   "\"ceil_div(M,\"",
                                                   "null",
                                                   "true",
                                                   "\"\\u0000\"",
                                                   " ",
                                                   "\n"};
  const std::vector<std::string> source_fragments = {"/*",
                                                     "*/",
                                                     "//",
                                                     "\n",
                                                     "\\\n",
                                                     "\"",
                                                     "'",
                                                     "R\"x(",
                                                     ")x\"",
                                                     "#",
                                                     "%:",
                                                     "include",
                                                     " <a.h>",
                                                     " \"ptxbench_test.cuh\"",
                                                     "PTXBENCH_PLAN",
                                                     "{\"launches\": []}",
                                                     "__has_include",
                                                     "x",
                                                     " "};
  const std::vector<std::string> ptx_fragments = {".entry",
                                                  ".func",
                                                  ".visible",
                                                  " k(",
                                                  ")",
                                                  "{",
                                                  "}",
                                                  ";",
                                                  ".param .u64 p",
                                                  ",",
                                                  ".maxntid 1,1,1",
                                                  "@%p1",
                                                  "$L:",
                                                  "wgmma.mma_async.sync",
                                                  "{%f1,%f2}",
                                                  "\"s\"",
                                                  "//",
                                                  "/*",
                                                  "*/",
                                                  "\n",
                                                  ".target sm_90a"};
  const std::vector<std::string> expr_fragments = {
      "M", "1", "(", ")",         "+",    "-",    "*",
      "/", "%", ",", "ceil_div(", "min(", "max(", "9223372036854775807",
      " "};
  const std::map<std::string, int64_t> axes = {{"M", 3}};
  for (int i = 0; i < 3000; ++i) {
    const std::string json = RandomText(rng, json_fragments, 1 + i % 40);
    PlanOr<LaunchPlan> plan = ParseLaunchPlanJson(json);
    CHECK((plan.ok() || !plan.error().ToString().empty()));

    const std::string source = RandomText(rng, source_fragments, 1 + i % 60);
    PlanOr<std::optional<LaunchPlan>> block = ExtractPlanFromSource(source);
    CHECK((block.ok() || !block.error().ToString().empty()));
    const auto refusal = CheckIncludes(source, "submission.cu", {{"ptxbench_test.cuh", ""}});
    CHECK((!refusal.has_value() || !refusal->empty()));

    const PtxScan scan = ScanPtx(RandomText(rng, ptx_fragments, 1 + i % 80));
    CHECK(scan.kernels.size() <= 80);
    const PtxasInfo info = ParsePtxasInfo(RandomText(rng, source_fragments, 1 + i % 30));
    CHECK(info.diagnostics.size() <= 30);

    auto value = EvalIntExpr(RandomText(rng, expr_fragments, 1 + i % 30), axes);
    CHECK((value.ok() || !value.status().message().empty()));
  }
}

TEST_CASE("Deep nesting is bounded") {
  const std::string deep_json = std::string(100000, '[') + std::string(100000, ']');
  PlanOr<LaunchPlan> plan = ParseLaunchPlanJson(deep_json);
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.error().ToString() == "[0][0][0][0][0][0][0][0]: nested deeper than 8 levels");

  const std::string deep_block = "/* PTXBENCH_PLAN " + std::string(100000, '{') + " */";
  PlanOr<std::optional<LaunchPlan>> block = ExtractPlanFromSource(deep_block);
  REQUIRE_FALSE(block.ok());

  const std::string deep_expr = std::string(100000, '(');
  CHECK_FALSE(EvalIntExpr(deep_expr, {}).ok());
  const std::string deep_ptx =
      ".visible .entry k() " + std::string(100000, '{') + std::string(100000, '}');
  CHECK(ScanPtx(deep_ptx).kernels.size() == 1);
}

}  // namespace
}  // namespace ptxbench
