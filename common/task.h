// The task model and its loader. A task lives in tasks/<id>/task.json plus the files it names
// (prompts, template headers, solutions, decoys); docs/task-authoring.md is the format's
// reference. A malformed task is rejected at load with the file and the field named.
#ifndef PTXBENCH_COMMON_TASK_H_
#define PTXBENCH_COMMON_TASK_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace ptxbench {

enum class DType { kBF16, kFP16, kFP32, kFP8E4M3, kInt32 };
std::string DTypeName(DType dtype);
int DTypeBytes(DType dtype);
// Dense tensor-core FLOP rate of `operands` relative to bf16, for the roofline floors of the
// engine and the server: 2 for fp8 (H100 SXM datasheet, dense: bf16 989.4, fp8 1978.9
// TFLOP/s; the H200 ran cuBLASLt's block-scaled fp8 GEMM at 1,314 TFLOP/s, above the bf16
// peak, 2026-12-02), 1 otherwise.
double TensorRateOverBf16(DType operands);

enum class TensorRole { kInput, kOutput };

// How inputs are drawn: normal(0,1), or the "spiky" stress distribution
// N(0,1) + N(0,100)·Bernoulli(0.001) of the original benchmark's attention backward.
// kBlockScale: positive fp32 scales of block-quantised fp8 operands, (1 + m/8)·2^e with m in
// 0..7 and e in -10..-4 uniform (worker/engine/gpu/philox.h); fp32 tensors only.
// kPagePermutation, kLengthLadder: the paged tasks' int32 page table and context lengths, with
// parameters (IndexDistributionParams); int32 tensors only.
// kFp8Normal: e4m3 values of N(0, 64^2), saturated at 448 (per-tensor-quantized activations);
// fp8_e4m3 tensors only. kTensorDescale: per-tensor dequantization factors, 8 values from
// 0.75/64 to 1.375/64; fp32 tensors only. Both built from the bits (worker/engine/gpu/philox.h).
enum class Distribution {
  kNormal,
  kSpiky,
  kBlockScale,
  kPagePermutation,
  kLengthLadder,
  kFp8Normal,
  kTensorDescale
};

// The parameters of the integer distributions, as axis expressions evaluated per workload
// (task.json: "distribution": {"kind": "page_permutation", "pages": "NP"} or {"kind":
// "length_ladder", "max": "PPS*PS", "jitter": "PS"}). Empty when the kind has no such parameter.
struct IndexDistributionParams {
  std::string pages;   // page_permutation: the pool size; >= the tensor's element count.
  std::string max;     // length_ladder: the longest length, 1 .. 2^31-1.
  std::string jitter;  // length_ladder: >= 0; each length is shortened by a draw below it.
};

// An input the harness computes instead of drawing it: output `output` of the operation
// `operation` of the task's baseline library, run on the task's tensors that carry the names of
// the operation's inputs, after those were drawn and before the candidate or the reference runs.
// The bits are those of the library on the device, the same in every process (the backward
// attention tasks get O and LSE from the library's forward pass this way).
struct DerivedInput {
  std::string operation;  // e.g. "sdpa_fwd_bf16_causal".
  std::string output;     // The operation's output this tensor receives, e.g. "LSE".
};

struct TensorSpec {
  std::string name;
  TensorRole role = TensorRole::kInput;
  DType dtype = DType::kBF16;
  std::vector<std::string> shape;  // Axis names or expressions, outermost first (row-major).
  Distribution distribution = Distribution::kNormal;
  IndexDistributionParams distribution_params;
  std::optional<DerivedInput> derived;  // Inputs only; drawn at random when absent.
};

// What a baseline operation reads and writes, by name, for the operations a derived input may
// name. Shapes are axis expressions of the task (the operation's tensors must be declared with
// exactly these shapes and dtypes).
struct OperationSignature {
  struct Tensor {
    std::string name;
    DType dtype;
    std::vector<std::string> shape;
  };
  std::string library;
  std::string operation;
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
};

