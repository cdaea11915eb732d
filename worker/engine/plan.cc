#include "worker/engine/plan.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/expr.h"
#include "worker/engine/source_lexer.h"

namespace ptxbench {
namespace {

using nlohmann::json;

constexpr char kPlanMarker[] = "PTXBENCH_PLAN";
// A plan is a few hundred bytes; this bounds the parser's work on hostile input.
constexpr size_t kMaxPlanJsonBytes = 256 << 10;
// cuTensorMapEncodeTiled's limits (cuda.h, CUDA 13.0): rank 1..5, box extents 1..256, element
// strides 1..8, global extents up to 2^32, global strides multiples of 16 (32 with 32-byte
// interleave) below 2^40.
constexpr int kMaxTensorMapRank = 5;
constexpr int64_t kMaxBoxExtent = 256;
constexpr int64_t kMaxElementStride = 8;
constexpr int64_t kMaxGlobalExtent = int64_t{1} << 32;
constexpr int64_t kMaxGlobalStride = int64_t{1} << 40;
// A CUtensorMap is 128 opaque bytes, 64-byte aligned (cuda.h).
constexpr int64_t kTensorMapBytes = 128;
constexpr int64_t kTensorMapAlignment = 64;
constexpr int64_t kPointerBytes = 8;

std::string Index(const std::string& parent, size_t i) { return absl::StrCat(parent, "[", i, "]"); }
std::string Join(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : absl::StrCat(parent, ".", key);
}

PlanError Error(std::string field, std::string message) {
  return PlanError{std::move(field), std::move(message)};
}

bool IsIdentifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// One parse that keeps the error's position (the non-throwing overload does not report it).
struct JsonParse {
  json value;
  bool ok = false;
  size_t byte = 0;  // 1-based offset of the last character read, on error.
  std::string message;
};

JsonParse ParseJson(std::string_view text) {
  JsonParse result;
  try {
    result.value = json::parse(text.begin(), text.end());
    result.ok = true;
  } catch (const json::parse_error& e) {
    result.byte = e.byte;
    result.message = e.what();
  }
  return result;
}

// ---------------------------------------------------------------------------------------------
// JSON -> LaunchPlan.

std::optional<PlanError> CheckKeys(const json& object, const std::string& field,
                                   const std::set<std::string>& allowed) {
  for (const auto& [key, value] : object.items()) {
    if (allowed.count(key) == 0) {
      return Error(field.empty() ? key : Join(field, key),
                   absl::StrCat("unknown key (allowed: ", absl::StrJoin(allowed, ", "), ")"));
    }
  }
  return std::nullopt;
}

PlanOr<std::string> ReadString(const json& object, const std::string& parent,
                               const std::string& key, bool required) {
  const std::string field = Join(parent, key);
  auto it = object.find(key);
  if (it == object.end()) {
    if (required) return Error(field, "missing");
    return std::string();
  }
  if (!it->is_string()) return Error(field, "expected a string");
  std::string value = it->get<std::string>();
  if (value.empty()) return Error(field, "must not be empty");
  return value;
}

// An expression field: a string, or an integer written as a JSON number.
PlanOr<std::string> ReadExpression(const json& value, const std::string& field) {
  if (value.is_string()) {
    std::string text = value.get<std::string>();
    if (text.empty()) return Error(field, "empty expression");
    return text;
  }
  if (value.is_number_integer()) {
    return value.is_number_unsigned() ? std::to_string(value.get<uint64_t>())
                                      : std::to_string(value.get<int64_t>());
  }
  return Error(field,
               "expected an expression (a string such as \"ceil_div(M, 128)\") or an integer");
}

PlanOr<std::vector<std::string>> ReadExpressionList(const json& object, const std::string& parent,
                                                    const std::string& key, size_t min_count,
                                                    size_t max_count, bool required) {
  const std::string field = Join(parent, key);
  auto it = object.find(key);
  if (it == object.end()) {
    if (required) return Error(field, "missing");
    return std::vector<std::string>();
  }
  if (!it->is_array()) return Error(field, "expected an array of expressions");
  if (it->size() < min_count || it->size() > max_count) {
    return Error(field,
                 absl::StrCat("has ", it->size(), " entries; ",
                              min_count == max_count ? absl::StrCat(min_count)
                                                     : absl::StrCat(min_count, " to ", max_count),
                              " are allowed"));
  }
  std::vector<std::string> list;
  for (size_t i = 0; i < it->size(); ++i) {
    PlanOr<std::string> expr = ReadExpression((*it)[i], Index(field, i));
    if (!expr.ok()) return expr.error();
    list.push_back(std::move(expr).value());
  }
  return list;
}

PlanOr<PlanArgument> ReadArgument(const json& value, const std::string& field) {
  static const std::map<std::string, PlanArgument::Kind> kKinds = {
      {"tensor", PlanArgument::Kind::kTensor},
      {"scratch", PlanArgument::Kind::kScratch},
      {"scalar", PlanArgument::Kind::kScalar},
      {"tensor_map", PlanArgument::Kind::kTensorMap}};
  const std::string shape =
      "an argument is an object with exactly one key: tensor, scratch, scalar or tensor_map";
  if (!value.is_object() || value.size() != 1) return Error(field, shape);
  const auto& [key, name] = *value.items().begin();
  auto kind = kKinds.find(key);
  if (kind == kKinds.end())
    return Error(Join(field, key), absl::StrCat("unknown argument kind; ", shape));
  if (!name.is_string() || name.get<std::string>().empty()) {
    return Error(Join(field, key), "expected a non-empty name");
  }
  return PlanArgument{kind->second, name.get<std::string>()};
}

PlanOr<PlanLaunch> ReadLaunch(const json& value, const std::string& field) {
  if (!value.is_object()) return Error(field, "expected an object");
  if (auto error = CheckKeys(
          value, field, {"kernel", "grid", "block", "cluster", "dynamic_shared_bytes", "args"})) {
    return *error;
  }
  PlanLaunch launch;
  PlanOr<std::string> kernel = ReadString(value, field, "kernel", true);
  if (!kernel.ok()) return kernel.error();
  launch.kernel = std::move(kernel).value();
  PlanOr<std::vector<std::string>> grid = ReadExpressionList(value, field, "grid", 1, 3, true);
  if (!grid.ok()) return grid.error();
  launch.grid = std::move(grid).value();
  PlanOr<std::vector<std::string>> block = ReadExpressionList(value, field, "block", 1, 3, true);
  if (!block.ok()) return block.error();
  launch.block = std::move(block).value();
  PlanOr<std::vector<std::string>> cluster =
      ReadExpressionList(value, field, "cluster", 0, 3, false);
  if (!cluster.ok()) return cluster.error();
  launch.cluster = std::move(cluster).value();
  if (auto it = value.find("dynamic_shared_bytes"); it != value.end()) {
    PlanOr<std::string> bytes = ReadExpression(*it, Join(field, "dynamic_shared_bytes"));
    if (!bytes.ok()) return bytes.error();
    launch.dynamic_shared_bytes = std::move(bytes).value();
  }
  if (auto it = value.find("args"); it != value.end()) {
    if (!it->is_array()) return Error(Join(field, "args"), "expected an array of arguments");
    for (size_t i = 0; i < it->size(); ++i) {
      PlanOr<PlanArgument> argument = ReadArgument((*it)[i], Index(Join(field, "args"), i));
      if (!argument.ok()) return argument.error();
      launch.args.push_back(std::move(argument).value());
    }
  }
  return launch;
}

PlanOr<PlanTensorMap> ReadTensorMap(const json& value, const std::string& field) {
  if (!value.is_object()) return Error(field, "expected an object");
  if (auto error = CheckKeys(value, field,
                             {"name", "tensor", "box", "element_strides", "swizzle", "interleave",
                              "l2_promotion", "oob_fill", "dims"})) {
    return *error;
  }
  PlanTensorMap map;
  for (auto [key, target, required] :
       {std::tuple<const char*, std::string*, bool>{"name", &map.name, true},
        {"tensor", &map.tensor, true},
        {"swizzle", &map.swizzle, false},
        {"interleave", &map.interleave, false},
        {"l2_promotion", &map.l2_promotion, false},
        {"oob_fill", &map.oob_fill, false}}) {
    PlanOr<std::string> text = ReadString(value, field, key, required);
    if (!text.ok()) return text.error();
    *target = std::move(text).value();
  }
  PlanOr<std::vector<std::string>> box =
      ReadExpressionList(value, field, "box", 1, kMaxTensorMapRank, true);
  if (!box.ok()) return box.error();
  map.box = std::move(box).value();
  PlanOr<std::vector<std::string>> strides =
      ReadExpressionList(value, field, "element_strides", 0, kMaxTensorMapRank, false);
  if (!strides.ok()) return strides.error();
  map.element_strides = std::move(strides).value();
  PlanOr<std::vector<std::string>> dims =
      ReadExpressionList(value, field, "dims", 0, kMaxTensorMapRank, false);
  if (!dims.ok()) return dims.error();
  map.dims = std::move(dims).value();
  return map;
}

// ---------------------------------------------------------------------------------------------
// Validation helpers.

class Resolver {
 public:
  Resolver(const Task& task, const Workload& workload, const DeviceLimits& limits)
      : task_(task), workload_(workload), limits_(limits) {}

