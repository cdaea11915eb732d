// A tensor map of the plan, checked against the rules of cuTensorMapEncodeTiled (cuda.h, CUDA
// 13.0) so that a map the driver would refuse is a PLAN_INVALID verdict naming the field rather
// than a launch failure on the GPU.
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/expr.h"
#include "common/json_fields.h"
#include "worker/engine/plan_resolve.h"

namespace ptxbench::plan_resolve {
namespace {

// cuTensorMapEncodeTiled's limits: box extents 1..256, element strides 1..8, global extents up
// to 2^32, global strides multiples of 16 (32 with 32-byte interleave) below 2^40.
constexpr int64_t kMaxBoxExtent = 256;
constexpr int64_t kMaxElementStride = 8;
constexpr int64_t kMaxGlobalExtent = int64_t{1} << 32;
constexpr int64_t kMaxGlobalStride = int64_t{1} << 40;

TensorMapDataType MapDataType(DType dtype) {
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
  return TensorMapDataType::kUint8;
}

// The field a global extent or stride problem is blamed on: the plan's dims when it gives them,
// otherwise the tensor whose shape they come from.
std::string DimsField(const PlanTensorMap& spec, const std::string& field) {
  return FieldJoin(field, spec.dims.empty() ? "tensor" : "dims");
}

// The map's tensor: a task tensor (scratch buffers have no element type).
PlanOr<int> ResolveMapTensor(const PlanTensorMap& spec, const std::string& field,
                             const Resolver& resolver, const std::vector<PlanScratch>& scratch) {
  const int index = FindTensor(resolver.task(), spec.tensor);
  if (index >= 0) return index;
  for (const PlanScratch& buffer : scratch) {
    if (buffer.name == spec.tensor) {
      return PlanError{FieldJoin(field, "tensor"),
                       absl::StrCat("'", spec.tensor,
                                    "' is a scratch buffer; tensor maps describe "
                                    "task tensors, whose element type is known")};
    }
  }
  return PlanError{FieldJoin(field, "tensor"), absl::StrCat("unknown tensor '", spec.tensor, "' (",
                                                            TensorNames(resolver.task()), ")")};
}

// The global extents, innermost first: the tensor's shape reversed, or the plan's dims, whose
// product must be the tensor's element count.
PlanOr<std::vector<int64_t>> ResolveGlobalDims(const PlanTensorMap& spec, const std::string& field,
                                               const Resolver& resolver, const TensorSpec& tensor) {
  std::vector<int64_t> shape;
  int64_t elements = 1;
  for (auto it = tensor.shape.rbegin(); it != tensor.shape.rend(); ++it) {
    auto extent = EvalIntExpr(*it, resolver.workload().axes);
    if (!extent.ok()) {
      return PlanError{FieldJoin(field, "tensor"),
                       absl::StrCat("shape of '", tensor.name, "': ", extent.status().message())};
    }
    shape.push_back(*extent);
    if (__builtin_mul_overflow(elements, *extent, &elements)) {
      return PlanError{FieldJoin(field, "tensor"), "tensor size overflows"};
    }
  }
  std::vector<int64_t> dims;
  if (spec.dims.empty()) {
    if (shape.size() > kMaxTensorMapRank) {
      return PlanError{FieldJoin(field, "tensor"),
                       absl::StrCat("'", tensor.name, "' has ", shape.size(),
                                    " dimensions; tensor maps have at most ", kMaxTensorMapRank,
                                    " (reshape with dims)")};
    }
    dims = std::move(shape);
  } else {
    int64_t product = 1;
    for (size_t d = 0; d < spec.dims.size(); ++d) {
      PlanOr<int64_t> extent = resolver.Eval(FieldIndex(FieldJoin(field, "dims"), d), spec.dims[d],
                                             1, kMaxGlobalExtent, "extent");
      if (!extent.ok()) return extent.error();
      dims.push_back(extent.value());
      if (__builtin_mul_overflow(product, extent.value(), &product)) {
        return PlanError{FieldJoin(field, "dims"), "the product of the extents overflows"};
      }
    }
    if (product != elements) {
      return PlanError{FieldJoin(field, "dims"),
                       absl::StrCat("the extents multiply to ", product, " elements but tensor '",
                                    tensor.name, "' has ", elements, resolver.Where())};
    }
  }
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] > kMaxGlobalExtent) {
      return PlanError{DimsField(spec, field), absl::StrCat("extent ", dims[d], " of dimension ", d,
                                                            " exceeds 2^32", resolver.Where())};
    }
  }
  return dims;
}