// The signature of `library`/`operation` if a derived input may use it, else nullptr.
const OperationSignature* FindDerivableOperation(const std::string& library,
                                                 const std::string& operation);

struct Workload {
  std::string name;
  std::map<std::string, int64_t> axes;
  bool timed = false;  // Exactly one workload per task is timed.
  int trials = 1;
};

// The rules every output must meet; a task declares one or both ("tolerance" is one rule object
// or an array of them) and all that are declared must hold.
struct Tolerance {
  bool all_close = true;       // The all-close rule applies:
  double atol = 1e-2;          //   an element fails only if |err| > atol AND
  double rtol = 1e-2;          //   |err| > rtol·|ref|;
  double matched_ratio = 1.0;  //   the fraction of elements that must match.
  // > 0: ‖out−ref‖₂/‖ref‖₂ must not exceed it as well (0: no norm bound). A bound next to
  // all-close catches a uniform relative error that all-close's atol hides on low-magnitude
  // outputs (attention O ~ 0.02 against atol 1e-2).
  double max_relative_norm = 0;
  // > 0 (the relative_norm rule's optional pair): every block of block_rows consecutive rows
  // (leading dims flattened, the last dim is the columns) must keep its own relative norm
  // <= max_block_relative_norm. Catches work skipped on a few rows, which the overall norm
  // dilutes (worker/engine/gpu/compare.h ToleranceRule, docs/task-authoring.md).
  int64_t block_rows = 0;
  double max_block_relative_norm = 0;
  // "fp64_reference" (optional, in any rule object): these outputs must also keep
  // ‖out−ref64‖₂/‖ref64‖₂ <= fp64_max_relative_norm against an fp64 computation of the task's
  // formulas on the same inputs (worker/engine/gpu/builtin_kernels.cu, ptxbench_sdpa_bwd_fp64_*),
  // on every correctness workload (not the timed one). Comparing against the library alone cannot
  // reject a cheaper kernel whose error sits between the library's and twice it without also
  // rejecting kernels more precise than the library (docs/task-authoring.md, "The fp64
  // reference"). Empty: no such rule. Only the backward attention operations have an fp64
  // definition (Fp64ReferenceSupported).
  std::vector<std::string> fp64_outputs;
  double fp64_max_relative_norm = 0;
};

// Baseline operations the engine has an fp64 reference for ("sdpa_bwd_bf16",
// "sdpa_bwd_bf16_causal"); the outputs it computes are dQ, dK and dV.
bool Fp64ReferenceSupported(const std::string& baseline_operation);

// The strong target-instruction check's thresholds (docs/measurement.md, "Work share"): the
// credited matrix family's FLOPs on the timed path over the task's FLOPs, and over every
// multiply-add the kernel executed. Both must be reached.
struct MinWorkShare {
  double share_of_task = 0;
  double share_of_executed = 0;
};

struct ArchSpec {
  std::string arch;                          // "sm_90a" or "sm_100a".
  std::vector<std::string> target_families;  // Names from common/target_families.h.
  // Required when target_families holds a matrix-multiply family (wgmma, tcgen05_mma).
  std::optional<MinWorkShare> min_work_share;
  bool runtime_unverified = false;            // No GPU of this arch where we validate.
  std::vector<std::string> template_headers;  // Paths relative to the task folder.
};

struct SourceRef {
  std::string arch;
  std::string path;            // Relative to the task folder.
  std::string expect;          // A VerdictClass name: "pass", "wrong_result", ...
  std::string scope = "full";  // "full" or "compile_only".
  std::string note;            // What this decoy tries, for reports.
};

