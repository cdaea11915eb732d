// The target-instruction decision from a static SASS map and CUPTI per-PC counts.
#include "worker/engine/gpu/target_analysis.h"

#include <catch2/catch.hpp>

namespace ptxbench::gpu {
namespace {

SassSite Site(uint32_t pc, const std::string& sass, SiteEvidence by) {
  return {pc, sass, by, std::nullopt, std::nullopt};
}

SassFamilyMap Map() {
  SassFamilyMap map;
  map.available = true;
  SassFunctionSites& gemm = map.functions["gemm"];
  gemm.instructions = 100;
  gemm.sites["wgmma"] = {
      Site(0x470, "HGMMA.64x256x16.F32.BF16 R24, gdesc[UR4], R24", SiteEvidence::kSassOpcode),
      Site(0x460, "R2UR UR4, R2", SiteEvidence::kPtxLine)};
  gemm.sites["tma"] = {Site(0x290, "UTMALDG.2D [UR4], [UR8]", SiteEvidence::kSassOpcode)};
  gemm.sites["mbarrier"] = {Site(0x300, "SYNCS.ARRIVE.TRANS64 RZ, [UR6]", SiteEvidence::kPtxLine)};
  return map;
}

InstrumentEvent Run(const std::string& kernel, std::vector<PcRecord> records) {
  InstrumentEvent run;
  run.kernel = kernel;
  run.records = std::move(records);
  return run;
}

TEST_CASE("required families executed with predicate on pass", "[target]") {
  std::vector<PcRecord> records = {
      {"gemm", 0x470, 512, 4096, 512, 0}, {"gemm", 0x290, 8, 8, 0, 8}, {"gemm", 0x300, 8, 8, 0, 0}};
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
  std::vector<PcRecord> records = {{"gemm", 0x470, 512, 0, 512, 0}, {"gemm", 0x290, 8, 8, 0, 8}};
  TargetReport r = AnalyzeTargets(Map(), {Run("gemm", records)}, {{"wgmma", 4}}, {"wgmma", "tma"});
  CHECK_FALSE(r.ok);
  CHECK_FALSE(r.refused);
  CHECK(r.message.find("wgmma") != std::string::npos);
  CHECK(r.message.find("never with its predicate on") != std::string::npos);
}

TEST_CASE("a family present in SASS but never reached fails, naming an instruction", "[target]") {
  std::vector<PcRecord> records = {{"gemm", 0x470, 0, 0, 0, 0}, {"gemm", 0x290, 8, 8, 0, 8}};
  TargetReport r = AnalyzeTargets(Map(), {Run("gemm", records)}, {{"wgmma", 4}}, {"wgmma", "tma"});
  CHECK_FALSE(r.ok);
  CHECK(r.message.find("present in SASS") != std::string::npos);
  CHECK(r.message.find("gemm+0x0470") != std::string::npos);
}

TEST_CASE("a family only in the PTX is reported as such", "[target]") {
  SassFamilyMap map;
  map.available = true;
  map.functions["gemm"].instructions = 10;
  TargetReport r =
      AnalyzeTargets(map, {Run("gemm", {{"gemm", 0, 1, 32, 0, 0}})}, {{"wgmma", 2}}, {"wgmma"});
  CHECK_FALSE(r.ok);
  CHECK(r.message.find("present in the PTX") != std::string::npos);
}

TEST_CASE("a kernel without records or no SASS map refuses instead of passing", "[target]") {
  std::vector<PcRecord> records = {{"gemm", 0x470, 512, 4096, 512, 0}, {"gemm", 0x290, 8, 8, 0, 8}};
  TargetReport r =
      AnalyzeTargets(Map(), {Run("gemm", records), Run("epilogue", {})}, {}, {"wgmma", "tma"});
  CHECK(r.refused);
  CHECK_FALSE(r.ok);
  CHECK(r.message.find("epilogue") != std::string::npos);
  TargetReport none = AnalyzeTargets(UnavailableSassMap("nvdisasm not found"),
                                     {Run("gemm", records)}, {}, {"wgmma"});
  CHECK(none.refused);
  CHECK(none.message.find("nvdisasm not found") != std::string::npos);
  CHECK(AnalyzeTargets(Map(), {}, {}, {"wgmma"}).refused);
}

}  // namespace
}  // namespace ptxbench::gpu
