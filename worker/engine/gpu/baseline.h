// The frontier-library baseline of a task: what the reference outputs come from, and what the
// candidate is timed against. Each library sits behind this interface in its own .cc
// (cublaslt_baseline.cc and cublaslt_fp8_baseline.cc, cudnn_sdpa_baseline.cc); their headers
// never leak.
#ifndef PTXBENCH_WORKER_ENGINE_GPU_BASELINE_H_
#define PTXBENCH_WORKER_ENGINE_GPU_BASELINE_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace ptxbench::gpu {

class Baseline {
 public:
  virtual ~Baseline() = default;
  // Inputs and outputs in the task's tensor order (inputs first, then outputs), device
  // pointers of the shapes the workload's axes give. Asynchronous on `stream`.
  virtual absl::Status Run(const std::vector<const void*>& inputs,
                           const std::vector<void*>& outputs, cudaStream_t stream) = 0;
  // Library, version, algorithm: recorded in every verdict's audit report.
  virtual nlohmann::json Describe() const = 0;
  // Fills the library path's own intermediate buffers that an output is derived from (cuDNN's
  // e4m3 O before its conversion) with a pattern that decodes to NaN, so that a part the
  // library leaves unwritten shows as non-finite instead of as stale data. The reference
  // process calls it before every run; never inside a timed region. Asynchronous on `stream`.
  virtual absl::Status PoisonScratch(cudaStream_t /*stream*/) { return absl::OkStatus(); }
};

// `library`/`operation` as task.json names them ("cublaslt"/"gemm_a_bt_bf16"); `axes` are the
// workload's. Unimplemented for a pair this build does not provide.
absl::StatusOr<std::unique_ptr<Baseline>> CreateBaseline(
    const std::string& library, const std::string& operation,
    const std::map<std::string, int64_t>& axes);

// The library's candidate algorithms for the operation and shape, in the library heuristic's
// order, at most `max_candidates` (at least one): index 0 is what CreateBaseline gives. The fair
// baseline (issue 16, protocol_messages.h BaselineSelection) times them and keeps the fastest.
absl::StatusOr<std::vector<std::unique_ptr<Baseline>>> CreateBaselineCandidates(
    const std::string& library, const std::string& operation,
    const std::map<std::string, int64_t>& axes, size_t max_candidates);

// Versions of every baseline library linked into this build ({"cublaslt": 130100, "cudnn":
// 91900}): part of the reference cache key.
nlohmann::json BaselineLibraryVersions();

// task.json `baseline.operation` of the block-scaled fp8 GEMM (cuBLASLt): inputs A [M, K] e4m3,
// SA [ceil(K/128), M] fp32, B [N, K] e4m3, SB [ceil(N/128), 4*ceil(K/512)] fp32; output C [M, N]
// bf16 (cublaslt_fp8_baseline.cc says why these layouts).
inline constexpr char kGemmFp8BlockScaledOperation[] = "gemm_fp8_blockscaled_a_bt";

// Implemented in cublaslt_baseline.cc: "gemm_a_bt_bf16", and kGemmFp8BlockScaledOperation by
// the two functions below.
absl::StatusOr<std::unique_ptr<Baseline>> CreateCublasLtGemm(
    const std::string& operation, const std::map<std::string, int64_t>& axes);

// Implemented in cublaslt_fp8_baseline.cc.
absl::StatusOr<std::unique_ptr<Baseline>> CreateCublasLtFp8BlockScaledGemm(
    const std::map<std::string, int64_t>& axes);
absl::StatusOr<std::vector<std::unique_ptr<Baseline>>> CreateCublasLtFp8BlockScaledGemmCandidates(
    const std::map<std::string, int64_t>& axes, size_t max_candidates);

