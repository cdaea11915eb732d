// The launch plan: what the harness launches for one evaluation of a task's operation, as a
// submission declares it. This is its one definition: the types, the JSON it is read from, the
// choice lists, the limits and every structural check. The server runs it on a Submit's plan
// (a refusal is INVALID_ARGUMENT "launch_plan.<field>: ..."); the engine runs it on the plan it
// is given (a refusal is a PLAN_INVALID verdict) and then resolves the plan against the task,
// the device and the compiled module (worker/engine/plan.h). docs/submission-format.md,
// sections 2 and 3, is the format's reference.
//
// Pure: no CUDA, NVRTC, protobuf or gRPC. The proto message ptxbench.v1.LaunchPlan
// (proto/ptxbench/v1/types.proto) reaches this module as its canonical JSON (protobuf's
// MessageToJsonString with the proto field names), the text the worker hands the engine, so
// proto and plan have one mapping: JSON keys are the proto field names.
//
// "Structural" means decidable from the plan alone: the JSON's shape, keys and types, counts,
// lengths, names, choices and expression syntax. Whether an expression's value fits a device
// limit, a name is a tensor of the task or an argument fits a kernel parameter depends on the
// task, the workload and the module, and is the engine's to decide.
#ifndef PTXBENCH_COMMON_LAUNCH_PLAN_H_
#define PTXBENCH_COMMON_LAUNCH_PLAN_H_

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/json_fields.h"
#include "nlohmann/json.hpp"

