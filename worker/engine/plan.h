// The launch plan: what the harness launches for one evaluation of a task's operation, as the
// submission declares it (proto ptxbench.v1.LaunchPlan, mirrored here without protobuf so the
// engine builds without it). docs/submission-format.md is the format's reference.
//
// A plan arrives as JSON (the API's launch_plan, or the /* PTXBENCH_PLAN {...} */ block of the
// source) with expressions over the task's axes; ValidatePlan resolves it for one workload into
// plain numbers after checking it against the task, the device's limits and the compiled module.
// Every problem is a PlanError naming the field ("launches[0].grid[1]: division by zero in 'N/0'
// at position 2 (workload 'timed')"), which becomes a PLAN_INVALID verdict; nothing here throws
// or crashes on hostile input.
#ifndef PTXBENCH_WORKER_ENGINE_PLAN_H_
#define PTXBENCH_WORKER_ENGINE_PLAN_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "common/task.h"
#include "nlohmann/json.hpp"
#include "worker/engine/kernel_info.h"

namespace ptxbench {

// ---- The plan as written (expressions are text). ----

struct PlanArgument {
  enum class Kind { kTensor, kScratch, kScalar, kTensorMap };
  Kind kind = Kind::kTensor;
  std::string name;
};

struct PlanLaunch {
  std::string kernel;
  std::vector<std::string> grid;     // 1-3 expressions.
  std::vector<std::string> block;    // 1-3 expressions.
  std::vector<std::string> cluster;  // 0-3 expressions; empty: no cluster.
  std::string dynamic_shared_bytes;  // Expression; empty means "0".
  std::vector<PlanArgument> args;
};

struct PlanScratch {
  std::string name;
  std::string bytes;  // Expression.
};

struct PlanTensorMap {
  std::string name;
  std::string tensor;                        // A task tensor.
  std::vector<std::string> box;              // Innermost first.
  std::vector<std::string> element_strides;  // Innermost first; empty: all 1.
  std::string swizzle;                       // "none" (or empty), "32B", "64B", "128B".
  std::string interleave;                    // "none" (or empty), "16B", "32B".
  std::string l2_promotion;                  // "none" (or empty), "64B", "128B", "256B".
  std::string oob_fill;                      // "zero" (or empty), "nan".
  std::vector<std::string> dims;  // Innermost first; empty: the tensor's own shape reversed.
};

struct LaunchPlan {
  std::vector<PlanLaunch> launches;
  std::vector<PlanScratch> scratch;
  std::vector<PlanTensorMap> tensor_maps;
};

std::string PlanArgumentKindName(PlanArgument::Kind kind);  // "tensor", "scratch", ...

// ---- Errors. ----

struct PlanError {
  std::string field;    // "launches[1].args[2].tensor"; empty for the plan as a whole.
  std::string message;  // "unknown tensor 'D' (tensors: A, B, C)".
  std::string ToString() const { return field.empty() ? message : field + ": " + message; }
};

// Either a value or a PlanError.
template <typename T>
class PlanOr {
 public:
  PlanOr(T value) : state_(std::move(value)) {}          // NOLINT: implicit like absl::StatusOr.
  PlanOr(PlanError error) : state_(std::move(error)) {}  // NOLINT
  bool ok() const { return std::holds_alternative<T>(state_); }
  const T& value() const& { return std::get<T>(state_); }
  T&& value() && { return std::get<T>(std::move(state_)); }
  const PlanError& error() const { return std::get<PlanError>(state_); }

