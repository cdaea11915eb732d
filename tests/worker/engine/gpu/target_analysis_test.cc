// The target-instruction decision from a static SASS map and CUPTI per-PC counts.
#include "worker/engine/gpu/target_analysis.h"

#include <catch2/catch.hpp>

namespace ptxbench::gpu {
namespace {

using json = nlohmann::json;

json Map() {
  return {
      {"available", true},
      {"functions",
       {{"gemm",
         {{"instructions", 100},
          {"sites",
           {{"wgmma",
             {{{"pc", 0x470},
               {"sass", "HGMMA.64x256x16.F32.BF16 R24, gdesc[UR4], R24"},
               {"by", "sass_opcode"}},
              {{"pc", 0x460}, {"sass", "R2UR UR4, R2"}, {"by", "ptx_line"}}}},
            {"tma", {{{"pc", 0x290}, {"sass", "UTMALDG.2D [UR4], [UR8]"}, {"by", "sass_opcode"}}}},
            {"mbarrier",
             {{{"pc", 0x300},
               {"sass", "SYNCS.ARRIVE.TRANS64 RZ, [UR6]"},
               {"by", "ptx_line"}}}}}}}}}}};
}

json Run(const std::string& kernel, const json& records) {
  return {{"kernel", kernel}, {"launch_index", 0}, {"records", records}};
}

TEST_CASE("required families executed with predicate on pass", "[target]") {
  json records = json::array({json::array({"gemm", 0x470, 512, 4096, 512, 0}),
                              json::array({"gemm", 0x290, 8, 8, 0, 8}),
                              json::array({"gemm", 0x300, 8, 8, 0, 0})});
  TargetReport r =
      AnalyzeTargets(Map(), {Run("gemm", records)}, {{"wgmma", 4}, {"tma", 2}}, {"wgmma", "tma"});
  CHECK(r.ok);
  CHECK_FALSE(r.refused);
  bool saw_mbarrier = false;
  for (const FamilyVerdict& f : r.families) {
    if (f.family == "wgmma") {
      CHECK(f.executed);
      CHECK(f.classified_by == "sass_opcode");
      CHECK(f.sass_sites == 1);  // The ptx_line site does not count when opcodes exist.
      CHECK(f.thread_pred_on == 4096);
    }
    if (f.family == "mbarrier") {
      saw_mbarrier = true;
      CHECK_FALSE(f.required);
      CHECK(f.classified_by == "ptx_line");
      CHECK(f.executed);
    }
  }
  CHECK(saw_mbarrier);
  CHECK(r.detail["cupti_gmma_cross_check"]["matching_static_hgmma_sites"] == 1);
}

TEST_CASE("a family issued but never predicate-on fails, and says so", "[target]") {
  json records = json::array(
      {json::array({"gemm", 0x470, 512, 0, 512, 0}), json::array({"gemm", 0x290, 8, 8, 0, 8})});
  TargetReport r = AnalyzeTargets(Map(), {Run("gemm", records)}, {{"wgmma", 4}}, {"wgmma", "tma"});
  CHECK_FALSE(r.ok);
  CHECK_FALSE(r.refused);
  CHECK(r.message.find("wgmma") != std::string::npos);
  CHECK(r.message.find("never with its predicate on") != std::string::npos);
}

TEST_CASE("a family present in SASS but never reached fails, naming an instruction", "[target]") {
  json records = json::array(
      {json::array({"gemm", 0x470, 0, 0, 0, 0}), json::array({"gemm", 0x290, 8, 8, 0, 8})});
  TargetReport r = AnalyzeTargets(Map(), {Run("gemm", records)}, {{"wgmma", 4}}, {"wgmma", "tma"});
  CHECK_FALSE(r.ok);
  CHECK(r.message.find("present in SASS") != std::string::npos);
  CHECK(r.message.find("gemm+0x0470") != std::string::npos);
}

TEST_CASE("a family only in the PTX is reported as such", "[target]") {
  json map = {{"available", true},
              {"functions", {{"gemm", {{"instructions", 10}, {"sites", json::object()}}}}}};
  TargetReport r =
      AnalyzeTargets(map, {Run("gemm", json::array({json::array({"gemm", 0, 1, 32, 0, 0})}))},
                     {{"wgmma", 2}}, {"wgmma"});
  CHECK_FALSE(r.ok);
  CHECK(r.message.find("present in the PTX") != std::string::npos);
}

TEST_CASE("a kernel without records or no SASS map refuses instead of passing", "[target]") {
  json records = json::array(
      {json::array({"gemm", 0x470, 512, 4096, 512, 0}), json::array({"gemm", 0x290, 8, 8, 0, 8})});
  TargetReport r = AnalyzeTargets(Map(), {Run("gemm", records), Run("epilogue", json::array())}, {},
                                  {"wgmma", "tma"});
  CHECK(r.refused);
  CHECK_FALSE(r.ok);
  CHECK(r.message.find("epilogue") != std::string::npos);
  TargetReport none = AnalyzeTargets({{"available", false}, {"reason", "nvdisasm not found"}},
                                     {Run("gemm", records)}, {}, {"wgmma"});
  CHECK(none.refused);
  CHECK(none.message.find("nvdisasm not found") != std::string::npos);
  CHECK(AnalyzeTargets(Map(), {}, {}, {"wgmma"}).refused);
}

}  // namespace
}  // namespace ptxbench::gpu
