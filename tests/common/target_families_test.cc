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
  CHECK(informational == std::set<std::string>{"mbarrier", "setmaxnreg", "stmatrix", "elect_sync",
                                               "cluster_barrier", "mapa", "fence_proxy_async",
                                               "red_global_v4"});
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

  CHECK(FamiliesOfSassOpcode("sm_90a", "HGMMA.64x8x16.F32.BF16") ==
        std::vector<std::string>{"wgmma"});
  CHECK(FamiliesOfSassOpcode("sm_100a", "HGMMA.64x8x16.F32.BF16").empty());
  CHECK(FamiliesOfSassOpcode("sm_100a", "UTMALDG.2D") == std::vector<std::string>{"tma"});
  CHECK(FamiliesOfSassOpcode("sm_100a", "FFMA").empty());
}

}  // namespace
}  // namespace ptxbench
