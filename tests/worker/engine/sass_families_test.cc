// The static SASS family map on real nvdisasm output: the -g listing nvdisasm 13.0 printed on
// the H200 for tests/gpu/probe/probe_kernels.cu (gpu/testdata/probe_kernels.nvdisasm.txt) with
// the PTX nvcc makes of the same source at build time; the PTX-line view and the no-op HGMMA on
// a small listing written in nvdisasm -gp's format.
#include "worker/engine/sass_families.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace ptxbench {
namespace {

std::string SourceDir() {
  const char* env = std::getenv("PTXBENCH_SOURCE_DIR");
  return env ? env : PTXBENCH_SOURCE_DIR_DEFAULT;
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

SassListings ProbeListings() {
  SassListings listings;
  listings.with_source_lines =
      Read(SourceDir() + "/tests/worker/engine/gpu/testdata/probe_kernels.nvdisasm.txt");
  const char* env = std::getenv("PTXBENCH_PROBE_PTX");
  listings.compile_ptx = Read(env && *env ? env : PTXBENCH_PROBE_PTX);
  listings.tool = "nvdisasm";
  REQUIRE(listings.with_source_lines.size() > 1000);
  REQUIRE(listings.compile_ptx.find(".loc") != std::string::npos);
  return listings;
}

const gpu::SassSite* SiteAt(const gpu::SassFamilyMap& map, const std::string& function,
                            const std::string& family, uint32_t pc) {
  const auto& sites = map.functions.at(function).sites;
  auto it = sites.find(family);
  if (it == sites.end()) return nullptr;
  for (const gpu::SassSite& site : it->second) {
    if (site.pc == pc) return &site;
  }
  return nullptr;
}

TEST_CASE("the probe's SASS: families by opcode, the rest by source line", "[sass_families]") {
  gpu::SassFamilyMap map = ClassifySassFamilies("sm_90a", ProbeListings());
  REQUIRE(map.available);
  CHECK(map.tool == "nvdisasm");
  CHECK(map.ptx_source == "compile stage PTX");
  CHECK_FALSE(map.ptx_lines_available);
  // Without -gp the source-line view is the only one.
  CHECK(map.line_method == gpu::SiteEvidence::kSourceLine);
  // 11 opcode-classified instructions; their source line names the same family for 8 (the
  // elect, fence and reduction that ptxas adds are on lines of other statements).
  CHECK(map.source_line_consistency.checked == 11);
  CHECK(map.source_line_consistency.consistent == 8);
  CHECK(map.functions.size() == 7);
  CHECK(map.functions.at("k_wgmma").instructions == 96);

  const gpu::SassSite* hgmma = SiteAt(map, "k_wgmma", "wgmma", 0x470);
  REQUIRE(hgmma != nullptr);
  CHECK(hgmma->by == gpu::SiteEvidence::kSassOpcode);
  CHECK(hgmma->sass.find("HGMMA.64x8x16.F32.BF16 R24") == 0);
  CHECK(hgmma->source == "probe_kernels.cu:53");  // The asm statement's last line.
  // The descriptor arithmetic on the same source line is attributed to wgmma by that line only.
  const gpu::SassSite* by_line = SiteAt(map, "k_wgmma", "wgmma", 0x390);
  REQUIRE(by_line != nullptr);
  CHECK(by_line->by == gpu::SiteEvidence::kSourceLine);

  const gpu::SassSite* tma = SiteAt(map, "k_tma", "tma", 0x290);
  REQUIRE(tma != nullptr);
  CHECK(tma->by == gpu::SiteEvidence::kSassOpcode);
  CHECK(tma->sass == "UTMALDG.2D [UR4], [UR8]");
  const gpu::SassSite* arrive = SiteAt(map, "k_tma", "mbarrier", 0x270);
  REQUIRE(arrive != nullptr);
  CHECK(arrive->by == gpu::SiteEvidence::kSassOpcode);
  // Kernels without target instructions have no sites, wgmma none outside k_wgmma.
  CHECK(map.functions.at("k_hang").sites.empty());
  CHECK(map.functions.at("k_tma").sites.count("wgmma") == 0);
  // sm_100a has no wgmma: the same listing gives none.
  gpu::SassFamilyMap blackwell = ClassifySassFamilies("sm_100a", ProbeListings());
  CHECK(blackwell.functions.at("k_wgmma").sites.count("wgmma") == 0);
  CHECK(blackwell.functions.at("k_tma").sites.count("tma") == 1);
}

TEST_CASE("source-line families come from the PTX .loc before each instruction",
          "[sass_families]") {
  const std::vector<const TargetFamily*> families = {FindTargetFamily("wgmma"),
                                                     FindTargetFamily("mbarrier")};
  const std::string ptx =
      ".visible .entry k()\n{\n"
      "\t.loc\t1 10 3\n"
      "\tmov.u32 %r1, 0; // wgmma.mma_async in a comment is no instruction\n"
      "\t.loc\t1 12 3\n"
      "\t{ .reg .pred p; setp.ne.b32 p, %r1, 0;\n"
      "\twgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%f1,%f2,%f3,%f4}, %rd1, %rd2, p, "
      "1, 1, 0, 0;\n\t}\n"
      "\t.loc\t2 7 1\n"
      "\t@%p1 mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r2], 0;\n"
      "}\n"
      "\t.file\t1 \"/tmp/x/submission.cu\"\n"
      "\t.file\t2 \"/usr/local/cuda/include/cuda/barrier\"\n";
  auto lines = SourceLineFamilies(ptx, families);
  CHECK(lines.count({"submission.cu", 10}) == 0);
  CHECK(lines.at({"submission.cu", 12}) == std::set<std::string>{"wgmma"});
  CHECK(lines.at({"barrier", 7}) == std::set<std::string>{"mbarrier"});
}

// A listing in the format nvdisasm -gp prints (the PTX line of each SASS instruction) and the
// matching -g listing, for a kernel whose PTX line 4 holds a wgmma and line 5 a mapa (a family
// without a SASS opcode of its own).
constexpr char kPtx[] =
    ".version 8.7\n"
    ".target sm_90a\n"
    ".visible .entry k(){\n"
    "@%p1 wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%f1,%f2,%f3,%f4}, %rd1, %rd2, "
    "p, 1, 1, 0, 0;\n"
    "mapa.shared::cluster.u32 %r3, %r2, 1;\n"
    "}\n";

std::string Listing(const std::string& file, int hgmma_line, int noop_line, int mapa_line) {
  auto at = [&](int line) {
    return "\t//## File \"" + file + "\", line " + std::to_string(line) + "\n";
  };
  return ".text.k:\n" + at(hgmma_line) +
         "        /*0000*/                   HGMMA.64x8x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT, "
         "gsb0 ;\n" +
         at(noop_line) +
         "        /*0010*/              @!P0 HGMMA.64x8x16.F32.BF16 RZ, gdesc[URZ], RZ, !UPT ;\n" +
         at(mapa_line) + "        /*0020*/                   IADD3 R3, R2, 0x1000000, RZ ;\n" +
         at(100) + "        /*0030*/                   EXIT ;\n";
}

TEST_CASE("the PTX-line view wins where it agrees better, and no-op HGMMAs never count",
          "[sass_families]") {
  SassListings listings;
  // -g: every instruction on source line 9 of a file whose PTX has no .loc: the source view
  // agrees with no opcode.
  listings.with_source_lines = Listing("submission.cu", 9, 9, 9);
  listings.with_ptx_lines = Listing("submission.ptx", 4, 4, 5);
  listings.embedded_ptx = kPtx;
  listings.compile_ptx = kPtx;
  gpu::SassFamilyMap map = ClassifySassFamilies("sm_90a", listings);
  CHECK(map.ptx_lines_available);
  CHECK(map.ptx_source == ".nv_debug_ptx_txt");
  CHECK(map.line_method == gpu::SiteEvidence::kPtxLine);
  CHECK(map.ptx_line_consistency.checked == 1);
  CHECK(map.ptx_line_consistency.consistent == 1);
  CHECK(map.source_line_consistency.consistent == 0);
  CHECK(map.no_op_matrix_instructions_ignored == 1);
  const auto& sites = map.functions.at("k").sites;
  // The real HGMMA by opcode; the no-op one on the same PTX line not at all.
  REQUIRE(sites.at("wgmma").size() == 1);
  CHECK(sites.at("wgmma")[0].pc == 0);
  CHECK(sites.at("wgmma")[0].ptx_line == 4);
  CHECK(sites.at("wgmma")[0].source == "submission.cu:9");
  // mapa has no opcode: its instruction is found by its PTX line.
  REQUIRE(sites.at("mapa").size() == 1);
  CHECK(sites.at("mapa")[0].pc == 0x20);
  CHECK(sites.at("mapa")[0].by == gpu::SiteEvidence::kPtxLine);
  REQUIRE(map.gp_sample.size() == 1);
  CHECK(map.gp_sample[0].gp_line == 4);
  CHECK(map.gp_sample[0].ptx_at_line.find("wgmma.mma_async") != std::string::npos);
}

TEST_CASE("no-op matrix instructions write RZ", "[sass_families]") {
  CHECK(IsNoOpMatrixInstruction("HGMMA", "HGMMA.64x8x16.F16 RZ, gdesc[URZ], RZ, !UPT"));
  CHECK(IsNoOpMatrixInstruction("HGMMA", "@!P0 HGMMA.64x8x16.F16 RZ, gdesc[URZ], RZ, !UPT"));
  CHECK_FALSE(IsNoOpMatrixInstruction("HGMMA", "HGMMA.64x256x16.F32.BF16 R24, gdesc[UR4], R24"));
  CHECK_FALSE(IsNoOpMatrixInstruction("IADD3", "IADD3 RZ, R2, 0x1, RZ"));
}

TEST_CASE("without a usable nvdisasm the map says why", "[sass_families]") {
  // Wherever nvdisasm is found, it cannot read a cubin that does not exist.
  gpu::SassFamilyMap map = StaticFamilyMap("sm_90a", "/nonexistent/module.cubin", "", "");
  CHECK_FALSE(map.available);
  REQUIRE(map.reason.has_value());
  CHECK_FALSE(map.reason->empty());
  CHECK(map.functions.empty());
}

}  // namespace
}  // namespace ptxbench
