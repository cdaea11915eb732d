#include "worker/engine/compile.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "common/sha256.h"
#include "worker/engine/ptxas_runner.h"

namespace ptxbench {
namespace {

// One wgmma (m64n8k16, bf16 in, fp32 accumulate) from shared-memory descriptors, with its fence,
// commit and wait; plus a second kernel that reads a macro from the only header offered.
constexpr char kWgmmaKernel[] = R"(#include "ptxbench_test.cuh"
extern "C" __global__ void __launch_bounds__(128)
gemm_kernel(float* out, unsigned long long desc_a, unsigned long long desc_b) {
  float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
  __shared__ float pad[1024];
  pad[threadIdx.x] = threadIdx.x;
  __syncthreads();
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %6, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0,%1,%2,%3}, %4, %5, p, 1, 1, 0, 0;\n}\n"
               : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "l"(desc_a), "l"(desc_b), "r"(1));
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  out[threadIdx.x] = d0 + d1 + d2 + d3 + pad[(threadIdx.x + 1) % 128];
}
extern "C" __global__ void second(int* x, long long n) { x[0] = PTXBENCH_TEST_VALUE + static_cast<int>(n); }
)";

// Tensor memory allocation, one tcgen05.mma committed to an mbarrier, a tcgen05.ld of the
// accumulator and the deallocation: the minimal legal tcgen05 sequence for sm_100a.
constexpr char kTcgen05Kernel[] = R"(
extern "C" __global__ void tc_kernel(float* out, unsigned long long adesc, unsigned long long bdesc,
                                     unsigned idesc) {
  __shared__ unsigned tmem_slot;
  __shared__ unsigned long long bar;
  const unsigned slot = static_cast<unsigned>(__cvta_generic_to_shared(&tmem_slot));
  const unsigned bar_addr = static_cast<unsigned>(__cvta_generic_to_shared(&bar));
  if (threadIdx.x < 32) {
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], 32;" :: "r"(slot) : "memory");
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;" ::: "memory");
  }
  if (threadIdx.x == 0) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(bar_addr) : "memory");
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
  __syncthreads();
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
  const unsigned taddr = tmem_slot;
  if (threadIdx.x == 0) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %4, 0;\n"
                 "tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p;\n}\n"
                 :: "r"(taddr), "l"(adesc), "l"(bdesc), "r"(idesc), "r"(0) : "memory");
    asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];"
                 :: "r"(bar_addr) : "memory");
  }
  asm volatile("{\n .reg .pred done;\n WAIT:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], 0;\n"
               " @!done bra WAIT;\n}\n" :: "r"(bar_addr) : "memory");
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
  unsigned v;
  asm volatile("tcgen05.ld.sync.aligned.32x32b.x1.b32 {%0}, [%1];"
               : "=r"(v) : "r"(taddr + ((threadIdx.x / 32 * 32) << 16)));
  asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
  out[threadIdx.x] = __uint_as_float(v);
  __syncthreads();
  if (threadIdx.x < 32) asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, 32;" :: "r"(taddr) : "memory");
}
)";

CompileRequest Request(const std::string& source, const std::string& arch) {
  CompileRequest request;
  request.source = source;
  request.arch = arch;
  request.headers = {{"ptxbench_test.cuh", "#define PTXBENCH_TEST_VALUE 3\n"}};
  return request;
}

CompileResult MustCompile(const CompileRequest& request) {
  auto result = Compile(request);
  if (!result.ok()) FAIL("internal failure: " << result.status().ToString());
  return *std::move(result);
}

// No host file name or directory of this machine may reach the model.
void CheckNoHostPaths(const std::string& log) {
  char cwd[4096];
  REQUIRE(getcwd(cwd, sizeof(cwd)) != nullptr);
  if (std::string(cwd) != "/") CHECK(log.find(cwd) == std::string::npos);
  for (const char* host : {"/usr/", "/etc/", "/tmp/", "/work/", "/home/", "/root", "/proc/"}) {
    INFO(host << " in: " << log);
    CHECK(log.find(host) == std::string::npos);
  }
  CHECK(log.find("root:x:0:0") == std::string::npos);
}