// The modes that depend on the rank or the element type (the plan-only rule, 32B interleave
// needs the 32B swizzle, is CheckLaunchPlan's).
std::optional<PlanError> CheckModes(const PlanTensorMap& spec, const std::string& field,
                                    const ResolvedTensorMap& map, const TensorSpec& tensor) {
  if (map.interleave != TensorMapInterleave::kNone && map.rank < 3) {
    return PlanError{
        FieldJoin(field, "interleave"),
        absl::StrCat("interleaved tensor maps need rank 3 or more; this one has rank ", map.rank)};
  }
  if (spec.oob_fill == TensorMapOobFill::kNan && tensor.dtype != DType::kBF16 &&
      tensor.dtype != DType::kFP16 && tensor.dtype != DType::kFP32) {
    return PlanError{FieldJoin(field, "oob_fill"),
                     absl::StrCat("\"nan\" needs a floating-point tensor; '", tensor.name, "' is ",
                                  DTypeName(tensor.dtype), " (copied as ",
                                  tensor.dtype == DType::kFP8E4M3 ? "bytes" : "integers", ")")};
  }
  return std::nullopt;
}

// box (one extent per dimension, 1..256) and element strides (none, or one per dimension,
// 1..8).
std::optional<PlanError> ResolveBoxAndStrides(const PlanTensorMap& spec, const std::string& field,
                                              const Resolver& resolver, ResolvedTensorMap& map) {
  const size_t rank = static_cast<size_t>(map.rank);
  if (spec.box.size() != rank) {
    return PlanError{FieldJoin(field, "box"),
                     absl::StrCat("has ", spec.box.size(), " entries for a rank-", map.rank,
                                  " tensor map (innermost first)")};
  }
  for (size_t d = 0; d < rank; ++d) {
    PlanOr<int64_t> extent = resolver.Eval(FieldIndex(FieldJoin(field, "box"), d), spec.box[d], 1,
                                           kMaxBoxExtent, "box extent");
    if (!extent.ok()) return extent.error();
    map.box.push_back(static_cast<uint32_t>(extent.value()));
  }
  if (!spec.element_strides.empty() && spec.element_strides.size() != rank) {
    return PlanError{FieldJoin(field, "element_strides"),
                     absl::StrCat("has ", spec.element_strides.size(), " entries for a rank-",
                                  map.rank, " tensor map")};
  }
  for (size_t d = 0; d < rank; ++d) {
    if (spec.element_strides.empty()) {
      map.element_strides.push_back(1);
      continue;
    }
    PlanOr<int64_t> stride =
        resolver.Eval(FieldIndex(FieldJoin(field, "element_strides"), d), spec.element_strides[d],
                      1, kMaxElementStride, "element stride");
    if (!stride.ok()) return stride.error();
    map.element_strides.push_back(static_cast<uint32_t>(stride.value()));
  }
  return std::nullopt;
}

