// cuBLASLt block-scaled fp8 GEMM baseline (the DeepSeek-V3 / DeepGEMM recipe): e4m3 A with one
// fp32 scale per 1 x 128 block of a row, e4m3 B with one per 128 x 128 block, bf16 C, fp32
// accumulation. The only file besides cublaslt_baseline.cc that includes cublasLt.h; it is kept
// apart because its descriptors (scale modes, scale pointers that change per call) differ.
//
// The task's tensors (tasks/gemm_fp8bs_n7168_k16384/task.json), all row-major:
//   A  [M, K] e4m3,  SA [ceil(K/128), M] fp32 (SA[kb][m]: M contiguous),
//   B  [N, K] e4m3,  SB [ceil(N/128), 4*ceil(K/512)] fp32 (SB[nb][kb]: K blocks contiguous, the
//                    row padded to a multiple of 4 floats = 16 bytes),
//   C  [M, N] bf16;  C[m][n] = Σ_kb SA[kb][m] · SB[n/128][kb] · Σ_{k in kb} A[m][k] · B[n][k].
// In cuBLASLt's column-major terms, as in the bf16 GEMM: Cᵀ (N×M, ld N) = op_T(B as K×N, ld K)
// · op_N(A as K×M, ld K), so cuBLAS's A is our B with the 128 x 128 mode and cuBLAS's B is our A
// with the VEC128 mode. The scale layouts are the ones PyTorch hands cuBLASLt unchanged for its
// 1x128 x 128x128 recipe (test_matmul_cuda.py, test_scaled_mm_vs_emulated_block_wise: the 1x128
// scales "outer-dim-major", stride (1, M); the 128x128 ones with the K-block stride rounded up
// to a multiple of 4). gpu_runtime_test "cuBLASLt's block-scaled fp8 GEMM ..." checks them on
// the H200 against the fp64 reference and reports which layout cuBLASLt reads.
#include <cublasLt.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "worker/engine/gpu/baseline.h"
#include "worker/engine/gpu/cublaslt_algorithm.h"
#include "worker/engine/gpu/runtime.h"

namespace ptxbench::gpu {
namespace {

#define PTXBENCH_CUBLAS_TRY(call)                                                     \
  do {                                                                                \
    const cublasStatus_t ptxbench_cublas_s_ = (call);                                 \
    if (ptxbench_cublas_s_ != CUBLAS_STATUS_SUCCESS) {                                \
      return absl::InternalError(absl::StrCat(#call, " at ", __FILE__, ":", __LINE__, \
                                              ": cublas status ",                     \
                                              static_cast<int>(ptxbench_cublas_s_))); \
    }                                                                                 \
  } while (false)

// 32 MiB: cuBLAS's recommended workspace on Hopper, as for the bf16 GEMM.
constexpr size_t kWorkspaceBytes = 32u << 20;

class CublasLtFp8BlockScaledGemm final : public Baseline {
 public:
  static absl::StatusOr<std::vector<std::unique_ptr<Baseline>>> CreateRanked(int64_t m, int64_t n,
                                                                             int64_t k,
                                                                             size_t max_results) {
    if (m <= 0 || n <= 0 || k <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("block-scaled fp8 GEMM needs positive M, N, K; got ", m, ", ", n, ", ", k));
    }
    auto workspace = std::make_shared<DeviceBuffer>();
    ASSIGN_OR_RETURN(*workspace, DeviceBuffer::Allocate(kWorkspaceBytes));
    std::unique_ptr<CublasLtFp8BlockScaledGemm> first;
    ASSIGN_OR_RETURN(first, NewDescriptors(m, n, k, workspace));
    std::vector<cublasLtMatmulHeuristicResult_t> results(std::max<size_t>(max_results, 1));
    cublasLtMatmulPreference_t pref = nullptr;
    PTXBENCH_CUBLAS_TRY(cublasLtMatmulPreferenceCreate(&pref));
    size_t ws = kWorkspaceBytes;
    cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    int found = 0;
    if (s == CUBLAS_STATUS_SUCCESS) {
      s = cublasLtMatmulAlgoGetHeuristic(first->handle_, first->op_, first->layout_b_,
                                         first->layout_a_, first->layout_c_, first->layout_c_, pref,
                                         static_cast<int>(results.size()), results.data(), &found);
    }
    cublasLtMatmulPreferenceDestroy(pref);
    PTXBENCH_CUBLAS_TRY(s);
    if (found == 0) {
      return absl::InternalError(absl::StrCat(
          "cuBLASLt found no algorithm for the block-scaled fp8 GEMM (e4m3, VEC128_32F x "
          "BLK128x128_32F scales, bf16 out) at M=",
          m, " N=", n, " K=", k));
    }
    std::vector<std::unique_ptr<Baseline>> ranked;
    for (int rank = 0; rank < found; ++rank) {
      std::unique_ptr<CublasLtFp8BlockScaledGemm> g;
      if (rank == 0) {
        g = std::move(first);
      } else {
        ASSIGN_OR_RETURN(g, NewDescriptors(m, n, k, workspace));
      }
      g->heuristic_ = results[static_cast<size_t>(rank)];
      g->rank_ = rank;
      ranked.push_back(std::move(g));
    }
    return ranked;
  }