const KernelSignature* Kernel(const CompileResult& result, const std::string& name) {
  for (const KernelSignature& kernel : result.kernels) {
    if (kernel.name == name) return &kernel;
  }
  return nullptr;
}

TEST_CASE("A wgmma kernel compiles for sm_90a with resources, families and kernel names") {
  const CompileResult result = MustCompile(Request(kWgmmaKernel, "sm_90a"));
  INFO(result.log);
  REQUIRE(result.ok);
  CHECK(result.failure == CompileFailure::kNone);
  REQUIRE(result.cubin.size() > 4);
  CHECK(result.cubin.substr(0, 4) ==
        "\x7f"
        "ELF");
  CHECK(result.ptx.find(".target sm_90a") != std::string::npos);
  CHECK(result.ptx_families.at("wgmma") == 1);  // The fence, commit and wait are not the MMA.
  CHECK(result.ptx_families.count("tma") == 0);

  REQUIRE(result.kernels.size() == 2);
  const KernelSignature* gemm = Kernel(result, "gemm_kernel");
  REQUIRE(gemm != nullptr);
  REQUIRE(gemm->parameters.size() == 3);
  CHECK(gemm->parameters[0].size_bytes == 8);
  CHECK(gemm->max_threads == std::array<int64_t, 3>{128, 1, 1});
  REQUIRE(gemm->has_resources);
  CHECK(gemm->resources.registers > 0);
  CHECK(gemm->resources.registers <= 255);
  CHECK(gemm->resources.barriers == 1);
  CHECK(gemm->resources.shared_bytes == 4096);  // float pad[1024].
  CHECK(gemm->resources.spill_store_bytes == 0);
  CHECK(gemm->resources.stack_frame_bytes == 0);
  const KernelSignature* second = Kernel(result, "second");
  REQUIRE(second != nullptr);
  REQUIRE(second->parameters.size() == 2);
  CHECK(second->parameters[1].size_bytes == 8);
  CHECK(second->max_threads[0] == 0);

  CHECK(result.log.find("Compiling entry function 'gemm_kernel' for 'sm_90a'") !=
        std::string::npos);
  CHECK(result.log.find("Compile time") == std::string::npos);  // Removed for reproducibility.
  CHECK(result.timings.assembler_seconds > 0);
  CHECK(result.timings.frontend_seconds > 0);
  CHECK(result.timings.total_seconds >= result.timings.assembler_seconds);
  CHECK(result.nvrtc_version.rfind("13.", 0) == 0);
  CHECK(result.ptxas_version.rfind("13.", 0) == 0);
  CHECK(result.nvrtc_options[0] == "-arch=compute_90a");
  CheckNoHostPaths(result.log);

  const nlohmann::json json = ToJson(result);
  CHECK(json["ok"] == true);
  CHECK(json["cubin_sha256"] == Sha256Hex(result.cubin));
  CHECK(json["kernels"].size() == 2);
  CHECK(json["ptx_families"]["wgmma"] == 1);
}

TEST_CASE("The same source compiles to the same log and module every time") {
  const CompileResult first = MustCompile(Request(kWgmmaKernel, "sm_90a"));
  const CompileResult second = MustCompile(Request(kWgmmaKernel, "sm_90a"));
  REQUIRE(first.ok);
  REQUIRE(second.ok);
  CHECK(first.log == second.log);
  CHECK(first.ptx == second.ptx);
  CHECK(Sha256Hex(first.cubin) == Sha256Hex(second.cubin));
}

TEST_CASE("wgmma is refused on sm_100a by ptxas, with its message") {
  const CompileResult result = MustCompile(Request(kWgmmaKernel, "sm_100a"));
  CHECK_FALSE(result.ok);
  CHECK(result.failure == CompileFailure::kAssembler);
  CHECK(result.cubin.empty());
  CHECK(result.log.find("not supported on .target 'sm_100a'") != std::string::npos);
  CHECK(result.ptx_families.at("wgmma") == 1);  // Present in the PTX all the same.
  CheckNoHostPaths(result.log);
}