struct Task {
  std::string id;
  std::string title;
  std::string description;
  std::string dir;           // Absolute path of tasks/<id>.
  std::string version_hash;  // sha256 over task.json and every file it names.
  std::vector<std::string> axes;
  std::vector<TensorSpec> tensors;
  std::map<std::string, std::string> scalars;  // name -> expression over axes (e.g. softmax scale).
  std::vector<Workload> workloads;
  Tolerance tolerance;
  std::string baseline_library;    // "cublaslt" or "cudnn".
  std::string baseline_operation;  // e.g. "gemm_a_bt_bf16", "sdpa_fwd".
  std::string flops_expr;          // Roofline: operations over axes.
  std::string min_bytes_expr;      // Roofline: fewest bytes moved.
  int64_t scratch_cap_bytes = 0;
  std::map<std::string, ArchSpec> arches;           // Keyed by arch name.
  std::map<std::string, std::string> prompt_paths;  // knowledge level -> path.
  std::vector<SourceRef> solutions;
  std::vector<SourceRef> decoys;
  nlohmann::json definition;  // task.json as loaded (served to vendors).
  // Every file the version hash covers, read once at load so that prompts and headers are
  // rendered from exactly the hashed bytes: path relative to `dir` as task.json names it
  // ("prompts/none.md", "../_shared/templates/x.cuh", "../_shared/contract/submission.md")
  // -> content. task.json itself is under "task.json".
  std::map<std::string, std::string> files;

  const Workload& TimedWorkload() const;
  // The workloads in the order the correctness trials run them: fewest output elements first
  // (most failures show there, cheaply), ties in the task's order. One definition for the
  // supervisor's trial plan and the candidate process, which makes their buffers ahead.
  std::vector<const Workload*> WorkloadsInTrialOrder() const;
  // The element type of the first input tensor: the matrix operands' precision, which selects
  // the credited FLOP counter (worker/engine/gpu/work_share.h).
  DType OperandType() const;
  // sha256 over task.json's bytes: the file that defines how a submission is judged (tolerance,
  // workloads, thresholds, baseline operation). Prompts and templates are not in it, so a prompt
  // edit does not mark stored verdicts as judged by another harness. Goes into every verdict's
  // `harness.task_hash`.
  std::string JudgingHash() const;
  const ArchSpec* FindArch(const std::string& arch) const;
};

// Reads one task folder; errors name the file and the field ("tasks/x/task.json: field
// 'workloads[1].axes': missing axis 'K'").
absl::StatusOr<Task> LoadTask(const std::string& task_dir);

// The prompt for a knowledge level ("none", "templates", "contract") and arch: the level's
// prompt file with {{placeholders}} filled (task description, tensors, workloads, the
// submission and launch-plan contract from tasks/_shared, hardware parameters of the arch),
// plus the template headers' text at levels templates and contract.
absl::StatusOr<std::string> RenderPrompt(const Task& task, const std::string& arch,
                                         const std::string& knowledge_level);

// The template headers a source for `arch` may #include, as name -> content.
absl::StatusOr<std::map<std::string, std::string>> TemplateHeaders(const Task& task,
                                                                   const std::string& arch);

// The knowledge levels, in increasing order of help: "none", "templates", "contract".
const std::vector<std::string>& KnowledgeLevels();

// Where the submission contract served in every prompt lives, relative to a task folder.
inline constexpr char kContractPath[] = "../_shared/contract/submission.md";

// The architecture rules a prompt places with {{arch_contract}} (knowledge level contract only):
// the rules common to every arch, then the file of the prompt's arch alone, so a Hopper prompt
// carries no Blackwell rules and the other way round. Read (and hashed) only for tasks whose
// prompts use the placeholder.
inline constexpr char kArchContractCommonPath[] = "../_shared/contract/arch_common.md";
std::string ArchContractPath(const std::string& arch);  // "../_shared/contract/arch_sm_90a.md"

// Hardware parameters of an arch as the prompt states them; InvalidArgument for unknown arches.
absl::StatusOr<std::string> HardwareParametersText(const std::string& arch);

// Every task under a tasks/ folder (folders starting with '_' are shared material, not tasks).
class TaskCatalog {
 public:
  static absl::StatusOr<TaskCatalog> Load(const std::string& tasks_dir);
  const Task* Find(const std::string& id) const;
  const std::vector<Task>& tasks() const { return tasks_; }

 private:
  std::vector<Task> tasks_;
};

}  // namespace ptxbench

#endif  // PTXBENCH_COMMON_TASK_H_