namespace ptxbench {

// ---- Limits of this service (not of the hardware): they bound what one plan can ask of a
// worker and what the server stores. Honest plans are far inside them: the 41 plan blocks of
// tasks/ are at most 1585 bytes of JSON with expressions of at most 32 characters. ----

inline constexpr size_t kMaxPlanJsonBytes = 256 << 10;
// The plan's deepest value is an argument: plan > launches > launch > args > argument (5).
inline constexpr int kMaxPlanJsonDepth = 8;
inline constexpr size_t kMaxPlanLaunches = 16;
inline constexpr size_t kMaxPlanScratchBuffers = 16;
inline constexpr size_t kMaxPlanTensorMaps = 32;
inline constexpr size_t kMaxPlanArgsPerLaunch = 64;
// Kernel, tensor, scratch, scalar and tensor-map names.
inline constexpr size_t kMaxPlanNameBytes = 256;
// One expression's text (common/expr.h accepts up to kMaxExprLength; plans need far less).
inline constexpr size_t kMaxPlanExpressionBytes = 256;
// grid, block and cluster: x, y, z.
inline constexpr size_t kMaxLaunchDimensions = 3;
// cuTensorMapEncodeTiled takes tensorRank 1 to 5 (cuda.h, CUDA 13.0).
inline constexpr size_t kMaxTensorMapRank = 5;

// ---- The plan as written: expressions are text, choices are enums. ----

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

// Values equal the driver's CUtensorMap* enumerators one for one (cuda.h, CUDA 13.0), so the
// launcher can static_cast them (gpu/plan_runner.cc static_asserts it where cuda.h is visible).
enum class TensorMapSwizzle { kNone = 0, k32B = 1, k64B = 2, k128B = 3 };
enum class TensorMapInterleave { kNone = 0, k16B = 1, k32B = 2 };
enum class TensorMapL2Promotion { kNone = 0, k64B = 1, k128B = 2, k256B = 3 };
enum class TensorMapOobFill { kZero = 0, kNan = 1 };  // NONE / NAN_REQUEST_ZERO_FMA.

// The names each choice is written with; the first is the default (an absent or empty string).
inline constexpr std::array<Choice<TensorMapSwizzle>, 4> kSwizzleChoices = {{
    {"none", TensorMapSwizzle::kNone},
    {"32B", TensorMapSwizzle::k32B},
    {"64B", TensorMapSwizzle::k64B},
    {"128B", TensorMapSwizzle::k128B},
}};
inline constexpr std::array<Choice<TensorMapInterleave>, 3> kInterleaveChoices = {{
    {"none", TensorMapInterleave::kNone},
    {"16B", TensorMapInterleave::k16B},
    {"32B", TensorMapInterleave::k32B},
}};
inline constexpr std::array<Choice<TensorMapL2Promotion>, 4> kL2PromotionChoices = {{
    {"none", TensorMapL2Promotion::kNone},
    {"64B", TensorMapL2Promotion::k64B},
    {"128B", TensorMapL2Promotion::k128B},
    {"256B", TensorMapL2Promotion::k256B},
}};
inline constexpr std::array<Choice<TensorMapOobFill>, 2> kOobFillChoices = {{
    {"zero", TensorMapOobFill::kZero},
    {"nan", TensorMapOobFill::kNan},
}};
inline constexpr std::array<Choice<PlanArgument::Kind>, 4> kArgumentKindChoices = {{
    {"tensor", PlanArgument::Kind::kTensor},
    {"scratch", PlanArgument::Kind::kScratch},
    {"scalar", PlanArgument::Kind::kScalar},
    {"tensor_map", PlanArgument::Kind::kTensorMap},
}};

struct PlanTensorMap {
  std::string name;
  std::string tensor;                        // A task tensor.
  std::vector<std::string> box;              // Innermost first; 1-5 expressions.
  std::vector<std::string> element_strides;  // Innermost first; empty: all 1.
  TensorMapSwizzle swizzle = TensorMapSwizzle::kNone;
  TensorMapInterleave interleave = TensorMapInterleave::kNone;
  TensorMapL2Promotion l2_promotion = TensorMapL2Promotion::kNone;
  TensorMapOobFill oob_fill = TensorMapOobFill::kZero;
  std::vector<std::string> dims;  // Innermost first; empty: the tensor's own shape reversed.
};

struct LaunchPlan {
  std::vector<PlanLaunch> launches;
  std::vector<PlanScratch> scratch;
  std::vector<PlanTensorMap> tensor_maps;
};

std::string PlanArgumentKindName(PlanArgument::Kind kind);        // "tensor", "scratch", ...
std::string_view TensorMapSwizzleName(TensorMapSwizzle swizzle);  // "128B"

// ---- Errors: a field path and a message, e.g. "launches[0].grid[1]: ...". ----

using PlanError = FieldError;
template <typename T>
using PlanOr = FieldOr<T>;

// ---- The JSON: its objects and their keys, which are the proto messages' field names. ----

enum class PlanObject { kLaunchPlan, kLaunch, kArgument, kScratch, kTensorMap };
const std::vector<std::string_view>& PlanJsonKeys(PlanObject object);

// ---- Reading and checking. ----

// A plan from JSON text (the API's launch_plan as the server and the worker serialise it, or a
// file): at most kMaxPlanJsonBytes; malformed JSON is an error at the byte it stops at.
PlanOr<LaunchPlan> ParseLaunchPlanJson(std::string_view text);

// The JSON of a source's /* PTXBENCH_PLAN {...} */ block, whose first character is on source
// line `first_line`: malformed JSON is a "PTXBENCH_PLAN" error naming the source line.
PlanOr<LaunchPlan> ParsePlanBlockJson(std::string_view text, size_t first_line);

// A plan from parsed JSON. Unknown keys, wrong types and every structural check are errors.
PlanOr<LaunchPlan> LaunchPlanFromJson(const nlohmann::json& json);

// Every structural check of a plan built in code (LaunchPlanFromJson runs it too): counts,
// lengths, names (identifiers, unique among the plan's scratch buffers and among its tensor
// maps), expression syntax and the choices' combinations. nullopt when the plan passes.
std::optional<PlanError> CheckLaunchPlan(const LaunchPlan& plan);

// The plan's JSON: LaunchPlanFromJson(ToJson(plan)) is `plan` again. Defaults are left out.
nlohmann::json ToJson(const LaunchPlan& plan);

}  // namespace ptxbench

#endif  // PTXBENCH_COMMON_LAUNCH_PLAN_H_