TEST_CASE("A tcgen05 kernel compiles for sm_100a and is refused on sm_90a") {
  const CompileResult result = MustCompile(Request(kTcgen05Kernel, "sm_100a"));
  INFO(result.log);
  REQUIRE(result.ok);
  CHECK(result.ptx_families.at("tcgen05_mma") == 1);
  CHECK(result.ptx_families.at("tcgen05_tmem") == 1);
  CHECK(result.ptx_families.at("mbarrier") == 2);  // init and try_wait.
  CHECK(result.ptx_families.count("wgmma") == 0);
  REQUIRE(result.kernels.size() == 1);
  CHECK(result.kernels[0].has_resources);
  CHECK(result.kernels[0].parameters.size() == 4);
  CHECK(result.kernels[0].parameters[3].size_bytes == 4);

  const CompileResult hopper = MustCompile(Request(kTcgen05Kernel, "sm_90a"));
  CHECK_FALSE(hopper.ok);
  CHECK(hopper.failure == CompileFailure::kAssembler);
  CHECK(hopper.log.find("tcgen05") != std::string::npos);
}

TEST_CASE("A syntax error is data: the log names the line and carries no host path") {
  const CompileResult result = MustCompile(Request(
      "extern \"C\" __global__ void k(float* x) {\n  x[0] = undeclared_name;\n}\n", "sm_90a"));
  CHECK_FALSE(result.ok);
  CHECK(result.failure == CompileFailure::kFrontend);
  CHECK(result.log.find("submission.cu(2): error: identifier \"undeclared_name\" is undefined") !=
        std::string::npos);
  CHECK(result.cubin.empty());
  CheckNoHostPaths(result.log);
}

TEST_CASE("Only the offered headers can be included") {
  auto refused = [](const std::string& source) {
    CompileRequest request = Request(source, "sm_90a");
    const CompileResult result = MustCompile(request);
    CHECK_FALSE(result.ok);
    CHECK(result.failure == CompileFailure::kSourceRejected);
    CheckNoHostPaths(result.log.substr(result.log.find(" is refused")));
    CHECK(result.log.find("root:x:0:0") == std::string::npos);
    return result.log;
  };
  const std::string kernel = "\nextern \"C\" __global__ void k() {}\n";
  CHECK(
      refused("#include </etc/passwd>" + kernel) ==
      "submission.cu:1: #include </etc/passwd> is refused: only the task's template headers can be "
      "included (available: \"ptxbench_test.cuh\")\n");
  CHECK(refused("#include \"../../../../etc/passwd\"" + kernel)
            .find("submission.cu:1: #include \"../../../../etc/passwd\" is refused") == 0);
  CHECK(refused("#include <cuda.h>" + kernel).find("#include <cuda.h> is refused") !=
        std::string::npos);
  CHECK(refused("#define P </etc/passwd>\n#include P" + kernel) ==
        "submission.cu:2: #include P is refused: the header must be named literally, as \"name\" "
        "(available: "
        "\"ptxbench_test.cuh\")\n");
  CHECK(refused("  #  include_next <x.h>" + kernel)
            .find("submission.cu:1: #include_next is refused") == 0);
  CHECK(refused("%:include </etc/passwd>" + kernel)
            .find("submission.cu:1: #include </etc/passwd> is refused") == 0);
  CHECK(refused("#inc\\\nlude </etc/passwd>" + kernel)
            .find("submission.cu:1: #include </etc/passwd> is refused") == 0);
  CHECK(refused("#/* comment */include </etc/passwd>" + kernel)
            .find("#include </etc/passwd> is refused") != std::string::npos);
  CHECK(refused("#if 0\n#include </etc/passwd>\n#endif" + kernel).find("submission.cu:2:") == 0);
  CHECK(refused("#if __has_include(</etc/passwd>)\n#endif" + kernel) ==
        "submission.cu:1: __has_include is refused: it would probe the host's files; only the "
        "task's template "
        "headers exist here (available: \"ptxbench_test.cuh\")\n");

  // A header may not reach further than the source.
  CompileRequest request = Request("#include \"evil.cuh\"" + kernel, "sm_90a");
  request.headers["evil.cuh"] = "#pragma once\n#include </etc/shadow>\n";
  const CompileResult via_header = MustCompile(request);
  CHECK(via_header.failure == CompileFailure::kSourceRejected);
  CHECK(via_header.log.find("evil.cuh:2: #include </etc/shadow> is refused") == 0);

  // Includes in comments and strings are not directives; the offered header works.
  const CompileResult fine = MustCompile(Request(
      "// #include </etc/passwd>\n/* #include </etc/passwd> */\n#include \"ptxbench_test.cuh\"\n"
      "__device__ const char* s = \"#include </etc/passwd>\";\n"
      "extern \"C\" __global__ void k(int* x) { x[0] = PTXBENCH_TEST_VALUE + s[0]; }\n",
      "sm_90a"));
  INFO(fine.log);
  CHECK(fine.ok);
}

