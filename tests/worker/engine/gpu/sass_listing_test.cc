// nvdisasm listings (real output of nvdisasm 13.0 on the H200 for tests/gpu/probe/
// probe_kernels.cu, testdata/probe_kernels.nvdisasm.txt) and ELF sections of a real cubin
// (built from the same source by nvcc at build time).
#include "worker/engine/gpu/sass_listing.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "worker/engine/gpu/protocol.h"

namespace ptxbench::gpu {
namespace {

std::string SourceDir() {
  const char* env = std::getenv("PTXBENCH_SOURCE_DIR");
  return env ? env : PTXBENCH_SOURCE_DIR_DEFAULT;
}

std::string Fixture() {
  std::ifstream in(SourceDir() + "/tests/worker/engine/gpu/testdata/probe_kernels.nvdisasm.txt");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST_CASE("opcodes drop predicates and modifiers", "[sass]") {
  CHECK(SassOpcode("HGMMA.64x8x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT, gsb0") == "HGMMA");
  CHECK(SassOpcode("@P0 BRA `(.L_x_4)") == "BRA");
  CHECK(SassOpcode("@!UP1 UTMALDG.2D [UR4], [UR8]") == "UTMALDG");
  CHECK(SassOpcode("  EXIT") == "EXIT");
}

TEST_CASE("the probe listing has every kernel with PCs, opcodes and source lines", "[sass]") {
  SassListing listing = ParseNvdisasm(Fixture());
  REQUIRE(listing.count("k_wgmma"));
  REQUIRE(listing.count("k_tma"));
  REQUIRE(listing.count("k_pred"));
  const SassInstruction* hgmma = listing["k_wgmma"].AtPc(0x470);
  REQUIRE(hgmma != nullptr);
  CHECK(hgmma->opcode == "HGMMA");
  CHECK(hgmma->text.find("HGMMA.64x8x16.F32.BF16 R24") == 0);
  CHECK(hgmma->line > 0);
  CHECK(hgmma->file.find("probe_kernels.cu") != std::string::npos);
  const SassInstruction* tma = listing["k_tma"].AtPc(0x290);
  REQUIRE(tma != nullptr);
  CHECK(tma->opcode == "UTMALDG");
  CHECK(listing["k_tma"].AtPc(0x294) == nullptr);  // Between instructions.
  // PCs are in order and 16 bytes apart on sm_90.
  const auto& ins = listing["k_pred"].instructions;
  REQUIRE(ins.size() > 10);
  for (size_t i = 1; i < ins.size(); ++i) CHECK(ins[i].pc == ins[i - 1].pc + 16);
}

TEST_CASE("ELF sections of a -lineinfo cubin carry the PTX text", "[sass]") {
  const char* env = std::getenv("PTXBENCH_PROBE_CUBIN");
  auto cubin = ReadFileBytes(env && *env ? env : PTXBENCH_PROBE_CUBIN);
  REQUIRE(cubin.ok());
  auto ptx = ElfSection(*cubin, ".nv_debug_ptx_txt");
  REQUIRE(ptx.has_value());
  CHECK(ptx->find("wgmma.mma_async") != std::string::npos);
  CHECK(ptx->find("cp.async.bulk.tensor") != std::string::npos);
  CHECK_FALSE(ElfSection(*cubin, ".no_such_section").has_value());
  CHECK_FALSE(
      ElfSection("not an elf file at all, long enough to have a header....", ".text").has_value());
  std::string truncated = cubin->substr(0, 100);
  CHECK_FALSE(ElfSection(truncated, ".nv_debug_ptx_txt").has_value());
}

}  // namespace
}  // namespace ptxbench::gpu
