#include "common/target_families.h"

#include <catch2/catch.hpp>
#include <set>

namespace ptxbench {
namespace {

TEST_CASE("The registry holds the credited and the informational families") {
  std::set<std::string> credited, informational;
  for (const TargetFamily& family : TargetFamilies()) {
    (family.credited ? credited : informational).insert(family.name);
    CHECK_FALSE(family.description.empty());
    CHECK_FALSE(family.ptx.empty());
    CHECK_FALSE(family.arches.empty());
  }
  CHECK(credited == std::set<std::string>{"wgmma", "tma", "tcgen05_mma", "tcgen05_tmem"});
  CHECK(informational == std::set<std::string>{"tma_control", "mbarrier", "setmaxnreg", "stmatrix",
                                               "elect_sync", "cluster_barrier", "mapa",
                                               "fence_proxy_async", "red_global_v4"});
  for (const std::string& name : credited) {
    const TargetFamily* family = FindTargetFamily(name);
    REQUIRE(family != nullptr);
    CHECK_FALSE(family->sass_opcodes.empty());  // CUPTI needs opcodes to credit execution.
  }
  CHECK(FindTargetFamily("hgmma") == nullptr);
}

TEST_CASE("Families exist only on their arches") {
  CHECK(FamilyExistsOn(*FindTargetFamily("wgmma"), "sm_90a"));
  CHECK_FALSE(FamilyExistsOn(*FindTargetFamily("wgmma"), "sm_100a"));
  CHECK(FamilyExistsOn(*FindTargetFamily("tma"), "sm_90a"));
  CHECK(FamilyExistsOn(*FindTargetFamily("tma"), "sm_100a"));
  CHECK(FamilyExistsOn(*FindTargetFamily("tcgen05_mma"), "sm_100a"));
  CHECK_FALSE(FamilyExistsOn(*FindTargetFamily("tcgen05_tmem"), "sm_90a"));
}

TEST_CASE("PTX mnemonics match at '.' boundaries and with required parts") {
  const TargetFamily& wgmma = *FindTargetFamily("wgmma");
  CHECK(PtxMnemonicInFamily(wgmma, "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16"));
  CHECK(PtxMnemonicInFamily(wgmma, "wgmma.mma_async.sp.sync.aligned.m64n128k32.f32.bf16.bf16"));
  CHECK_FALSE(PtxMnemonicInFamily(wgmma, "wgmma.fence.sync.aligned"));
  CHECK_FALSE(PtxMnemonicInFamily(wgmma, "wgmma.commit_group.sync.aligned"));
  CHECK_FALSE(PtxMnemonicInFamily(wgmma, "wgmma.mma_asyncx"));

  const TargetFamily& tma = *FindTargetFamily("tma");
  CHECK(PtxMnemonicInFamily(
      tma, "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"));
  CHECK(PtxMnemonicInFamily(tma, "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group"));
  CHECK(
      PtxMnemonicInFamily(tma, "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.bulk_group"));
  CHECK_FALSE(PtxMnemonicInFamily(tma, "cp.async.bulk.prefetch.tensor.2d.L2.global"));
  CHECK_FALSE(PtxMnemonicInFamily(
      tma, "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"));

  const TargetFamily& tmem = *FindTargetFamily("tcgen05_tmem");
  CHECK(PtxMnemonicInFamily(tmem, "tcgen05.ld.sync.aligned.32x32b.x1.b32"));
  CHECK(PtxMnemonicInFamily(tmem, "tcgen05.st.sync.aligned.16x64b.x2.b32"));
  CHECK_FALSE(PtxMnemonicInFamily(tmem, "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32"));
  CHECK(
      PtxMnemonicInFamily(*FindTargetFamily("tcgen05_mma"), "tcgen05.mma.cta_group::1.kind::f16"));
  CHECK_FALSE(PtxMnemonicInFamily(*FindTargetFamily("tcgen05_mma"), "tcgen05.commit.cta_group::1"));

  const TargetFamily& red = *FindTargetFamily("red_global_v4");
  CHECK(PtxMnemonicInFamily(red, "red.global.add.v4.f32"));
  CHECK(PtxMnemonicInFamily(red, "red.relaxed.gpu.global.add.v4.f32"));
  CHECK_FALSE(PtxMnemonicInFamily(red, "red.global.add.f32"));
  CHECK_FALSE(PtxMnemonicInFamily(red, "red.shared.add.v4.f32"));
  CHECK_FALSE(PtxMnemonicInFamily(red, "redux.sync.add.u32"));
}

TEST_CASE("SASS opcodes are matched without predicates and modifiers") {
  CHECK(SassBaseOpcode("@P0 HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], R24 ;") == "HGMMA");
  CHECK(SassBaseOpcode("  @!PT UTMALDG.2D [UR8], [UR4] ;") == "UTMALDG");
  CHECK(SassBaseOpcode("LDTM.x32 R4, tmem[UR5]") == "LDTM");
  CHECK(SassBaseOpcode("UTCHMMA") == "UTCHMMA");

  CHECK(SassOpcodeInFamily(*FindTargetFamily("wgmma"), "HGMMA.64x256x16.F32.BF16"));
  CHECK(SassOpcodeInFamily(*FindTargetFamily("wgmma"), "QGMMA.64x128x32.F32.E4M3.E4M3"));
  CHECK_FALSE(SassOpcodeInFamily(*FindTargetFamily("wgmma"), "HMMA.16816.F32.BF16"));
  CHECK_FALSE(SassOpcodeInFamily(*FindTargetFamily("wgmma"), "WARPGROUP.ARRIVE"));
  CHECK(SassOpcodeInFamily(*FindTargetFamily("tcgen05_mma"), "UTCHMMA"));
  CHECK(SassOpcodeInFamily(*FindTargetFamily("tcgen05_mma"), "UTCQMMA.2CTA"));
  CHECK_FALSE(SassOpcodeInFamily(*FindTargetFamily("tcgen05_mma"), "UTCBAR"));
  CHECK(SassOpcodeInFamily(*FindTargetFamily("tma"), "UTMASTG.2D"));
  CHECK_FALSE(SassOpcodeInFamily(*FindTargetFamily("tma"), "UTMAPF.L2.2D"));
  CHECK_FALSE(SassOpcodeInFamily(*FindTargetFamily("tma"), "UTMACMDFLUSH"));
  // What the tma family leaves out of the TMA pipe is tma_control's (the path cross-check).
  CHECK(SassOpcodeInFamily(*FindTargetFamily("tma_control"), "UTMAPF.L2.2D"));
  CHECK(SassOpcodeInFamily(*FindTargetFamily("tma_control"), "UTMACMDFLUSH"));
  CHECK_FALSE(SassOpcodeInFamily(*FindTargetFamily("tma_control"), "UTMALDG.2D"));
  CHECK(PtxMnemonicInFamily(*FindTargetFamily("tma_control"), "prefetch.tensormap"));
  CHECK_FALSE(PtxMnemonicInFamily(*FindTargetFamily("tma_control"),
                                  "cp.async.bulk.tensor.2d.shared::cluster.global.tile"));

  CHECK(FamiliesOfSassOpcode("sm_90a", "HGMMA.64x8x16.F32.BF16") ==
        std::vector<std::string>{"wgmma"});
  CHECK(FamiliesOfSassOpcode("sm_100a", "HGMMA.64x8x16.F32.BF16").empty());
  CHECK(FamiliesOfSassOpcode("sm_100a", "UTMALDG.2D") == std::vector<std::string>{"tma"});
  CHECK(FamiliesOfSassOpcode("sm_100a", "FFMA").empty());
}

// SASS of the probe kernels (one per arch, every family), as cuobjdump 13.0 printed it on the
// H200 for cubins from ptxas 13.0.88 (docs/task-authoring.md, "Target families"): each
// instruction and the families it must be classified into.
TEST_CASE("Measured SASS of the probe kernels classifies as expected") {
  struct Case {
    const char* arch;
    const char* instruction;
    std::vector<std::string> families;
  };
  const std::vector<Case> cases = {
      {"sm_90a", "HGMMA.64x8x16.F32.BF16 R24, gdesc[UR8], RZ, !UPT, gsb0 ;", {"wgmma"}},
      {"sm_90a", "WARPGROUP.ARRIVE ;", {}},
      {"sm_90a", "WARPGROUP.DEPBAR.LE gsb0, 0x0 ;", {}},
      {"sm_90a", "UTMALDG.2D [UR4], [UR8] ;", {"tma"}},
      {"sm_90a", "UTMASTG.2D [UR8], [UR6] ;", {"tma"}},
      {"sm_90a", "UTMAREDG.2D.ADD [UR8], [UR6] ;", {"tma"}},
      {"sm_90a", "UTMAPF.L2.2D [UR10], [UR8] ;", {"tma_control"}},
      {"sm_90a", "UTMACMDFLUSH ;", {"tma_control"}},
      {"sm_90a", "@!UP0 SYNCS.EXCH.64 URZ, [UR6], UR4 ;", {"mbarrier"}},
      {"sm_90a", "SYNCS.ARRIVE.TRANS64 RZ, [UR5], R0 ;", {"mbarrier"}},
      {"sm_90a", "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR5], R0 ;", {"mbarrier"}},
      {"sm_90a", "USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xe8 ;", {"setmaxnreg"}},
      {"sm_90a", "STSM.16.M88.4 [R0], R24 ;", {"stmatrix"}},
      {"sm_90a", "ELECT P0, URZ, PT ;", {"elect_sync"}},
      {"sm_90a", "UCGABAR_ARV ;", {"cluster_barrier"}},
      {"sm_90a", "UCGABAR_WAIT ;", {"cluster_barrier"}},
      {"sm_90a", "FENCE.VIEW.ASYNC.S ;", {"fence_proxy_async"}},
      {"sm_90a", "REDG.E.ADD.F32x4.FTZ.RN.STRONG.GPU desc[UR12][R2.64], R24 ;", {"red_global_v4"}},
      {"sm_100a",
       "@UP1 UTCHMMA gdesc[UR6], gdesc[UR10], tmem[UR8], tmem[UR4], idesc[UR5], !UPT ;",
       {"tcgen05_mma"}},
      {"sm_100a", "@UP0 UTCBAR [UR9], URZ ;", {}},
      {"sm_100a", "UTCATOMSWS.FIND_AND_SET.ALIGN UP0, UR4, UR4 ;", {}},
      {"sm_100a", "UTCATOMSWS.AND URZ, UR8 ;", {}},
      {"sm_100a", "LDTM R4, tmem[UR4] ;", {"tcgen05_tmem"}},
      {"sm_100a", "STTM tmem[UR4], R2 ;", {"tcgen05_tmem"}},
      {"sm_100a", "@!UP1 UTMALDG.2D [UR8], [UR6] ;", {"tma"}},
      {"sm_100a", "HGMMA.64x8x16.F32.BF16 R24, gdesc[UR8], RZ, !UPT, gsb0 ;", {}},
      {"sm_100a", "FENCE.VIEW.ASYNC.S ;", {"fence_proxy_async"}},
      {"sm_100a", "FENCE.VIEW.ASYNC.T ;", {}},  // Follows tcgen05.wait::st; not a proxy fence.
      {"sm_90a", "MEMBAR.ALL.CTA ;", {}},
  };
  for (const Case& c : cases) {
    INFO(c.arch << " " << c.instruction);
    CHECK(FamiliesOfSassOpcode(c.arch, c.instruction) == c.families);
  }
}

}  // namespace
}  // namespace ptxbench