TEST_CASE("Raw PTX goes straight to ptxas") {
  const CompileResult cuda = MustCompile(Request(kWgmmaKernel, "sm_90a"));
  REQUIRE(cuda.ok);
  CompileRequest request;
  request.source = cuda.ptx;
  request.language = SourceLanguage::kPtx;
  request.arch = "sm_90a";
  const CompileResult ptx = MustCompile(request);
  INFO(ptx.log);
  REQUIRE(ptx.ok);
  CHECK(ptx.timings.frontend_seconds == 0);
  CHECK(ptx.ptx == cuda.ptx);
  CHECK(ptx.ptx_families.at("wgmma") == 1);
  CHECK(ptx.kernels.size() == 2);

  request.source =
      ".version 9.0\n.target sm_90a\n.address_size 64\n.visible .entry k() {\n  "
      "bogus.instruction;\n}\n";
  const CompileResult broken = MustCompile(request);
  CHECK_FALSE(broken.ok);
  CHECK(broken.failure == CompileFailure::kAssembler);
  CHECK(broken.log.find("submission.ptx") != std::string::npos);
  CheckNoHostPaths(broken.log);
}

TEST_CASE("A PTX module must target the task's arch") {
  CompileRequest request;
  request.language = SourceLanguage::kPtx;
  request.arch = "sm_90a";
  request.source =
      ".version 9.0\n.target sm_90\n.address_size 64\n.visible .entry k() {\n  ret;\n}\n";
  const CompileResult result = MustCompile(request);
  CHECK(result.failure == CompileFailure::kSourceRejected);
  CHECK(
      result.log ==
      "submission.ptx: the module's .target is 'sm_90'; this task's arch needs '.target sm_90a'\n");
}

// Points PTXBENCH_PTXAS at another program for one test.
class PtxasOverride {
 public:
  explicit PtxasOverride(const std::string& path) { setenv("PTXBENCH_PTXAS", path.c_str(), 1); }
  ~PtxasOverride() { unsetenv("PTXBENCH_PTXAS"); }
};

TEST_CASE("A ptxas that cannot run is an infrastructure error") {
  PtxasOverride missing("/nonexistent/ptxas");
  auto result = Compile(Request(kWgmmaKernel, "sm_90a"));
  REQUIRE_FALSE(result.ok());
  CHECK(std::string(result.status().message()).find("cannot run ptxas at /nonexistent/ptxas") !=
        std::string::npos);
}

TEST_CASE("A ptxas that runs past the deadline is killed") {
  char dir[] = "/tmp/ptxbench_slow_ptxas_XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  const std::string script = std::string(dir) + "/ptxas";
  {
    std::ofstream out(script);
    // Shell builtins only: in the jail there is nothing but the script, its shell and the
    // shell's libraries.
    out << "#!/bin/sh\n"
           "if [ \"$1\" = --version ]; then echo 'Cuda compilation tools, release 13.0, V13.0.88'; "
           "exit 0; fi\n"
           "while :; do :; done\n";
  }
  REQUIRE(chmod(script.c_str(), 0755) == 0);
  REQUIRE(chmod(dir, 0755) == 0);  // The jail runs it as uid 65534 when the test is root.
  PtxasOverride slow(script);
  CompileRequest request = Request(kWgmmaKernel, "sm_90a");
  request.limits.max_seconds = 1.5;
  const auto start = std::chrono::steady_clock::now();
  const CompileResult result = MustCompile(request);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(result.failure == CompileFailure::kTimeout);
  // Killed by ptxas's own deadline in the jail, or with the jail at the stage deadline.
  CHECK(result.log.find("ran past the limit of 1.5 s") != std::string::npos);
  CHECK(seconds < 4 * 1.5 + 1.5);  // At the latest by the jail's wall backstop.
  std::remove(script.c_str());
  rmdir(dir);
}

