// nvdisasm listings (real output of nvdisasm 13.0 on the H200 for tests/gpu/probe/
// probe_kernels.cu, testdata/probe_kernels.nvdisasm.txt) and ELF sections of a real cubin
// (built from the same source by nvcc at build time).
#include "worker/engine/gpu/sass_listing.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
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

namespace ptxbench::gpu {
namespace {

// A stand-in nvdisasm (a shell script) shows what the real one is given: its arguments and
// environment, how a failure and a hang come back.
class FakeNvdisasm {
 public:
  explicit FakeNvdisasm(const std::string& body) {
    char pattern[] = "/tmp/ptxbench_fake_nvdisasm_XXXXXX";
    REQUIRE(mkdtemp(pattern) != nullptr);
    dir_ = pattern;
    path_ = dir_ + "/nvdisasm";
    std::ofstream(path_) << "#!/bin/sh\n" << body << "\n";
    REQUIRE(chmod(path_.c_str(), 0755) == 0);
  }
  ~FakeNvdisasm() {
    std::remove(path_.c_str());
    rmdir(dir_.c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string dir_;
  std::string path_;
};

TEST_CASE("nvdisasm gets its flags and the cubin, and none of the worker's secrets", "[sass]") {
  setenv("PTXBENCH_TOKEN", "worker-secret-0e9b", 1);
  setenv("PTXBENCH_DATABASE_URL", "postgresql://u:db-secret-11aa@h/db", 1);
  const FakeNvdisasm fake("printf '%s|' \"$@\"; echo; export -p; echo noise >&2");
  auto listing = RunNvdisasm(fake.path(), {"-c", "-g"}, "/work/module one.cubin", 30);
  unsetenv("PTXBENCH_TOKEN");
  unsetenv("PTXBENCH_DATABASE_URL");
  REQUIRE(listing.ok());
  INFO(*listing);
  CHECK(listing->rfind("-c|-g|/work/module one.cubin|\n", 0) == 0);
  CHECK(listing->find("LC_ALL") != std::string::npos);
  CHECK(listing->find("secret") == std::string::npos);
  CHECK(listing->find("PTXBENCH_") == std::string::npos);
  CHECK(listing->find("noise") == std::string::npos);  // stderr is not the listing
}

TEST_CASE("an nvdisasm that fails or hangs is an error, not a listing", "[sass]") {
  const FakeNvdisasm failing("echo partial; exit 3");
  auto failed = RunNvdisasm(failing.path(), {}, "x.cubin", 30);
  REQUIRE(failed.status().code() == absl::StatusCode::kInternal);
  CHECK(failed.status().message() == failing.path() + " failed with exit code 3");
  const FakeNvdisasm hanging("sleep 1000");
  auto hung = RunNvdisasm(hanging.path(), {}, "x.cubin", 0.3);
  CHECK(hung.status().code() == absl::StatusCode::kDeadlineExceeded);
  auto missing = RunNvdisasm("/nonexistent/nvdisasm", {}, "x.cubin", 30);
  CHECK(missing.status().code() == absl::StatusCode::kInternal);
  CHECK(missing.status().message().find("/nonexistent/nvdisasm") != std::string::npos);
}

}  // namespace
}  // namespace ptxbench::gpu
