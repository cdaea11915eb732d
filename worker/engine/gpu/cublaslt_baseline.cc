// cuBLASLt GEMM baselines: the bf16 one here, the block-scaled fp8 one in
// cublaslt_fp8_baseline.cc (the only other file that includes cublasLt.h).
#include <cublasLt.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "worker/engine/gpu/baseline.h"
#include "worker/engine/gpu/cublaslt_algorithm.h"
#include "worker/engine/gpu/cuda_check.h"
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

// 32 MiB: cuBLAS's recommended workspace on Hopper; the heuristic may use up to this much.
constexpr size_t kWorkspaceBytes = 32u << 20;

// C = A·Bᵀ with A (M×K) and B (N×K) row-major (K contiguous) and C (M×N) row-major. In
// cuBLASLt's column-major terms that is Cᵀ (N×M, ld N) = op_T(B as K×N, ld K) · op_N(A as K×M,
// ld K): the "TN" layout, cuBLAS's fastest for bf16 on Hopper. The algorithm is the heuristic's
// first choice, as the library's own callers get it; on the H200 it ran 0.749 ms for
// 8192×7168×5120 (803 TFLOP/s, burst), torch.matmul 0.823 ms median in the same call.
class CublasLtGemmABt final : public Baseline {
 public:
  // The heuristic's results for the shape, best first, at most `max_results`: what
  // cublasLtMatmulAlgoGetHeuristic ranks for this GPU within the workspace.
  static absl::StatusOr<std::vector<std::unique_ptr<Baseline>>> CreateRanked(int64_t m, int64_t n,
                                                                             int64_t k,
                                                                             size_t max_results) {
    // One workspace for every candidate: they run one at a time on one stream.
    auto workspace = std::make_shared<DeviceBuffer>();
    ASSIGN_OR_RETURN(*workspace, DeviceBuffer::Allocate(kWorkspaceBytes));
    std::unique_ptr<CublasLtGemmABt> first;
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
    if (found == 0) return absl::InternalError("cuBLASLt found no algorithm for the GEMM");
    std::vector<std::unique_ptr<Baseline>> ranked;
    for (int rank = 0; rank < found; ++rank) {
      std::unique_ptr<CublasLtGemmABt> g;
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

  static absl::StatusOr<std::unique_ptr<Baseline>> Create(int64_t m, int64_t n, int64_t k) {
    ASSIGN_OR_RETURN(auto ranked, CreateRanked(m, n, k, 1));
    return std::move(ranked.front());
  }

  ~CublasLtGemmABt() override {
    if (layout_a_) cublasLtMatrixLayoutDestroy(layout_a_);
    if (layout_b_) cublasLtMatrixLayoutDestroy(layout_b_);
    if (layout_c_) cublasLtMatrixLayoutDestroy(layout_c_);
    if (op_) cublasLtMatmulDescDestroy(op_);
    if (handle_) cublasLtDestroy(handle_);
  }

  absl::Status Run(const std::vector<const void*>& inputs, const std::vector<void*>& outputs,
                   cudaStream_t stream) override {
    if (inputs.size() != 2 || outputs.size() != 1) {
      return absl::InvalidArgumentError("gemm_a_bt_bf16 takes inputs A, B and output C");
    }
    const float alpha = 1.0f, beta = 0.0f;
    PTXBENCH_CUBLAS_TRY(cublasLtMatmul(handle_, op_, &alpha, inputs[1], layout_b_, inputs[0],
                                       layout_a_, &beta, outputs[0], layout_c_, outputs[0],
                                       layout_c_, &heuristic_.algo, workspace_->get(),
                                       kWorkspaceBytes, stream));
    return absl::OkStatus();
  }

  nlohmann::json Describe() const override {
    return nlohmann::json{{"library", "cublaslt"},
                          {"version", cublasLtGetVersion()},
                          {"operation", "gemm_a_bt_bf16"},
                          {"layout", "TN (C^T = B·A^T column-major)"},
                          {"compute", "CUBLAS_COMPUTE_32F"},
                          {"algorithm", absl::StrCat("heuristic #", rank_)},
                          {"algorithm_config", CublasLtAlgorithmConfig(heuristic_.algo)},
                          {"heuristic_workspace_bytes", heuristic_.workspaceSize},
                          {"workspace_bytes", kWorkspaceBytes},
                          {"m", m_},
                          {"n", n_},
                          {"k", k_}};
  }

 private:
  CublasLtGemmABt() = default;

  // The handle and descriptors of C = A·Bᵀ for the shape; the algorithm is set by the caller.
  static absl::StatusOr<std::unique_ptr<CublasLtGemmABt>> NewDescriptors(
      int64_t m, int64_t n, int64_t k, std::shared_ptr<DeviceBuffer> workspace) {
    std::unique_ptr<CublasLtGemmABt> g(new CublasLtGemmABt());
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
    PTXBENCH_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&g->layout_b_, CUDA_R_16BF, k, n, k));
    PTXBENCH_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&g->layout_a_, CUDA_R_16BF, k, m, k));
    PTXBENCH_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&g->layout_c_, CUDA_R_16BF, n, m, n));
    return g;
  }

  int rank_ = 0;  // Position in the heuristic's list.
  int64_t m_ = 0, n_ = 0, k_ = 0;
  cublasLtHandle_t handle_ = nullptr;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t layout_a_ = nullptr, layout_b_ = nullptr, layout_c_ = nullptr;
  cublasLtMatmulHeuristicResult_t heuristic_{};
  std::shared_ptr<DeviceBuffer> workspace_;
};