  ~CublasLtFp8BlockScaledGemm() override {
    if (layout_a_) cublasLtMatrixLayoutDestroy(layout_a_);
    if (layout_b_) cublasLtMatrixLayoutDestroy(layout_b_);
    if (layout_c_) cublasLtMatrixLayoutDestroy(layout_c_);
    if (op_) cublasLtMatmulDescDestroy(op_);
    if (handle_) cublasLtDestroy(handle_);
  }

  // Inputs A, SA, B, SB (the task's order), output C.
  absl::Status Run(const std::vector<const void*>& inputs, const std::vector<void*>& outputs,
                   cudaStream_t stream) override {
    if (inputs.size() != 4 || outputs.size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          kGemmFp8BlockScaledOperation, " takes inputs A, SA, B, SB and output C; got ",
          inputs.size(), " inputs and ", outputs.size(), " outputs"));
    }
    // The scale pointers live in the descriptor: set per call (host-side attribute writes), so
    // one descriptor and algorithm serve every draw's buffers.
    const void* scale_of_our_b = inputs[3];  // cuBLAS's A.
    const void* scale_of_our_a = inputs[1];  // cuBLAS's B.
    PTXBENCH_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                                       &scale_of_our_b, sizeof scale_of_our_b));
    PTXBENCH_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                                       &scale_of_our_a, sizeof scale_of_our_a));
    const float alpha = 1.0f, beta = 0.0f;
    PTXBENCH_CUBLAS_TRY(cublasLtMatmul(handle_, op_, &alpha, inputs[2], layout_b_, inputs[0],
                                       layout_a_, &beta, outputs[0], layout_c_, outputs[0],
                                       layout_c_, &heuristic_.algo, workspace_->get(),
                                       kWorkspaceBytes, stream));
    return absl::OkStatus();
  }

  nlohmann::json Describe() const override {
    return nlohmann::json{{"library", "cublaslt"},
                          {"version", cublasLtGetVersion()},
                          {"operation", kGemmFp8BlockScaledOperation},
                          {"layout", "TN (C^T = B·A^T column-major)"},
                          {"types", "e4m3 x e4m3 -> bf16"},
                          {"scale_modes", "A: VEC128_32F (cuBLAS B), B: BLK128x128_32F (cuBLAS A)"},
                          {"compute", "CUBLAS_COMPUTE_32F"},
                          {"fast_accum", 0},
                          {"algorithm", absl::StrCat("heuristic #", rank_)},
                          {"algorithm_config", CublasLtAlgorithmConfig(heuristic_.algo)},
                          {"heuristic_workspace_bytes", heuristic_.workspaceSize},
                          {"workspace_bytes", kWorkspaceBytes},
                          {"m", m_},
                          {"n", n_},
                          {"k", k_}};
  }

 private:
  CublasLtFp8BlockScaledGemm() = default;

  static absl::StatusOr<std::unique_ptr<CublasLtFp8BlockScaledGemm>> NewDescriptors(
      int64_t m, int64_t n, int64_t k, std::shared_ptr<DeviceBuffer> workspace) {
    std::unique_ptr<CublasLtFp8BlockScaledGemm> g(new CublasLtFp8BlockScaledGemm());
    g->m_ = m;
    g->n_ = n;
    g->k_ = k;
    g->workspace_ = std::move(workspace);
    PTXBENCH_CUBLAS_TRY(cublasLtCreate(&g->handle_));
    PTXBENCH_CUBLAS_TRY(cublasLtMatmulDescCreate(&g->op_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
    PTXBENCH_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(g->op_, CUBLASLT_MATMUL_DESC_TRANSA, &transa,
                                                       sizeof transa));
    PTXBENCH_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(g->op_, CUBLASLT_MATMUL_DESC_TRANSB, &transb,
                                                       sizeof transb));
    // Fast accumulation off: every partial sum promoted to fp32, the work the task asks for
    // (PyTorch refuses fast accumulation with these scale modes for the same reason).
    const int8_t fast_accum = 0;
    PTXBENCH_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(g->op_, CUBLASLT_MATMUL_DESC_FAST_ACCUM,
                                                       &fast_accum, sizeof fast_accum));
    // int32_t, as cublasLt.h documents the attributes.
    const int32_t mode_a = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
    const int32_t mode_b = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    PTXBENCH_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(g->op_, CUBLASLT_MATMUL_DESC_A_SCALE_MODE,
                                                       &mode_a, sizeof mode_a));
    PTXBENCH_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(g->op_, CUBLASLT_MATMUL_DESC_B_SCALE_MODE,
                                                       &mode_b, sizeof mode_b));
    // Some scale pointer must be set while the heuristic runs (NVIDIA's LtBlk128x128Fp8Matmul
    // sample sets them first); the workspace's address stands in until Run sets the real ones.
    const void* placeholder = g->workspace_->get();
    PTXBENCH_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(g->op_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                                       &placeholder, sizeof placeholder));
    PTXBENCH_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(g->op_, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                                       &placeholder, sizeof placeholder));
    PTXBENCH_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&g->layout_b_, CUDA_R_8F_E4M3, k, n, k));
    PTXBENCH_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&g->layout_a_, CUDA_R_8F_E4M3, k, m, k));
    PTXBENCH_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&g->layout_c_, CUDA_R_16BF, n, m, n));
    return g;
  }

  int rank_ = 0;
  int64_t m_ = 0, n_ = 0, k_ = 0;
  cublasLtHandle_t handle_ = nullptr;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t layout_a_ = nullptr, layout_b_ = nullptr, layout_c_ = nullptr;
  cublasLtMatmulHeuristicResult_t heuristic_{};
  std::shared_ptr<DeviceBuffer> workspace_;
};

absl::StatusOr<int64_t> Axis(const std::map<std::string, int64_t>& axes, const char* name) {
  auto it = axes.find(name);
  if (it == axes.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(kGemmFp8BlockScaledOperation, ": axis ", name, " missing"));
  }
  return it->second;
}

}  // namespace

absl::StatusOr<std::vector<std::unique_ptr<Baseline>>> CreateCublasLtFp8BlockScaledGemmCandidates(
    const std::map<std::string, int64_t>& axes, size_t max_candidates) {
  ASSIGN_OR_RETURN(int64_t m, Axis(axes, "M"));
  ASSIGN_OR_RETURN(int64_t n, Axis(axes, "N"));
  ASSIGN_OR_RETURN(int64_t k, Axis(axes, "K"));
  return CublasLtFp8BlockScaledGemm::CreateRanked(m, n, k, max_candidates);
}

absl::StatusOr<std::unique_ptr<Baseline>> CreateCublasLtFp8BlockScaledGemm(
    const std::map<std::string, int64_t>& axes) {
  ASSIGN_OR_RETURN(auto ranked, CreateCublasLtFp8BlockScaledGemmCandidates(axes, 1));
  return std::move(ranked.front());
}

}  // namespace ptxbench::gpu