  // Evaluates an integer expression of the plan and checks min <= value <= max.
  PlanOr<int64_t> Eval(const std::string& field, const std::string& text, int64_t min_value,
                       int64_t max_value, const std::string& what = "value") const {
    auto expr = Expr::Parse(text, ExprMode::kInteger);
    if (!expr.ok()) return Error(field, std::string(expr.status().message()));
    auto value = expr->EvaluateInt(workload_.axes);
    if (!value.ok()) return Error(field, absl::StrCat(value.status().message(), Where()));
    if (*value < min_value) {
      return Error(field, absl::StrCat(what, " ", *value, " ('", text, "') is below the minimum ",
                                       min_value, Where()));
    }
    if (*value > max_value) {
      return Error(field, absl::StrCat(what, " ", *value, " ('", text, "') exceeds the limit ",
                                       max_value, Where()));
    }
    return *value;
  }

  std::string Where() const { return absl::StrCat(" (workload '", workload_.name, "')"); }

  const Task& task() const { return task_; }
  const Workload& workload() const { return workload_; }
  const DeviceLimits& limits() const { return limits_; }

 private:
  const Task& task_;
  const Workload& workload_;
  const DeviceLimits& limits_;
};

int FindTensor(const Task& task, const std::string& name) {
  for (size_t i = 0; i < task.tensors.size(); ++i) {
    if (task.tensors[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

std::string TensorNames(const Task& task) {
  std::vector<std::string> names;
  for (const TensorSpec& t : task.tensors) names.push_back(t.name);
  return absl::StrCat("tensors: ", absl::StrJoin(names, ", "));
}

template <typename T>
std::string DeclaredNames(const std::vector<T>& items, const char* what) {
  if (items.empty()) return absl::StrCat("the plan declares no ", what);
  std::vector<std::string> names;
  for (const T& item : items) names.push_back(item.name);
  return absl::StrCat(what, ": ", absl::StrJoin(names, ", "));
}

std::optional<TensorMapDataType> MapDataType(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return TensorMapDataType::kBfloat16;
    case DType::kFP16:
      return TensorMapDataType::kFloat16;
    case DType::kFP32:
      return TensorMapDataType::kFloat32;
    case DType::kInt32:
      return TensorMapDataType::kInt32;
    case DType::kFP8E4M3:
      // TMA has no fp8 type; fp8 tiles are copied as bytes.
      return TensorMapDataType::kUint8;
  }
  return std::nullopt;
}

template <typename Enum>
PlanOr<Enum> ParseChoice(const std::string& field, const std::string& text,
                         const std::vector<std::pair<std::string, Enum>>& choices) {
  if (text.empty()) return choices.front().second;
  std::vector<std::string> names;
  for (const auto& [name, value] : choices) {
    if (text == name) return value;
    names.push_back(absl::StrCat("\"", name, "\""));
  }
  return Error(field, absl::StrCat("'", text, "' is not one of ", absl::StrJoin(names, ", ")));
}

PlanOr<ResolvedTensorMap> ResolveTensorMap(const PlanTensorMap& spec, const std::string& field,
                                           const Resolver& resolver,
                                           const std::vector<PlanScratch>& scratch) {
  const Task& task = resolver.task();
  ResolvedTensorMap map;
  map.name = spec.name;
  map.tensor = spec.tensor;
  map.tensor_index = FindTensor(task, spec.tensor);
  if (map.tensor_index < 0) {
    for (const PlanScratch& buffer : scratch) {
      if (buffer.name == spec.tensor) {
        return Error(Join(field, "tensor"),
                     absl::StrCat("'", spec.tensor,
                                  "' is a scratch buffer; tensor maps describe "
                                  "task tensors, whose element type is known"));
      }
    }
    return Error(Join(field, "tensor"),
                 absl::StrCat("unknown tensor '", spec.tensor, "' (", TensorNames(task), ")"));
  }
  const TensorSpec& tensor = task.tensors[static_cast<size_t>(map.tensor_index)];
  map.data_type = *MapDataType(tensor.dtype);
  map.element_bytes = DTypeBytes(tensor.dtype);

  // The tensor's extents, innermost first; the element count bounds any reshaping.
  std::vector<int64_t> shape;
  int64_t elements = 1;
  for (auto it = tensor.shape.rbegin(); it != tensor.shape.rend(); ++it) {
    auto extent = EvalIntExpr(*it, resolver.workload().axes);
    if (!extent.ok()) {
      return Error(Join(field, "tensor"),
                   absl::StrCat("shape of '", tensor.name, "': ", extent.status().message()));
    }
    shape.push_back(*extent);
    if (__builtin_mul_overflow(elements, *extent, &elements)) {
      return Error(Join(field, "tensor"), "tensor size overflows");
    }
  }
  std::vector<int64_t> dims;
  if (spec.dims.empty()) {
    dims = shape;
    if (dims.size() > static_cast<size_t>(kMaxTensorMapRank)) {
      return Error(Join(field, "tensor"), absl::StrCat("'", tensor.name, "' has ", dims.size(),
                                                       " dimensions; tensor maps have at most ",
                                                       kMaxTensorMapRank, " (reshape with dims)"));
    }
  } else {
    int64_t product = 1;
    for (size_t d = 0; d < spec.dims.size(); ++d) {
      PlanOr<int64_t> extent =
          resolver.Eval(Index(Join(field, "dims"), d), spec.dims[d], 1, kMaxGlobalExtent, "extent");
      if (!extent.ok()) return extent.error();
      dims.push_back(extent.value());
      if (__builtin_mul_overflow(product, extent.value(), &product)) {
        return Error(Join(field, "dims"), "the product of the extents overflows");
      }
    }
    if (product != elements) {
      return Error(Join(field, "dims"),
                   absl::StrCat("the extents multiply to ", product, " elements but tensor '",
                                tensor.name, "' has ", elements, resolver.Where()));
    }
  }
  map.rank = static_cast<int>(dims.size());
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] > kMaxGlobalExtent) {
      return Error(
          Join(field, spec.dims.empty() ? "tensor" : "dims"),
          absl::StrCat("extent ", dims[d], " of dimension ", d, " exceeds 2^32", resolver.Where()));
    }
    map.global_dims.push_back(static_cast<uint64_t>(dims[d]));
  }

  PlanOr<TensorMapInterleave> interleave =
      ParseChoice<TensorMapInterleave>(Join(field, "interleave"), spec.interleave,
                                       {{"none", TensorMapInterleave::kNone},
                                        {"16B", TensorMapInterleave::k16B},
                                        {"32B", TensorMapInterleave::k32B}});
  if (!interleave.ok()) return interleave.error();
  map.interleave = interleave.value();
  PlanOr<TensorMapSwizzle> swizzle =
      ParseChoice<TensorMapSwizzle>(Join(field, "swizzle"), spec.swizzle,
                                    {{"none", TensorMapSwizzle::kNone},
                                     {"32B", TensorMapSwizzle::k32B},
                                     {"64B", TensorMapSwizzle::k64B},
                                     {"128B", TensorMapSwizzle::k128B}});
  if (!swizzle.ok()) return swizzle.error();
  map.swizzle = swizzle.value();
  PlanOr<TensorMapL2Promotion> l2 =
      ParseChoice<TensorMapL2Promotion>(Join(field, "l2_promotion"), spec.l2_promotion,
                                        {{"none", TensorMapL2Promotion::kNone},
                                         {"64B", TensorMapL2Promotion::k64B},
                                         {"128B", TensorMapL2Promotion::k128B},
                                         {"256B", TensorMapL2Promotion::k256B}});
  if (!l2.ok()) return l2.error();
  map.l2_promotion = l2.value();
  PlanOr<TensorMapOobFill> oob = ParseChoice<TensorMapOobFill>(
      Join(field, "oob_fill"), spec.oob_fill,
      {{"zero", TensorMapOobFill::kZero}, {"nan", TensorMapOobFill::kNan}});
  if (!oob.ok()) return oob.error();
  map.oob_fill = oob.value();

  if (map.interleave != TensorMapInterleave::kNone && map.rank < 3) {
    return Error(
        Join(field, "interleave"),
        absl::StrCat("interleaved tensor maps need rank 3 or more; this one has rank ", map.rank));
  }
  if (map.interleave == TensorMapInterleave::k32B && map.swizzle != TensorMapSwizzle::k32B) {
    return Error(Join(field, "swizzle"), "32B interleave requires swizzle \"32B\"");
  }
  if (map.oob_fill == TensorMapOobFill::kNan && tensor.dtype != DType::kBF16 &&
      tensor.dtype != DType::kFP16 && tensor.dtype != DType::kFP32) {
    return Error(Join(field, "oob_fill"),
                 absl::StrCat("\"nan\" needs a floating-point tensor; '", tensor.name, "' is ",
                              DTypeName(tensor.dtype), " (copied as ",
                              tensor.dtype == DType::kFP8E4M3 ? "bytes" : "integers", ")"));
  }

  if (spec.box.size() != dims.size()) {
    return Error(Join(field, "box"), absl::StrCat("has ", spec.box.size(), " entries for a rank-",
                                                  map.rank, " tensor map (innermost first)"));
  }
  for (size_t d = 0; d < spec.box.size(); ++d) {
    PlanOr<int64_t> extent =
        resolver.Eval(Index(Join(field, "box"), d), spec.box[d], 1, kMaxBoxExtent, "box extent");
    if (!extent.ok()) return extent.error();
    map.box.push_back(static_cast<uint32_t>(extent.value()));
  }
  if (!spec.element_strides.empty() && spec.element_strides.size() != dims.size()) {
    return Error(Join(field, "element_strides"),
                 absl::StrCat("has ", spec.element_strides.size(), " entries for a rank-", map.rank,
                              " tensor map"));
  }
  for (size_t d = 0; d < dims.size(); ++d) {
    if (spec.element_strides.empty()) {
      map.element_strides.push_back(1);
      continue;
    }
    PlanOr<int64_t> stride =
        resolver.Eval(Index(Join(field, "element_strides"), d), spec.element_strides[d], 1,
                      kMaxElementStride, "element stride");
    if (!stride.ok()) return stride.error();
    map.element_strides.push_back(static_cast<uint32_t>(stride.value()));
  }

  const int64_t inner_bytes = int64_t{map.box[0]} * map.element_bytes;
  if (map.interleave == TensorMapInterleave::kNone) {
    if (inner_bytes % 16 != 0) {
      return Error(Index(Join(field, "box"), 0),
                   absl::StrCat("the inner box is ", inner_bytes, " bytes (", map.box[0], " x ",
                                map.element_bytes, "-byte ", DTypeName(tensor.dtype),
                                "); it must be a multiple of 16 bytes", resolver.Where()));
    }
    const int64_t span = map.swizzle == TensorMapSwizzle::k32B    ? 32
                         : map.swizzle == TensorMapSwizzle::k64B  ? 64
                         : map.swizzle == TensorMapSwizzle::k128B ? 128
                                                                  : 0;
    if (span > 0 && inner_bytes > span) {
      return Error(Index(Join(field, "box"), 0),
                   absl::StrCat("the inner box is ", inner_bytes, " bytes, more than the ", span,
                                "-byte span of swizzle \"", spec.swizzle, "\"", resolver.Where()));
    }
  }
  const int64_t stride_multiple = map.interleave == TensorMapInterleave::k32B ? 32 : 16;
  int64_t stride = map.element_bytes;
  for (size_t d = 0; d + 1 < dims.size(); ++d) {
    if (__builtin_mul_overflow(stride, dims[d], &stride) || stride >= kMaxGlobalStride) {
      return Error(
          Join(field, spec.dims.empty() ? "tensor" : "dims"),
          absl::StrCat("the stride of dimension ", d + 1, " reaches 2^40 bytes", resolver.Where()));
    }
    if (stride % stride_multiple != 0) {
      return Error(
          Join(field, spec.dims.empty() ? "tensor" : "dims"),
          absl::StrCat("the stride of dimension ", d + 1, " is ", stride,
                       " bytes; TMA needs a multiple of ", stride_multiple, resolver.Where()));
    }
    map.global_strides_bytes.push_back(static_cast<uint64_t>(stride));
  }
  return map;
}

const KernelSignature* FindKernel(const std::vector<KernelSignature>& kernels,
                                  const std::string& name) {
  for (const KernelSignature& kernel : kernels) {
    if (kernel.name == name) return &kernel;
  }
  return nullptr;
}

std::string KernelNames(const std::vector<KernelSignature>& kernels) {
  if (kernels.empty()) return "the module has no kernels";
  std::vector<std::string> names;
  for (const KernelSignature& kernel : kernels) names.push_back(kernel.name);
  return absl::StrCat("kernels in the module: ", absl::StrJoin(names, ", "));
}

std::string ArgumentSizeDescription(const ResolvedArgument& argument) {
  switch (argument.kind) {
    case PlanArgument::Kind::kTensor:
      return "a tensor is passed as an 8-byte device pointer";
    case PlanArgument::Kind::kScratch:
      return "a scratch buffer is passed as an 8-byte device pointer";
    case PlanArgument::Kind::kTensorMap:
      return "a tensor map is passed by value as 128 bytes (declare the parameter "
             "'const __grid_constant__ CUtensorMap')";
    case PlanArgument::Kind::kScalar:
      return argument.scalar_is_integer
                 ? "an axis is passed as int32 (4 bytes) or int64 (8 bytes)"
                 : "a task scalar is passed as float (4 bytes) or double (8 bytes)";
  }
  return "";
}

PlanOr<ResolvedLaunch> ResolveLaunch(const PlanLaunch& spec, const std::string& field,
                                     const Resolver& resolver, const LaunchPlan& plan,
                                     const ResolvedPlan& resolved,
                                     const std::vector<KernelSignature>& kernels) {
  const Task& task = resolver.task();
  const DeviceLimits& limits = resolver.limits();
  ResolvedLaunch launch;
  launch.kernel = spec.kernel;
  const KernelSignature* kernel = FindKernel(kernels, spec.kernel);
  if (kernel == nullptr) {
    std::string hint;
    if (!kernels.empty() && kernels.front().name.rfind("_Z", 0) == 0) {
      hint = "; declare kernels extern \"C\" so that their names are not mangled";
    }
    return Error(Join(field, "kernel"),
                 absl::StrCat("no kernel '", spec.kernel, "' (", KernelNames(kernels), ")", hint));
  }

  if (spec.grid.empty() || spec.grid.size() > 3) {
    return Error(Join(field, "grid"), "needs 1 to 3 expressions");
  }
  if (spec.block.empty() || spec.block.size() > 3) {
    return Error(Join(field, "block"), "needs 1 to 3 expressions");
  }
  if (spec.cluster.size() > 3) return Error(Join(field, "cluster"), "takes at most 3 expressions");
  for (size_t d = 0; d < spec.grid.size(); ++d) {
    PlanOr<int64_t> value = resolver.Eval(Index(Join(field, "grid"), d), spec.grid[d], 1,
                                          limits.max_grid_dims[d], "grid extent");
    if (!value.ok()) return value.error();
    launch.grid[d] = static_cast<uint32_t>(value.value());
  }
  int64_t threads = 1;
  for (size_t d = 0; d < spec.block.size(); ++d) {
    PlanOr<int64_t> value = resolver.Eval(Index(Join(field, "block"), d), spec.block[d], 1,
                                          limits.max_block_dims[d], "block extent");
    if (!value.ok()) return value.error();
    launch.block[d] = static_cast<uint32_t>(value.value());
    threads *= value.value();
  }
  if (threads > limits.max_threads_per_block) {
    return Error(Join(field, "block"),
                 absl::StrCat(threads, " threads per block exceed the limit of ",
                              limits.max_threads_per_block, resolver.Where()));
  }
  const auto& max_threads = kernel->max_threads;
  if (max_threads[0] > 0 && threads > max_threads[0] * max_threads[1] * max_threads[2]) {
    return Error(
        Join(field, "block"),
        absl::StrCat(threads, " threads per block exceed kernel '", kernel->name,
                     "''s launch bounds (.maxntid ",
                     max_threads[0] * max_threads[1] * max_threads[2], ")", resolver.Where()));
  }
  const auto& required = kernel->required_threads;
  if (required[0] > 0 &&
      (int64_t{launch.block[0]} != required[0] || int64_t{launch.block[1]} != required[1] ||
       int64_t{launch.block[2]} != required[2])) {
    return Error(
        Join(field, "block"),
        absl::StrCat("kernel '", kernel->name, "' requires a block of exactly ", required[0], " x ",
                     required[1], " x ", required[2], " threads (.reqntid)"));
  }

  if (!spec.cluster.empty()) {
    launch.has_cluster = true;
    const int64_t max_cluster = limits.allow_non_portable_cluster
                                    ? limits.max_non_portable_cluster_size
                                    : limits.max_cluster_size;
    int64_t size = 1;
    for (size_t d = 0; d < spec.cluster.size(); ++d) {
      PlanOr<int64_t> value = resolver.Eval(Index(Join(field, "cluster"), d), spec.cluster[d], 1,
                                            max_cluster, "cluster extent");
      if (!value.ok()) return value.error();
      launch.cluster[d] = static_cast<uint32_t>(value.value());
      size *= value.value();
    }
    if (size > max_cluster) {
      return Error(Join(field, "cluster"),
                   absl::StrCat("a cluster of ", size, " CTAs exceeds the limit of ", max_cluster,
                                resolver.Where()));
    }
    for (size_t d = 0; d < 3; ++d) {
      if (launch.grid[d] % launch.cluster[d] != 0) {
        return Error(Index(Join(field, "grid"), d),
                     absl::StrCat("grid extent ", launch.grid[d],
                                  " is not a multiple of the cluster extent ", launch.cluster[d],
                                  resolver.Where()));
      }
    }
  }

  const int64_t static_shared = kernel->has_resources ? kernel->resources.shared_bytes : 0;
  const std::string dynamic_text =
      spec.dynamic_shared_bytes.empty() ? "0" : spec.dynamic_shared_bytes;
  PlanOr<int64_t> dynamic =
      resolver.Eval(Join(field, "dynamic_shared_bytes"), dynamic_text, 0,
                    limits.max_shared_bytes_per_block, "dynamic shared memory");
  if (!dynamic.ok()) return dynamic.error();
  launch.dynamic_shared_bytes = dynamic.value();
  if (launch.dynamic_shared_bytes + static_shared > limits.max_shared_bytes_per_block) {
    return Error(
        Join(field, "dynamic_shared_bytes"),
        absl::StrCat(launch.dynamic_shared_bytes, " dynamic + ", static_shared,
                     " static bytes (kernel '", kernel->name, "') exceed the ",
                     limits.max_shared_bytes_per_block, "-byte limit per block", resolver.Where()));
  }

  if (spec.args.size() > static_cast<size_t>(limits.max_args_per_launch)) {
    return Error(Join(field, "args"),
                 absl::StrCat(spec.args.size(), " arguments exceed the limit of ",
                              limits.max_args_per_launch));
  }
  for (size_t a = 0; a < spec.args.size(); ++a) {
    const PlanArgument& arg = spec.args[a];
    const std::string arg_field = Index(Join(field, "args"), a);
    const std::string name_field = Join(arg_field, PlanArgumentKindName(arg.kind));
    ResolvedArgument out;
    out.kind = arg.kind;
    out.name = arg.name;
    switch (arg.kind) {
      case PlanArgument::Kind::kTensor:
        out.index = FindTensor(task, arg.name);
        if (out.index < 0) {
          return Error(name_field,
                       absl::StrCat("unknown tensor '", arg.name, "' (", TensorNames(task), ")"));
        }
        out.size_bytes = kPointerBytes;
        break;
      case PlanArgument::Kind::kScratch:
        for (size_t s = 0; s < resolved.scratch.size(); ++s) {
          if (resolved.scratch[s].name == arg.name) out.index = static_cast<int>(s);
        }
        if (out.index < 0) {
          return Error(name_field,
                       absl::StrCat("unknown scratch buffer '", arg.name, "' (",
                                    DeclaredNames(plan.scratch, "scratch buffers"), ")"));
        }
        out.size_bytes = kPointerBytes;
        break;
      case PlanArgument::Kind::kTensorMap:
        for (size_t m = 0; m < resolved.tensor_maps.size(); ++m) {
          if (resolved.tensor_maps[m].name == arg.name) out.index = static_cast<int>(m);
        }
        if (out.index < 0) {
          return Error(name_field,
                       absl::StrCat("unknown tensor map '", arg.name, "' (",
                                    DeclaredNames(plan.tensor_maps, "tensor maps"), ")"));
        }
        out.size_bytes = kTensorMapBytes;
        break;
      case PlanArgument::Kind::kScalar: {
        auto axis = resolver.workload().axes.find(arg.name);
        if (axis != resolver.workload().axes.end()) {
          out.scalar_is_integer = true;
          out.int_value = axis->second;
          out.size_bytes = 4;
        } else if (auto scalar = task.scalars.find(arg.name); scalar != task.scalars.end()) {
          auto value = EvalRealExpr(scalar->second, resolver.workload().axes);
          if (!value.ok()) {
            return Error(name_field,
                         absl::StrCat("task scalar '", arg.name, "': ", value.status().message()));
          }
          out.scalar_is_integer = false;
          out.real_value = *value;
          out.size_bytes = 4;
        } else {
          std::vector<std::string> names(task.axes);
          for (const auto& [name, text] : task.scalars) names.push_back(name);
          return Error(name_field,
                       absl::StrCat("unknown scalar '", arg.name,
                                    "' (axes and scalars: ", absl::StrJoin(names, ", "), ")"));
        }
        break;
      }
    }
    launch.args.push_back(std::move(out));
  }
  // Names first, then the count, then sizes: a missing argument shifts every later one, and the
  // count names that cause better than a cascade of size mismatches would.
  if (spec.args.size() != kernel->parameters.size()) {
    return Error(Join(field, "args"),
                 absl::StrCat(spec.args.size(), " arguments for kernel '", kernel->name,
                              "', which takes ", kernel->parameters.size(), " parameters"));
  }
  for (size_t a = 0; a < launch.args.size(); ++a) {
    ResolvedArgument& out = launch.args[a];
    const std::string arg_field = Index(Join(field, "args"), a);
    const KernelParameter& parameter = kernel->parameters[a];
    const bool scalar_width_ok = out.kind == PlanArgument::Kind::kScalar &&
                                 (parameter.size_bytes == 4 || parameter.size_bytes == 8);
    if (scalar_width_ok) {
      out.size_bytes = parameter.size_bytes;
      if (out.scalar_is_integer && out.size_bytes == 4 &&
          (out.int_value > std::numeric_limits<int32_t>::max() ||
           out.int_value < std::numeric_limits<int32_t>::min())) {
        return Error(arg_field, absl::StrCat("axis '", out.name, "' is ", out.int_value,
                                             ", too large for kernel '", kernel->name,
                                             "''s 4-byte parameter ", a, resolver.Where()));
      }
    } else if (parameter.size_bytes != out.size_bytes) {
      return Error(arg_field, absl::StrCat("kernel '", kernel->name, "' parameter ", a, " ('",
                                           parameter.name, "') is ", parameter.size_bytes,
                                           " bytes; ", ArgumentSizeDescription(out)));
    }
    if (out.kind == PlanArgument::Kind::kTensorMap && parameter.alignment < kTensorMapAlignment) {
      return Error(arg_field, absl::StrCat("kernel '", kernel->name, "' parameter ", a, " is ",
                                           parameter.alignment,
                                           "-byte aligned; a CUtensorMap must be 64-byte aligned "
                                           "(struct alignas(64) CUtensorMap, passed as "
                                           "'const __grid_constant__ CUtensorMap')"));
    }
  }
  return launch;
}

}  // namespace

std::string PlanArgumentKindName(PlanArgument::Kind kind) {
  switch (kind) {
    case PlanArgument::Kind::kTensor:
      return "tensor";
    case PlanArgument::Kind::kScratch:
      return "scratch";
    case PlanArgument::Kind::kScalar:
      return "scalar";
    case PlanArgument::Kind::kTensorMap:
      return "tensor_map";
  }
  return "unknown";
}

PlanOr<LaunchPlan> LaunchPlanFromJson(const json& root) {
  if (!root.is_object()) return Error("", "a launch plan is a JSON object");
  if (auto error = CheckKeys(root, "", {"launches", "scratch", "tensor_maps"})) return *error;
  LaunchPlan plan;
  auto launches = root.find("launches");
  if (launches == root.end()) return Error("launches", "missing");
  if (!launches->is_array() || launches->empty()) {
    return Error("launches", "expected a non-empty array of launches");
  }
  for (size_t i = 0; i < launches->size(); ++i) {
    PlanOr<PlanLaunch> launch = ReadLaunch((*launches)[i], Index("launches", i));
    if (!launch.ok()) return launch.error();
    plan.launches.push_back(std::move(launch).value());
  }
  if (auto scratch = root.find("scratch"); scratch != root.end()) {
    if (!scratch->is_array()) return Error("scratch", "expected an array");
    for (size_t i = 0; i < scratch->size(); ++i) {
      const std::string field = Index("scratch", i);
      const json& entry = (*scratch)[i];
      if (!entry.is_object()) return Error(field, "expected an object");
      if (auto error = CheckKeys(entry, field, {"name", "bytes"})) return *error;
      PlanScratch buffer;
      PlanOr<std::string> name = ReadString(entry, field, "name", true);
      if (!name.ok()) return name.error();
      buffer.name = std::move(name).value();
      auto bytes = entry.find("bytes");
      if (bytes == entry.end()) return Error(Join(field, "bytes"), "missing");
      PlanOr<std::string> bytes_text = ReadExpression(*bytes, Join(field, "bytes"));
      if (!bytes_text.ok()) return bytes_text.error();
      buffer.bytes = std::move(bytes_text).value();
      plan.scratch.push_back(std::move(buffer));
    }
  }
  if (auto maps = root.find("tensor_maps"); maps != root.end()) {
    if (!maps->is_array()) return Error("tensor_maps", "expected an array");
    for (size_t i = 0; i < maps->size(); ++i) {
      PlanOr<PlanTensorMap> map = ReadTensorMap((*maps)[i], Index("tensor_maps", i));
      if (!map.ok()) return map.error();
      plan.tensor_maps.push_back(std::move(map).value());
    }
  }
  return plan;
}

PlanOr<LaunchPlan> ParseLaunchPlanJson(std::string_view text) {
  if (text.size() > kMaxPlanJsonBytes) {
    return Error(
        "", absl::StrCat("the plan is ", text.size(), " bytes; the limit is ", kMaxPlanJsonBytes));
  }
  JsonParse parsed = ParseJson(text);
  if (!parsed.ok) return Error("", absl::StrCat("not valid JSON: ", parsed.message));
  return LaunchPlanFromJson(parsed.value);
}

json ToJson(const LaunchPlan& plan) {
  json launches = json::array();
  for (const PlanLaunch& launch : plan.launches) {
    json args = json::array();
    for (const PlanArgument& arg : launch.args)
      args.push_back({{PlanArgumentKindName(arg.kind), arg.name}});
    json entry = {
        {"kernel", launch.kernel}, {"grid", launch.grid}, {"block", launch.block}, {"args", args}};
    if (!launch.cluster.empty()) entry["cluster"] = launch.cluster;
    if (!launch.dynamic_shared_bytes.empty())
      entry["dynamic_shared_bytes"] = launch.dynamic_shared_bytes;
    launches.push_back(std::move(entry));
  }
  json out = {{"launches", std::move(launches)}};
  if (!plan.scratch.empty()) {
    json scratch = json::array();
    for (const PlanScratch& s : plan.scratch)
      scratch.push_back({{"name", s.name}, {"bytes", s.bytes}});
    out["scratch"] = std::move(scratch);
  }
  if (!plan.tensor_maps.empty()) {
    json maps = json::array();
    for (const PlanTensorMap& m : plan.tensor_maps) {
      json entry = {{"name", m.name}, {"tensor", m.tensor}, {"box", m.box}};
      if (!m.element_strides.empty()) entry["element_strides"] = m.element_strides;
      if (!m.swizzle.empty()) entry["swizzle"] = m.swizzle;
      if (!m.interleave.empty()) entry["interleave"] = m.interleave;
      if (!m.l2_promotion.empty()) entry["l2_promotion"] = m.l2_promotion;
      if (!m.oob_fill.empty()) entry["oob_fill"] = m.oob_fill;
      if (!m.dims.empty()) entry["dims"] = m.dims;
      maps.push_back(std::move(entry));
    }
    out["tensor_maps"] = std::move(maps);
  }
  return out;
}

PlanOr<std::optional<LaunchPlan>> ExtractPlanFromSource(std::string_view source) {
  const LexedSource lexed = LexSource(source);
  const SourceComment* block = nullptr;
  for (const SourceComment& comment : lexed.comments) {
    const size_t marker = comment.text.find(kPlanMarker);
    if (marker == std::string::npos) continue;
    if (!comment.block) {
      return Error("PTXBENCH_PLAN", absl::StrCat("the marker at source line ", comment.line,
                                                 " is in a // comment; the plan must be a /* "
                                                 "PTXBENCH_PLAN {...} */ block comment"));
    }
    // Only a comment that starts with the marker is a plan block; prose that mentions the
    // marker elsewhere in a comment is left alone.
    size_t first = 0;
    while (first < comment.text.size() &&
           std::isspace(static_cast<unsigned char>(comment.text[first])))
      ++first;
    if (first != marker) continue;
    if (block != nullptr) {
      return Error("PTXBENCH_PLAN",
                   absl::StrCat("two plan blocks (source lines ", block->line, " and ",
                                comment.line, "); exactly one is allowed"));
    }
    block = &comment;
  }
  if (block == nullptr) return std::optional<LaunchPlan>();
  if (lexed.unterminated_comment && lexed.unterminated_comment_line == block->line) {
    return Error("PTXBENCH_PLAN", absl::StrCat("the plan block at source line ", block->line,
                                               " is not closed with */"));
  }
  const size_t json_start = block->text.find(kPlanMarker) + sizeof(kPlanMarker) - 1;
  const std::string_view json_text = std::string_view(block->text).substr(json_start);
  if (json_text.size() > kMaxPlanJsonBytes) {
    return Error("PTXBENCH_PLAN", absl::StrCat("the plan is ", json_text.size(),
                                               " bytes; the limit is ", kMaxPlanJsonBytes));
  }
  JsonParse parsed = ParseJson(json_text);
  if (!parsed.ok) {
    const size_t offset =
        std::min(json_start + (parsed.byte > 0 ? parsed.byte - 1 : 0), block->text.size());
    const size_t line = block->line + static_cast<size_t>(std::count(
                                          block->text.begin(), block->text.begin() + offset, '\n'));
    std::string what = parsed.message;
    // "[json.exception.parse_error.101] parse error at line 3, column 5: syntax error ..." ->
    // keep what follows the position, which counts from the block rather than the source.
    if (const size_t colon = what.find(": ", what.find("column")); colon != std::string::npos) {
      what = what.substr(colon + 2);
    }
    return Error("PTXBENCH_PLAN", absl::StrCat("not valid JSON at source line ", line, ": ", what));
  }
  PlanOr<LaunchPlan> plan = LaunchPlanFromJson(parsed.value);
  if (!plan.ok()) return plan.error();
  return std::optional<LaunchPlan>(std::move(plan).value());
}

PlanOr<LaunchPlan> SelectLaunchPlan(const std::optional<LaunchPlan>& from_request,
                                    std::string_view source) {
  if (from_request.has_value()) return *from_request;
  PlanOr<std::optional<LaunchPlan>> from_source = ExtractPlanFromSource(source);
  if (!from_source.ok()) return from_source.error();
  if (!from_source.value().has_value()) {
    return Error("",
                 "no launch plan: the request carries none and the source has no "
                 "/* PTXBENCH_PLAN {...} */ block");
  }
  return *std::move(from_source).value();
}

absl::StatusOr<DeviceLimits> DeviceLimitsForArch(const std::string& arch) {
  if (arch == "sm_90a" || arch == "sm_100a") return DeviceLimits{};
  return absl::InvalidArgumentError(
      absl::StrCat("unknown arch '", arch, "' (known: sm_90a, sm_100a)"));
}

PlanOr<ResolvedPlan> ValidatePlan(const LaunchPlan& plan, const Task& task,
                                  const Workload& workload, const DeviceLimits& limits,
                                  const std::vector<KernelSignature>& kernels) {
  const Resolver resolver(task, workload, limits);
  ResolvedPlan resolved;
  resolved.workload = workload.name;

  if (plan.launches.empty()) return Error("launches", "at least one launch is needed");
  if (plan.launches.size() > static_cast<size_t>(limits.max_launches)) {
    return Error("launches", absl::StrCat(plan.launches.size(), " launches exceed the limit of ",
                                          limits.max_launches));
  }
  if (plan.scratch.size() > static_cast<size_t>(limits.max_scratch_buffers)) {
    return Error("scratch", absl::StrCat(plan.scratch.size(), " buffers exceed the limit of ",
                                         limits.max_scratch_buffers));
  }
  if (plan.tensor_maps.size() > static_cast<size_t>(limits.max_tensor_maps)) {
    return Error("tensor_maps",
                 absl::StrCat(plan.tensor_maps.size(), " tensor maps exceed the limit of ",
                              limits.max_tensor_maps));
  }

  std::set<std::string> declared;
  for (size_t i = 0; i < plan.scratch.size(); ++i) {
    const PlanScratch& spec = plan.scratch[i];
    const std::string field = Index("scratch", i);
    if (!IsIdentifier(spec.name)) {
      return Error(Join(field, "name"), absl::StrCat("'", spec.name, "' is not an identifier"));
    }
    if (FindTensor(task, spec.name) >= 0) {
      return Error(Join(field, "name"), absl::StrCat("'", spec.name, "' is already a task tensor"));
    }
    if (!declared.insert(spec.name).second) {
      return Error(Join(field, "name"), absl::StrCat("duplicate scratch buffer '", spec.name, "'"));
    }
    auto expr = Expr::Parse(spec.bytes);
    if (!expr.ok()) return Error(Join(field, "bytes"), std::string(expr.status().message()));
    auto bytes = expr->EvaluateInt(workload.axes);
    if (!bytes.ok())
      return Error(Join(field, "bytes"), absl::StrCat(bytes.status().message(), resolver.Where()));
    if (*bytes < 1) {
      return Error(Join(field, "bytes"),
                   absl::StrCat(*bytes, " is not a positive size", resolver.Where()));
    }
    if (*bytes > task.scratch_cap_bytes) {
      return Error(Join(field, "bytes"), absl::StrCat(*bytes, " exceeds the task's scratch cap ",
                                                      task.scratch_cap_bytes, resolver.Where()));
    }
    resolved.total_scratch_bytes += *bytes;
    if (resolved.total_scratch_bytes > task.scratch_cap_bytes) {
      return Error("scratch", absl::StrCat("the buffers total ", resolved.total_scratch_bytes,
                                           " bytes, more than the task's scratch cap ",
                                           task.scratch_cap_bytes, resolver.Where()));
    }
    resolved.scratch.push_back({spec.name, *bytes});
  }

  std::set<std::string> map_names;
  for (size_t i = 0; i < plan.tensor_maps.size(); ++i) {
    const PlanTensorMap& spec = plan.tensor_maps[i];
    const std::string field = Index("tensor_maps", i);
    if (!IsIdentifier(spec.name)) {
      return Error(Join(field, "name"), absl::StrCat("'", spec.name, "' is not an identifier"));
    }
    if (!map_names.insert(spec.name).second) {
      return Error(Join(field, "name"), absl::StrCat("duplicate tensor map '", spec.name, "'"));
    }
    PlanOr<ResolvedTensorMap> map = ResolveTensorMap(spec, field, resolver, plan.scratch);
    if (!map.ok()) return map.error();
    resolved.tensor_maps.push_back(std::move(map).value());
  }

  for (size_t i = 0; i < plan.launches.size(); ++i) {
    PlanOr<ResolvedLaunch> launch =
        ResolveLaunch(plan.launches[i], Index("launches", i), resolver, plan, resolved, kernels);
    if (!launch.ok()) return launch.error();
    resolved.launches.push_back(std::move(launch).value());
  }

  // Every output must be reachable by some launch; an output no kernel can write is a plan
  // mistake worth naming before anything runs.
  for (size_t t = 0; t < task.tensors.size(); ++t) {
    if (task.tensors[t].role != TensorRole::kOutput) continue;
    bool reached = false;
    for (const ResolvedLaunch& launch : resolved.launches) {
      for (const ResolvedArgument& arg : launch.args) {
        if (arg.kind == PlanArgument::Kind::kTensor && arg.index == static_cast<int>(t))
          reached = true;
        if (arg.kind == PlanArgument::Kind::kTensorMap &&
            resolved.tensor_maps[static_cast<size_t>(arg.index)].tensor_index ==
                static_cast<int>(t)) {
          reached = true;
        }
      }
    }
    if (!reached) {
      return Error("launches", absl::StrCat("output tensor '", task.tensors[t].name,
                                            "' is passed to no launch, neither as a pointer nor "
                                            "through a tensor map"));
    }
  }
  return resolved;
}

json ToJson(const ResolvedPlan& plan) {
  json launches = json::array();
  for (const ResolvedLaunch& launch : plan.launches) {
    json args = json::array();
    for (const ResolvedArgument& arg : launch.args) {
      json entry = {{"kind", PlanArgumentKindName(arg.kind)},
                    {"name", arg.name},
                    {"size_bytes", arg.size_bytes}};
      if (arg.kind == PlanArgument::Kind::kScalar) {
        if (arg.scalar_is_integer) {
          entry["value"] = arg.int_value;
        } else {
          entry["value"] = arg.real_value;
        }
      }
      args.push_back(std::move(entry));
    }
    json entry = {{"kernel", launch.kernel},
                  {"grid", launch.grid},
                  {"block", launch.block},
                  {"dynamic_shared_bytes", launch.dynamic_shared_bytes},
                  {"args", std::move(args)}};
    if (launch.has_cluster) entry["cluster"] = launch.cluster;
    launches.push_back(std::move(entry));
  }
  json scratch = json::array();
  for (const ResolvedScratch& s : plan.scratch)
    scratch.push_back({{"name", s.name}, {"bytes", s.bytes}});
  json maps = json::array();
  for (const ResolvedTensorMap& m : plan.tensor_maps) {
    maps.push_back({{"name", m.name},
                    {"tensor", m.tensor},
                    {"data_type", static_cast<int>(m.data_type)},
                    {"rank", m.rank},
                    {"global_dims", m.global_dims},
                    {"global_strides_bytes", m.global_strides_bytes},
                    {"box", m.box},
                    {"element_strides", m.element_strides},
                    {"swizzle", static_cast<int>(m.swizzle)},
                    {"interleave", static_cast<int>(m.interleave)},
                    {"l2_promotion", static_cast<int>(m.l2_promotion)},
                    {"oob_fill", static_cast<int>(m.oob_fill)}});
  }
  return {{"workload", plan.workload},
          {"launches", std::move(launches)},
          {"scratch", std::move(scratch)},
          {"tensor_maps", std::move(maps)},
          {"total_scratch_bytes", plan.total_scratch_bytes}};
}

}  // namespace ptxbench