absl::StatusOr<int64_t> Axis(const std::map<std::string, int64_t>& axes, const char* name) {
  auto it = axes.find(name);
  if (it == axes.end()) return absl::InvalidArgumentError(absl::StrCat("axis ", name, " missing"));
  return it->second;
}

}  // namespace

nlohmann::json CublasLtAlgorithmConfig(const cublasLtMatmulAlgo_t& algo) {
  nlohmann::json config;
  auto attribute = [&](cublasLtMatmulAlgoConfigAttributes_t which, const char* name) {
    // The size must match the attribute's own (2-4 bytes here): asked first, with size 0.
    size_t size = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(&algo, which, nullptr, 0, &size) !=
            CUBLAS_STATUS_SUCCESS ||
        size == 0 || size > sizeof(uint64_t)) {
      return;
    }
    uint64_t value = 0;  // Little-endian: the low `size` bytes hold the value.
    size_t written = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(&algo, which, &value, size, &written) ==
            CUBLAS_STATUS_SUCCESS &&
        written == size) {
      config[name] = value;
    }
  };
  attribute(CUBLASLT_ALGO_CONFIG_ID, "id");
  attribute(CUBLASLT_ALGO_CONFIG_TILE_ID, "tile");
  attribute(CUBLASLT_ALGO_CONFIG_STAGES_ID, "stages");
  attribute(CUBLASLT_ALGO_CONFIG_SPLITK_NUM, "split_k");
  attribute(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, "cta_swizzling");
  attribute(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, "cluster_shape");
  return config;
}

absl::StatusOr<std::unique_ptr<Baseline>> CreateCublasLtGemm(
    const std::string& operation, const std::map<std::string, int64_t>& axes) {
  if (operation == kGemmFp8BlockScaledOperation) return CreateCublasLtFp8BlockScaledGemm(axes);
  if (operation != "gemm_a_bt_bf16") {
    return absl::UnimplementedError(
        absl::StrCat("cuBLASLt baseline '", operation, "' is not implemented"));
  }
  ASSIGN_OR_RETURN(int64_t m, Axis(axes, "M"));
  ASSIGN_OR_RETURN(int64_t n, Axis(axes, "N"));
  ASSIGN_OR_RETURN(int64_t k, Axis(axes, "K"));
  return CublasLtGemmABt::Create(m, n, k);
}

absl::StatusOr<std::vector<std::unique_ptr<Baseline>>> CreateCublasLtGemmCandidates(
    const std::string& operation, const std::map<std::string, int64_t>& axes,
    size_t max_candidates) {
  if (operation == kGemmFp8BlockScaledOperation) {
    return CreateCublasLtFp8BlockScaledGemmCandidates(axes, max_candidates);
  }
  if (operation != "gemm_a_bt_bf16") {
    return absl::UnimplementedError(
        absl::StrCat("cuBLASLt baseline '", operation, "' is not implemented"));
  }
  ASSIGN_OR_RETURN(int64_t m, Axis(axes, "M"));
  ASSIGN_OR_RETURN(int64_t n, Axis(axes, "N"));
  ASSIGN_OR_RETURN(int64_t k, Axis(axes, "K"));
  return CublasLtGemmABt::CreateRanked(m, n, k, max_candidates);
}

absl::StatusOr<std::vector<std::unique_ptr<Baseline>>> CreateBaselineCandidates(
    const std::string& library, const std::string& operation,
    const std::map<std::string, int64_t>& axes, size_t max_candidates) {
  if (library == "cublaslt") return CreateCublasLtGemmCandidates(operation, axes, max_candidates);
  if (library == "cudnn") return CreateCudnnSdpaCandidates(operation, axes, max_candidates);
  return absl::UnimplementedError(
      absl::StrCat("baseline library '", library, "' is not implemented"));
}

nlohmann::json BaselineLibraryVersions() {
  return nlohmann::json{{"cublaslt", cublasLtGetVersion()}, {"cudnn", CudnnVersion()}};
}

absl::StatusOr<std::unique_ptr<Baseline>> CreateBaseline(
    const std::string& library, const std::string& operation,
    const std::map<std::string, int64_t>& axes) {
  if (library == "cublaslt") return CreateCublasLtGemm(operation, axes);
  if (library == "cudnn") return CreateCudnnSdpa(operation, axes);
  return absl::UnimplementedError(
      absl::StrCat("baseline library '", library, "' is not implemented in this build"));
}

}  // namespace ptxbench::gpu