// Without interleave, the inner box is a multiple of 16 bytes and at most the swizzle's span.
std::optional<PlanError> CheckInnerBox(const std::string& field, const Resolver& resolver,
                                       const ResolvedTensorMap& map, const TensorSpec& tensor) {
  if (map.interleave != TensorMapInterleave::kNone) return std::nullopt;
  const int64_t inner_bytes = int64_t{map.box[0]} * map.element_bytes;
  if (inner_bytes % 16 != 0) {
    return PlanError{FieldIndex(FieldJoin(field, "box"), 0),
                     absl::StrCat("the inner box is ", inner_bytes, " bytes (", map.box[0], " x ",
                                  map.element_bytes, "-byte ", DTypeName(tensor.dtype),
                                  "); it must be a multiple of 16 bytes", resolver.Where())};
  }
  const int64_t span = map.swizzle == TensorMapSwizzle::k32B    ? 32
                       : map.swizzle == TensorMapSwizzle::k64B  ? 64
                       : map.swizzle == TensorMapSwizzle::k128B ? 128
                                                                : 0;
  if (span > 0 && inner_bytes > span) {
    return PlanError{
        FieldIndex(FieldJoin(field, "box"), 0),
        absl::StrCat("the inner box is ", inner_bytes, " bytes, more than the ", span,
                     "-byte span of swizzle \"", std::string(TensorMapSwizzleName(map.swizzle)),
                     "\"", resolver.Where())};
  }
  return std::nullopt;
}

// Contiguous global strides (dimension 1 upward): multiples of 16 bytes (32 with 32-byte
// interleave), below 2^40.
std::optional<PlanError> ResolveGlobalStrides(const PlanTensorMap& spec, const std::string& field,
                                              const Resolver& resolver,
                                              const std::vector<int64_t>& dims,
                                              ResolvedTensorMap& map) {
  const int64_t stride_multiple = map.interleave == TensorMapInterleave::k32B ? 32 : 16;
  int64_t stride = map.element_bytes;
  for (size_t d = 0; d + 1 < dims.size(); ++d) {
    if (__builtin_mul_overflow(stride, dims[d], &stride) || stride >= kMaxGlobalStride) {
      return PlanError{
          DimsField(spec, field),
          absl::StrCat("the stride of dimension ", d + 1, " reaches 2^40 bytes", resolver.Where())};
    }
    if (stride % stride_multiple != 0) {
      return PlanError{
          DimsField(spec, field),
          absl::StrCat("the stride of dimension ", d + 1, " is ", stride,
                       " bytes; TMA needs a multiple of ", stride_multiple, resolver.Where())};
    }
    map.global_strides_bytes.push_back(static_cast<uint64_t>(stride));
  }
  return std::nullopt;
}

}  // namespace

PlanOr<ResolvedTensorMap> ResolveTensorMap(const PlanTensorMap& spec, const std::string& field,
                                           const Resolver& resolver,
                                           const std::vector<PlanScratch>& scratch) {
  PlanOr<int> tensor_index = ResolveMapTensor(spec, field, resolver, scratch);
  if (!tensor_index.ok()) return tensor_index.error();
  const TensorSpec& tensor = resolver.task().tensors[static_cast<size_t>(tensor_index.value())];
  ResolvedTensorMap map;
  map.name = spec.name;
  map.tensor = spec.tensor;
  map.tensor_index = tensor_index.value();
  map.data_type = MapDataType(tensor.dtype);
  map.element_bytes = DTypeBytes(tensor.dtype);
  map.swizzle = spec.swizzle;
  map.interleave = spec.interleave;
  map.l2_promotion = spec.l2_promotion;
  map.oob_fill = spec.oob_fill;

  PlanOr<std::vector<int64_t>> dims = ResolveGlobalDims(spec, field, resolver, tensor);
  if (!dims.ok()) return dims.error();
  map.rank = static_cast<int>(dims.value().size());
  for (int64_t extent : dims.value()) map.global_dims.push_back(static_cast<uint64_t>(extent));

  if (auto error = CheckModes(spec, field, map, tensor)) return *error;
  if (auto error = ResolveBoxAndStrides(spec, field, resolver, map)) return *error;
  if (auto error = CheckInnerBox(field, resolver, map, tensor)) return *error;
  if (auto error = ResolveGlobalStrides(spec, field, resolver, dims.value(), map)) return *error;
  return map;
}

}  // namespace ptxbench::plan_resolve
