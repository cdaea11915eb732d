// The arguments of one launch: what each name refers to, and whether it fits the kernel's
// parameter.
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/expr.h"
#include "common/json_fields.h"
#include "worker/engine/plan_resolve.h"

namespace ptxbench::plan_resolve {
namespace {

template <typename T>
std::string DeclaredNames(const std::vector<T>& items, const char* what) {
  if (items.empty()) return absl::StrCat("the plan declares no ", what);
  return absl::StrCat(what, ": ", absl::StrJoin(items, ", ", [](std::string* out, const T& item) {
                        out->append(item.name);
                      }));
}

template <typename T>
int FindByName(const std::vector<T>& items, const std::string& name) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].name == name) return static_cast<int>(i);
  }
  return -1;
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

// A scalar argument: an axis (an integer) or a task scalar (a real), at its default width of
// 4 bytes until the parameter says otherwise.
PlanOr<ResolvedArgument> ResolveScalar(ResolvedArgument out, const std::string& name_field,
                                       const Resolver& resolver) {
  const Task& task = resolver.task();
  const auto& axes = resolver.workload().axes;
  if (auto axis = axes.find(out.name); axis != axes.end()) {
    out.scalar_is_integer = true;
    out.int_value = axis->second;
    out.size_bytes = 4;
    return out;
  }
  if (auto scalar = task.scalars.find(out.name); scalar != task.scalars.end()) {
    auto value = EvalRealExpr(scalar->second, axes);
    if (!value.ok()) {
      return PlanError{name_field,
                       absl::StrCat("task scalar '", out.name, "': ", value.status().message())};
    }
    out.scalar_is_integer = false;
    out.real_value = *value;
    out.size_bytes = 4;
    return out;
  }
  std::vector<std::string> names(task.axes);
  for (const auto& [scalar_name, text] : task.scalars) names.push_back(scalar_name);
  return PlanError{name_field, absl::StrCat("unknown scalar '", out.name, "' (axes and scalars: ",
                                            absl::StrJoin(names, ", "), ")")};
}

// What `arg` names: a task tensor, a scratch buffer or tensor map of the plan, an axis or a
// task scalar.
PlanOr<ResolvedArgument> ResolveName(const PlanArgument& arg, const std::string& arg_field,
                                     const Resolver& resolver, const LaunchPlan& plan,
                                     const ResolvedPlan& resolved) {
  const std::string name_field = FieldJoin(arg_field, PlanArgumentKindName(arg.kind));
  ResolvedArgument out;
  out.kind = arg.kind;
  out.name = arg.name;
  switch (arg.kind) {
    case PlanArgument::Kind::kTensor:
      out.index = FindTensor(resolver.task(), arg.name);
      if (out.index < 0) {
        return PlanError{name_field, absl::StrCat("unknown tensor '", arg.name, "' (",
                                                  TensorNames(resolver.task()), ")")};
      }
      out.size_bytes = kPointerBytes;
      return out;
    case PlanArgument::Kind::kScratch:
      out.index = FindByName(resolved.scratch, arg.name);
      if (out.index < 0) {
        return PlanError{name_field,
                         absl::StrCat("unknown scratch buffer '", arg.name, "' (",
                                      DeclaredNames(plan.scratch, "scratch buffers"), ")")};
      }
      out.size_bytes = kPointerBytes;
      return out;
    case PlanArgument::Kind::kTensorMap:
      out.index = FindByName(resolved.tensor_maps, arg.name);
      if (out.index < 0) {
        return PlanError{name_field,
                         absl::StrCat("unknown tensor map '", arg.name, "' (",
                                      DeclaredNames(plan.tensor_maps, "tensor maps"), ")")};
      }
      out.size_bytes = kTensorMapBytes;
      return out;
    case PlanArgument::Kind::kScalar:
      return ResolveScalar(std::move(out), name_field, resolver);
  }
  return PlanError{name_field, "unknown argument kind"};
}

// Whether `out` fits kernel parameter `index`; a scalar takes the parameter's width.
std::optional<PlanError> FitParameter(ResolvedArgument& out, size_t index,
                                      const std::string& arg_field, const Resolver& resolver,
                                      const KernelSignature& kernel) {
  const KernelParameter& parameter = kernel.parameters[index];
  const bool scalar_width_ok = out.kind == PlanArgument::Kind::kScalar &&
                               (parameter.size_bytes == 4 || parameter.size_bytes == 8);
  if (scalar_width_ok) {
    out.size_bytes = parameter.size_bytes;
    if (out.scalar_is_integer && out.size_bytes == 4 &&
        (out.int_value > std::numeric_limits<int32_t>::max() ||
         out.int_value < std::numeric_limits<int32_t>::min())) {
      return PlanError{arg_field, absl::StrCat("axis '", out.name, "' is ", out.int_value,
                                               ", too large for kernel '", kernel.name,
                                               "''s 4-byte parameter ", index, resolver.Where())};
    }
  } else if (parameter.size_bytes != out.size_bytes) {
    return PlanError{arg_field, absl::StrCat("kernel '", kernel.name, "' parameter ", index, " ('",
                                             parameter.name, "') is ", parameter.size_bytes,
                                             " bytes; ", ArgumentSizeDescription(out))};
  }
  if (out.kind == PlanArgument::Kind::kTensorMap && parameter.alignment < kTensorMapAlignment) {
    return PlanError{arg_field, absl::StrCat("kernel '", kernel.name, "' parameter ", index, " is ",
                                             parameter.alignment,
                                             "-byte aligned; a CUtensorMap must be 64-byte aligned "
                                             "(struct alignas(64) CUtensorMap, passed as "
                                             "'const __grid_constant__ CUtensorMap')")};
  }
  return std::nullopt;
}

}  // namespace

PlanOr<std::vector<ResolvedArgument>> ResolveArguments(
    const PlanLaunch& spec, const std::string& field, const Resolver& resolver,
    const LaunchPlan& plan, const ResolvedPlan& resolved, const KernelSignature& kernel) {
  const std::string args_field = FieldJoin(field, "args");
  std::vector<ResolvedArgument> args;
  for (size_t a = 0; a < spec.args.size(); ++a) {
    PlanOr<ResolvedArgument> argument =
        ResolveName(spec.args[a], FieldIndex(args_field, a), resolver, plan, resolved);
    if (!argument.ok()) return argument.error();
    args.push_back(std::move(argument).value());
  }
  // Names first, then the count, then sizes: a missing argument shifts every later one, and the
  // count names that cause better than a cascade of size mismatches would.
  if (spec.args.size() != kernel.parameters.size()) {
    return PlanError{args_field,
                     absl::StrCat(spec.args.size(), " arguments for kernel '", kernel.name,
                                  "', which takes ", kernel.parameters.size(), " parameters")};
  }
  for (size_t a = 0; a < args.size(); ++a) {
    if (auto error = FitParameter(args[a], a, FieldIndex(args_field, a), resolver, kernel)) {
      return *error;
    }
  }
  return args;
}

}  // namespace ptxbench::plan_resolve
