// The compile stage: a submission's source to PTX (NVRTC) and to a cubin (the ptxas binary, in
// whole-program mode like nvcc; ptxas_runner.h says why not nvJitLink), for the task's arch,
// with nothing of the host reachable from the source and nothing of the host in what comes back.
//
// A source that does not compile is data (CompileResult.ok == false, with the log the model sees
// as feedback); an absl::Status error means the toolchain itself failed and nothing is known
// about the source.
#ifndef PTXBENCH_WORKER_ENGINE_COMPILE_H_
#define PTXBENCH_WORKER_ENGINE_COMPILE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "worker/engine/compile_jail.h"
#include "worker/engine/kernel_info.h"

namespace ptxbench {

enum class SourceLanguage { kCuda, kPtx };

// The limits hold whatever the source does: the compilers run in the compile jail's process,
// which is killed at the deadline and cannot map more than max_memory_bytes (compile_jail.h).
// Measured basis (2026-12-01, this CPU machine, every solution of every task for both arches,
// tests/worker/engine/task_sources_test.cc "Honest compiles ..."; docs/operations.md): the
// slowest compile took 1.6 s (mha_with_lse_d128_causal, sm_90a, on 2 shared cores); NVRTC's
// process peaked at 0.76 GiB of address space inside ptxbench-evaluator (0.63 GiB of it the
// evaluator's own libraries, cuBLASLt alone 0.5 GiB) and 0.15 GiB resident; ptxas at 0.12 GiB
// resident. 30 s is 19x the slowest; 4 GiB is 5x the largest address space and keeps two
// compile bombs at once under 8 GiB of a 24 GiB compile node.
struct CompileLimits {
  double max_seconds = 30;  // CPU seconds of both compilers together.
  // Wall-time backstop of the stage: past it with less than max_seconds of CPU used, the node
  // was overloaded and the compile is an infrastructure error (retried), not a verdict.
  double max_wall_seconds = 120;
  uint64_t max_memory_bytes = 4ull << 30;  // Address space of each compiler process.
  size_t max_log_bytes = 64 << 10;         // The log is cut at a line boundary past this.
  size_t max_cubin_bytes = 64 << 20;       // A larger module is refused.
  // Kernels one module may define: every task's solutions define 1-2, and the compile stage's
  // detail lists each kernel's signature and resources, so a module of thousands of kernels
  // (issue 12) would make an unbounded verdict. 64 is 32x the largest honest module.
  size_t max_kernels = 64;
  size_t max_source_bytes = 1 << 20;  // The API's limit on a submission (vendor.proto).
};

struct CompileRequest {
  std::string source;
  SourceLanguage language = SourceLanguage::kCuda;
  std::string arch;  // "sm_90a" or "sm_100a".
  // The only headers #include can name: include name -> content (TemplateHeaders()).
  std::map<std::string, std::string> headers;
  // Extra options, from a short allow-list: "-maxrregcount=N", "--use_fast_math",
  // "-DNAME" / "-DNAME=VALUE". Anything else is InvalidArgument (a caller bug).
  std::vector<std::string> options;
  CompileLimits limits;
};

// Why a compile failed, for the verdict message and for tests.
enum class CompileFailure {
  kNone,
  kSourceRejected,   // Before any compiler ran: too large, NUL bytes, a refused #include, a PTX
                     // module for another .target.
  kFrontend,         // NVRTC reported errors.
  kAssembler,        // ptxas refused the PTX (e.g. wgmma on sm_100a).
  kTimeout,          // Past limits.max_seconds (the compiler was killed).
  kOutOfMemory,      // A compiler ran out of its limits.max_memory_bytes.
  kCompilerCrashed,  // A compiler died of a signal on this source.
  kOutputTooLarge,   // The cubin exceeds limits.max_cubin_bytes.
};

std::string CompileFailureName(CompileFailure failure);

struct CompileTimings {
  double frontend_seconds = 0;   // NVRTC (0 for PTX sources).
  double assembler_seconds = 0;  // ptxas.
  double total_seconds = 0;
};

// Peak memory of the compilers, for the record and for setting CompileLimits.
struct CompileMemory {
  uint64_t frontend_peak_rss_bytes = 0;      // NVRTC's process (getrusage).
  uint64_t frontend_peak_virtual_bytes = 0;  // Its VmPeak: what RLIMIT_AS limits.
  uint64_t assembler_peak_rss_bytes = 0;     // ptxas (wait4).
};

struct CompileResult {
  bool ok = false;
  CompileFailure failure = CompileFailure::kNone;
  // What the model sees: NVRTC's log, then ptxas's errors and info, with host paths replaced
  // by "<path>" and cut to limits.max_log_bytes.
  std::string log;
  std::string ptx;    // The PTX that was assembled (the source itself for PTX submissions).
  std::string cubin;  // The linked module, when ok.
  // Every .entry of the module with parameters and ptxas resources (resources only when ok).
  std::vector<KernelSignature> kernels;
  // ptxas warnings and coded advisories, e.g. "(C7511) Potential Performance Loss:
  // wgmma.mma_async instructions are serialized due to ...".
  std::vector<std::string> ptxas_diagnostics;
  // Target families whose instructions appear in the PTX: family -> static instruction count.
  // Presence only; the CUPTI stage decides whether they executed.
  std::map<std::string, int> ptx_families;
  CompileTimings timings;
  CompileMemory memory;
  JailReport jail;  // Where the compilers ran (method "none" and why, when not jailed).
  std::string nvrtc_version;
  std::string ptxas_version;               // "13.0.88".
  std::vector<std::string> nvrtc_options;  // As passed, for the audit record.
  std::vector<std::string> ptxas_options;
};

// The compilers run in the compile jail (compile_jail.h; its policy from
// PTXBENCH_COMPILE_JAIL): an error status when the jail is refused and the policy requires it.
absl::StatusOr<CompileResult> Compile(const CompileRequest& request);

// The stage report detail: everything but the PTX and cubin bytes (their sizes and SHA-256
// instead).
nlohmann::json ToJson(const CompileResult& result);

// Replaces absolute host paths in compiler output by "<path>". Exposed for tests.
std::string ScrubHostPaths(const std::string& log);

// Cuts `log` after the last line that fits in `max_bytes` and notes how much was dropped.
std::string TrimLog(const std::string& log, size_t max_bytes);

}  // namespace ptxbench

#endif  // PTXBENCH_WORKER_ENGINE_COMPILE_H_
