// A compile of one submission made by another worker (a compile-only worker's compile job),
// handed by the server to the GPU worker of the submission's evaluate job so that it need not
// compile the source again (issue 16: 0.4-1.0 s per evaluation on the H200).
//
// Threat model (docs/architecture.md, "Compile artifact reuse"): the producing worker holds a
// worker token of the lab, but a compromised one must not make a GPU worker run a module that
// is not the submission's. So the GPU worker
//  - refuses an artifact whose toolchain (NVRTC, ptxas, harness versions) is not the one this
//    worker compiles with (CompileCache::Toolchain(): its latest real compile; unknown before
//    the first, so the first artifact is always refused), whose bytes do not hash to its
//    SHA-256s, or whose compile event disagrees with its own fields (CheckArtifact);
//  - with probability `verify_fraction`, drawn from its own secret randomness, compiles the
//    source itself and compares (CompareWithOwnCompile): its own compile is the verdict's, and a
//    difference is reported as a mismatch, which makes the server distrust the producer and
//    re-judge the verdicts that used its artifacts unverified;
//  - never puts another worker's artifact into its compile cache: an entry there is served to
//    any later job of the same inputs, a re-judge round opened because its producer was
//    distrusted included (evaluate.cc, CompileStage, uses it for the one job it came with).
// Residual risk: a producer that forges t artifacts escapes with probability (1 - p)^t, a
// single targeted forgery with 1 - p (p = verify_fraction).
#ifndef PTXBENCH_WORKER_ENGINE_COMPILE_ARTIFACT_H_
#define PTXBENCH_WORKER_ENGINE_COMPILE_ARTIFACT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace ptxbench::gpu {
struct CompileEvent;  // worker/engine/gpu/protocol_messages.h
}  // namespace ptxbench::gpu

namespace ptxbench::engine {

// A successful compile, as one worker exports it and another receives it
// (ptxbench.v1.CompileArtifact).
struct CompileArtifact {
  std::string cubin;
  std::string ptx;
  std::string cubin_sha256;  // Hex; the producer's claim, checked by whoever uses the bytes.
  std::string ptx_sha256;
  std::string compile_event_json;  // The compile process's event, module paths cleared.
  std::string nvrtc_version;
  std::string ptxas_version;
  std::string harness_version;
  // Set by the server when it hands the artifact out: the compile job and the worker that
  // produced it, for the audit record. Empty in what a worker exports.
  std::string producer_job_id;
  std::string producer_worker_id;
};

// The toolchain a worker compiles with: NVRTC's and ptxas's versions as its latest real compile
// reported them (empty before the first), and its harness version.
struct Toolchain {
  std::string nvrtc_version;
  std::string ptxas_version;
  std::string harness_version;
};

// What the GPU worker did with an artifact (ptxbench.v1.ArtifactOutcome).
enum class ArtifactOutcome {
  kNone,           // Not used and not compared (e.g. this worker's own compile was cut short).
  kUsed,           // The compile stage used it instead of compiling.
  kVerifiedMatch,  // This worker compiled itself and got the same module and compile event.
  kMismatch,       // This worker compiled itself and got something else.
  kRefused,        // Not acceptable here (toolchain, hashes, malformed); compiled itself.
};
std::string ArtifactOutcomeName(ArtifactOutcome outcome);  // "none", "used", ...

struct ArtifactUse {
  ArtifactOutcome outcome = ArtifactOutcome::kNone;
  std::string detail;  // Why, in words (a refusal's reason, a mismatch's differing fields).
};

// OK when `artifact` may be used by a worker with toolchain `own`; otherwise
// FAILED_PRECONDITION saying why (the detail of a refusal).
absl::Status CheckArtifact(const CompileArtifact& artifact, const Toolchain& own);

// Whether to verify an artifact instead of using it: true with probability `fraction`, for a
// `draw` uniform over 64 bits (the caller's secret randomness). 0 never, 1 always.
bool ShouldVerify(double fraction, uint64_t draw);

// The part of a compile event that any two compiles of the same inputs with the same toolchain
// share (compile_artifact_test shows it across processes and directories): the event without
// the figures of the run (seconds, timings, memory, the jail's) and the module's paths.
nlohmann::json ReproducibleCompile(const gpu::CompileEvent& event);

// Compares an artifact that passed CheckArtifact with this worker's own compile of the same
// inputs: kVerifiedMatch, kMismatch naming what differs, or kNone when this worker's compile
// ended in a way that says nothing about the artifact (the compiler timed out, ran out of
// memory or crashed).
ArtifactUse CompareWithOwnCompile(const CompileArtifact& artifact, const gpu::CompileEvent& own);

}  // namespace ptxbench::engine

#endif  // PTXBENCH_WORKER_ENGINE_COMPILE_ARTIFACT_H_