// task.json `baseline.operation` of the paged GQA decode (cuDNN, gqa_paged_decode tasks): axes
// B, HQ, HK, D, PS, PPS, NP; inputs Q [B, HQ, D] bf16, K_cache and V_cache [NP, HK, PS, D] bf16,
// page_table [B, PPS] int32 (page_table[b][j] holds tokens j·PS .. j·PS+PS-1 of sequence b),
// seq_lens [B] int32 (1 .. PPS·PS); outputs O [B, HQ, D] bf16 and LSE [B, HQ] fp32 (natural
// log). Query head h attends with key/value head h / (HQ / HK); scale 1/sqrt(D).
inline constexpr char kSdpaPagedDecodeOperation[] = "sdpa_paged_decode_bf16";

// task.json `baseline.operation` of the fp8 attention forward (cuDNN, mha_fp8_with_lse_d128):
// inputs Q, K, V [B, H, S, D] fp8 e4m3, descale_q, descale_k, descale_v [1] fp32; outputs O
// [B, H, S, D] bf16 and LSE [B, H, S] fp32 of the dequantized logits scale · descale_q ·
// descale_k · Q·Kᵀ (scale 1/sqrt(D)), O = descale_v · softmax · V. cuDNN quantizes P to e4m3
// (scale 256) and, on Hopper, O to e4m3 before a conversion kernel (cudnn_sdpa_baseline.cc).
inline constexpr char kSdpaFp8ForwardOperation[] = "sdpa_fwd_fp8";

// task.json `baseline.operation` of the fp8 attention forward today: the same inputs, outputs
// and computation as kSdpaFp8ForwardOperation, done as Q, K, V dequantized to bf16 (e4m3 times
// its descale is exact in bf16) followed by cuDNN's bf16 forward, so P is bf16, not e4m3.
// Why: cuDNN 9.14's fp8 forward on sm_90 did not reproduce its own output in the evaluator on
// the H100 (2026-12-06: consecutive runs on the same inputs disagreed in 128-row blocks by up to
// a relative norm of ~7; docs/task-authoring.md), and a reference must reproduce itself. The
// path is slower (2.4 ms + the dequantization against the fp8 forward's 1.7 ms on the timed
// shape), which every verdict's baseline description says (Describe()).
inline constexpr char kSdpaFp8DequantForwardOperation[] = "sdpa_fwd_fp8_dequant_bf16";

// Implemented in cudnn_sdpa_baseline.cc: "sdpa_fwd_bf16[_causal]" (inputs Q, K, V; outputs O
// and LSE, the natural-log log-sum-exp of each scaled row) and "sdpa_bwd_bf16[_causal]" (inputs
// Q, K, V, O, dO, LSE; outputs dQ, dK, dV), all [B, H, S, D] bf16 with LSE [B, H, S] fp32 and
// scale 1/sqrt(D); and kSdpaPagedDecodeOperation (its own file would have to repeat the backend
// graph builder, or expose cuDNN's types in a header), and kSdpaFp8ForwardOperation. Plans are
// built once per operation and shape in a process.
absl::StatusOr<std::unique_ptr<Baseline>> CreateCudnnSdpa(
    const std::string& operation, const std::map<std::string, int64_t>& axes);
// Candidates of the two libraries (cuBLASLt: the heuristic's ranked results; cuDNN: the
// configurations of the heuristic's list that finalize, in its order).
absl::StatusOr<std::vector<std::unique_ptr<Baseline>>> CreateCublasLtGemmCandidates(
    const std::string& operation, const std::map<std::string, int64_t>& axes,
    size_t max_candidates);
absl::StatusOr<std::vector<std::unique_ptr<Baseline>>> CreateCudnnSdpaCandidates(
    const std::string& operation, const std::map<std::string, int64_t>& axes,
    size_t max_candidates);
// cudnnGetVersion() of the library loaded at run time (91900 for 9.19.0).
int64_t CudnnVersion();

}  // namespace ptxbench::gpu

#endif  // PTXBENCH_WORKER_ENGINE_GPU_BASELINE_H_