TEST_CASE("ptxas gets LC_ALL and the jail's library path, nothing of the worker's environment") {
  // The worker's secrets, as a deployment sets them (docs/operations.md).
  setenv("PTXBENCH_ADMIN_TOKEN", "admin-secret-7f3a", 1);
  setenv("PTXBENCH_DATABASE_URL", "postgresql://ptxbench:db-secret-91c2@db/ptxbench", 1);
  setenv("PTXBENCH_TOKEN", "worker-secret-55d0", 1);
  char dir[] = "/tmp/ptxbench_env_ptxas_XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  const std::string script = std::string(dir) + "/ptxas";
  {
    std::ofstream out(script);
    out << "#!/bin/sh\nexport -p\nexit 1\n";  // every exported variable, into ptxas's log
  }
  REQUIRE(chmod(script.c_str(), 0755) == 0);
  PtxasOverride printing(script);
  PtxasRun run;
  run.ptx = ".version 8.7\n.target sm_90a\n";
  run.arch = "sm_90a";
  run.library_path = "/jail/lib";
  auto out = RunPtxas(run);
  REQUIRE(out.ok());
  INFO(out->log);
  CHECK_FALSE(out->ok);
  CHECK(out->log.find("LC_ALL") != std::string::npos);
  CHECK(out->log.find("LD_LIBRARY_PATH='/jail/lib'") != std::string::npos);
  CHECK(out->log.find("secret") == std::string::npos);
  CHECK(out->log.find("PTXBENCH_") == std::string::npos);
  unsetenv("PTXBENCH_ADMIN_TOKEN");
  unsetenv("PTXBENCH_DATABASE_URL");
  unsetenv("PTXBENCH_TOKEN");
  std::remove(script.c_str());
  rmdir(dir);
}

TEST_CASE("Limits: size, NUL bytes, time, log and module size") {
  CompileRequest big = Request(std::string(2 << 20, ' '), "sm_90a");
  CompileResult result = MustCompile(big);
  CHECK(result.failure == CompileFailure::kSourceRejected);
  CHECK(result.log == "submission.cu: the source is 2097152 bytes; the limit is 1048576\n");

  result =
      MustCompile(Request(std::string("extern \"C\" __global__ void k() {}\0junk", 39), "sm_90a"));
  CHECK(result.failure == CompileFailure::kSourceRejected);
  CHECK(result.log == "submission.cu: the source contains a NUL byte at offset 33\n");

  CompileRequest hurried = Request(kWgmmaKernel, "sm_90a");
  hurried.limits.max_seconds = 1e-9;
  result = MustCompile(hurried);
  CHECK_FALSE(result.ok);
  CHECK(result.failure == CompileFailure::kTimeout);

  CompileRequest tiny_module = Request(kWgmmaKernel, "sm_90a");
  tiny_module.limits.max_cubin_bytes = 100;
  result = MustCompile(tiny_module);
  CHECK_FALSE(result.ok);
  CHECK(result.failure == CompileFailure::kOutputTooLarge);
  CHECK(result.cubin.empty());
  CHECK(result.log.find("bytes; the limit is 100") != std::string::npos);

  std::string many_kernels;
  for (int i = 0; i < 65; ++i) {
    many_kernels += "extern \"C\" __global__ void k" + std::to_string(i) +
                    "(int* p) { p[0] = " + std::to_string(i) + "; }\n";
  }
  result = MustCompile(Request(many_kernels, "sm_90a"));
  CHECK(result.failure == CompileFailure::kOutputTooLarge);
  CHECK(result.kernels.empty());
  CHECK(result.cubin.empty());
  CHECK(result.log.find("the module defines 65 kernels; the limit is 64") != std::string::npos);

  std::string many_errors;
  for (int i = 0; i < 200; ++i)
    many_errors +=
        "int f" + std::to_string(i) + "() { return missing_" + std::to_string(i) + "; }\n";
  CompileRequest noisy = Request(many_errors, "sm_90a");
  noisy.limits.max_log_bytes = 2000;
  result = MustCompile(noisy);
  CHECK(result.failure == CompileFailure::kFrontend);
  CHECK(result.log.size() < 2100);
  CHECK(result.log.find("[log truncated: ") != std::string::npos);
}