 private:
  std::variant<T, PlanError> state_;
};

// ---- Parsing. ----

// From JSON text or a parsed object. Keys are the proto field names (snake_case); unknown keys
// are errors. Expression fields accept a string or an integer.
PlanOr<LaunchPlan> ParseLaunchPlanJson(std::string_view text);
PlanOr<LaunchPlan> LaunchPlanFromJson(const nlohmann::json& json);
nlohmann::json ToJson(const LaunchPlan& plan);

// The plan block of a source: a /* */ comment whose text starts with PTXBENCH_PLAN followed by
// one JSON object. nullopt when the source has none; an error when it has more than one, when a
// marker sits in a // comment, or when the JSON is malformed (with the source line).
PlanOr<std::optional<LaunchPlan>> ExtractPlanFromSource(std::string_view source);

// The plan an evaluation uses: the request's when it carries one (a block in the source is then
// ignored), else the source's block; an error when neither has a plan.
PlanOr<LaunchPlan> SelectLaunchPlan(const std::optional<LaunchPlan>& from_request,
                                    std::string_view source);

// ---- Validation and resolution. ----

struct DeviceLimits {
  int64_t max_threads_per_block = 1024;
  std::array<int64_t, 3> max_block_dims = {1024, 1024, 64};
  std::array<int64_t, 3> max_grid_dims = {2147483647, 65535, 65535};
  // Static plus dynamic shared memory per block with the opt-in attribute: 227 KB on sm_90 and
  // sm_100 (CUDA programming guide, compute capabilities 9.0 and 10.0).
  int64_t max_shared_bytes_per_block = 232448;
  int64_t max_cluster_size = 8;  // Portable limit.
  // 16 when the launcher sets cudaFuncAttributeNonPortableClusterSizeAllowed.
  int64_t max_non_portable_cluster_size = 16;
  bool allow_non_portable_cluster = false;
  // Plan-size limits of this service (not of the hardware): bound the work one plan can ask.
  int max_launches = 16;
  int max_scratch_buffers = 16;
  int max_tensor_maps = 32;
  int max_args_per_launch = 64;
};

absl::StatusOr<DeviceLimits> DeviceLimitsForArch(const std::string& arch);

// Values match the driver's CUtensorMap* enums one for one, so the launcher can static_cast
// (and should static_assert that, where cuda.h is visible).
enum class TensorMapDataType { kUint8 = 0, kInt32 = 3, kFloat16 = 6, kFloat32 = 7, kBfloat16 = 9 };
enum class TensorMapSwizzle { kNone = 0, k32B = 1, k64B = 2, k128B = 3 };
enum class TensorMapInterleave { kNone = 0, k16B = 1, k32B = 2 };
enum class TensorMapL2Promotion { kNone = 0, k64B = 1, k128B = 2, k256B = 3 };
enum class TensorMapOobFill { kZero = 0, kNan = 1 };  // NONE / NAN_REQUEST_ZERO_FMA.

struct ResolvedTensorMap {
  std::string name;
  std::string tensor;
  int tensor_index = -1;  // Into Task::tensors.
  TensorMapDataType data_type = TensorMapDataType::kBfloat16;
  int element_bytes = 0;
  int rank = 0;
  std::vector<uint64_t> global_dims;           // rank entries, innermost first.
  std::vector<uint64_t> global_strides_bytes;  // rank-1 entries (dimension 1 upward).
  std::vector<uint32_t> box;                   // rank entries.
  std::vector<uint32_t> element_strides;       // rank entries.
  TensorMapSwizzle swizzle = TensorMapSwizzle::kNone;
  TensorMapInterleave interleave = TensorMapInterleave::kNone;
  TensorMapL2Promotion l2_promotion = TensorMapL2Promotion::kNone;
  TensorMapOobFill oob_fill = TensorMapOobFill::kZero;
};

struct ResolvedScratch {
  std::string name;
  int64_t bytes = 0;
};

struct ResolvedArgument {
  PlanArgument::Kind kind = PlanArgument::Kind::kTensor;
  std::string name;
  int index = -1;  // Into Task::tensors, ResolvedPlan::scratch or ResolvedPlan::tensor_maps.
  // What the kernel parameter receives: 8 for pointers, 128 for tensor maps, 4 or 8 for scalars.
  int64_t size_bytes = 0;
  // kScalar: an axis is an integer (int32 in 4 bytes, int64 in 8); a task scalar is real (float
  // in 4 bytes, double in 8).
  bool scalar_is_integer = true;
  int64_t int_value = 0;
  double real_value = 0;
};

struct ResolvedLaunch {
  std::string kernel;
  std::array<uint32_t, 3> grid = {1, 1, 1};
  std::array<uint32_t, 3> block = {1, 1, 1};
  std::array<uint32_t, 3> cluster = {1, 1, 1};
  bool has_cluster = false;
  int64_t dynamic_shared_bytes = 0;
  std::vector<ResolvedArgument> args;
};

struct ResolvedPlan {
  std::string workload;
  std::vector<ResolvedLaunch> launches;
  std::vector<ResolvedScratch> scratch;
  std::vector<ResolvedTensorMap> tensor_maps;
  int64_t total_scratch_bytes = 0;
};

nlohmann::json ToJson(const ResolvedPlan& plan);

// Checks `plan` for `workload` of `task` and resolves every expression. `kernels` are the
// module's entries (CompileResult::kernels): launches must name one of them, and when a kernel's
// parameters are known the arguments must match them in number and size; when its resources are
// known, static plus dynamic shared memory must fit the device.
PlanOr<ResolvedPlan> ValidatePlan(const LaunchPlan& plan, const Task& task,
                                  const Workload& workload, const DeviceLimits& limits,
                                  const std::vector<KernelSignature>& kernels);

}  // namespace ptxbench

#endif  // PTXBENCH_WORKER_ENGINE_PLAN_H_