TEST_CASE("Caller mistakes are errors, not verdicts") {
  CompileRequest request = Request(kWgmmaKernel, "sm_80");
  CHECK(Compile(request).status().message() == "unknown arch 'sm_80' (known: sm_90a, sm_100a)");
  request = Request(kWgmmaKernel, "sm_90a");
  request.options = {"-I/usr/include"};
  CHECK(Compile(request).status().code() == absl::StatusCode::kInvalidArgument);
  request.options = {"-maxrregcount=7"};
  CHECK(Compile(request).status().message() ==
        "compile option '-maxrregcount=7': the register count must be 16..255");
  request.options = {};
  request.headers["../up.cuh"] = "";
  CHECK(Compile(request).status().message() == "header name '../up.cuh' has a '..' component");
  request.headers.erase("../up.cuh");
  request.headers["/abs.cuh"] = "";
  CHECK(Compile(request).status().message() == "header name '/abs.cuh' is not a relative name");
}

TEST_CASE("Allowed options reach the compilers") {
  CompileRequest request = Request(kWgmmaKernel, "sm_90a");
  request.options = {"-maxrregcount=32", "--use_fast_math", "-DEXTRA=1"};
  const CompileResult result = MustCompile(request);
  REQUIRE(result.ok);
  CHECK(Kernel(result, "gemm_kernel")->resources.registers <= 32);
  CHECK(result.ptxas_options.back() == "-maxrregcount=32");
}

TEST_CASE("Spills, stack frames and wgmma serialization advisories are reported") {
  // A dynamically indexed local array too large for registers lives in local memory: a stack
  // frame of 256 floats (ptxas keeps a 64-float one in 72 registers, measured).
  const CompileResult stack = MustCompile(Request(R"(
extern "C" __global__ void local_array(float* out, int k) {
  float buffer[256];
  for (int i = 0; i < 256; ++i) buffer[i] = out[i * k];
  out[threadIdx.x] = buffer[(threadIdx.x * k) % 256];
})",
                                                  "sm_90a"));
  REQUIRE(stack.ok);
  CHECK(stack.kernels[0].resources.stack_frame_bytes == 1024);

  // A non-wgmma instruction redefines the accumulator between two wgmmas of one group.
  const CompileResult serialized = MustCompile(Request(R"(
extern "C" __global__ void serialized(float* out, unsigned long long da, unsigned long long db) {
  float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  for (int i = 0; i < 4; ++i) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %6, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0,%1,%2,%3}, %4, %5, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "l"(da + i), "l"(db), "r"(1));
    d0 = d0 * 2.0f + out[i];
  }
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  out[threadIdx.x] = d0 + d1 + d2 + d3;
})",
                                                       "sm_90a"));
  REQUIRE(serialized.ok);
  bool advisory = false;
  for (const std::string& line : serialized.ptxas_diagnostics) {
    if (line.find("wgmma.mma_async instructions are serialized") != std::string::npos)
      advisory = true;
  }
  CHECK(advisory);
  CHECK(serialized.ptx_families.at("wgmma") >= 1);  // Static count: NVRTC may unroll the loop.
}

TEST_CASE("Host paths are scrubbed from compiler output") {
  CHECK(ScrubHostPaths("/usr/local/cuda/include/cuda.h(12): error") == "<path>(12): error");
  CHECK(ScrubHostPaths("could not open \"/etc/passwd\"") == "could not open \"<path>\"");
  CHECK(ScrubHostPaths("x = M/128/2; y = a / b;") == "x = M/128/2; y = a / b;");
  CHECK(ScrubHostPaths("(M/2)/4") == "(M/2)/4");
  CHECK(ScrubHostPaths("submission.cu(3): error") == "submission.cu(3): error");
  CHECK(TrimLog("a\nbb\nccc\n", 5) == "a\nbb\n[log truncated: 4 more bytes]\n");
  CHECK(TrimLog("short\n", 100) == "short\n");
}

}  // namespace
}  // namespace ptxbench
