#include "worker/engine/plan.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/expr.h"
#include "common/json_fields.h"
#include "worker/engine/plan_resolve.h"
#include "worker/engine/source_lexer.h"

namespace ptxbench {

namespace plan_resolve {

PlanOr<int64_t> Resolver::Eval(const std::string& field, const std::string& text, int64_t min_value,
                               int64_t max_value, const std::string& what) const {
  auto expr = Expr::Parse(text, ExprMode::kInteger);
  if (!expr.ok()) return PlanError{field, std::string(expr.status().message())};
  auto value = expr->EvaluateInt(workload_.axes);
  if (!value.ok()) return PlanError{field, absl::StrCat(value.status().message(), Where())};
  if (*value < min_value) {
    return PlanError{field, absl::StrCat(what, " ", *value, " ('", text, "') is below the minimum ",
                                         min_value, Where())};
  }
  if (*value > max_value) {
    return PlanError{field, absl::StrCat(what, " ", *value, " ('", text, "') exceeds the limit ",
                                         max_value, Where())};
  }
  return *value;
}

std::string Resolver::Where() const { return absl::StrCat(" (workload '", workload_.name, "')"); }

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

}  // namespace plan_resolve

namespace {

using nlohmann::json;
using plan_resolve::Resolver;

constexpr char kPlanMarker[] = "PTXBENCH_PLAN";

PlanError Error(std::string field, std::string message) {
  return PlanError{std::move(field), std::move(message)};
}

// Scratch buffers: positive sizes, each and their total within the task's cap; names are not
// task tensors (the plan alone decided they are unique identifiers).
std::optional<PlanError> ResolveScratch(const LaunchPlan& plan, const Resolver& resolver,
                                        ResolvedPlan& resolved) {
  const Task& task = resolver.task();
  for (size_t i = 0; i < plan.scratch.size(); ++i) {
    const PlanScratch& spec = plan.scratch[i];
    const std::string field = FieldIndex("scratch", i);
    if (plan_resolve::FindTensor(task, spec.name) >= 0) {
      return Error(FieldJoin(field, "name"),
                   absl::StrCat("'", spec.name, "' is already a task tensor"));
    }
    auto bytes = EvalIntExpr(spec.bytes, resolver.workload().axes);
    if (!bytes.ok()) {
      return Error(FieldJoin(field, "bytes"),
                   absl::StrCat(bytes.status().message(), resolver.Where()));
    }
    if (*bytes < 1) {
      return Error(FieldJoin(field, "bytes"),
                   absl::StrCat(*bytes, " is not a positive size", resolver.Where()));
    }
    if (*bytes > task.scratch_cap_bytes) {
      return Error(FieldJoin(field, "bytes"),
                   absl::StrCat(*bytes, " exceeds the task's scratch cap ", task.scratch_cap_bytes,
                                resolver.Where()));
    }
    resolved.total_scratch_bytes += *bytes;
    if (resolved.total_scratch_bytes > task.scratch_cap_bytes) {
      return Error("scratch", absl::StrCat("the buffers total ", resolved.total_scratch_bytes,
                                           " bytes, more than the task's scratch cap ",
                                           task.scratch_cap_bytes, resolver.Where()));
    }
    resolved.scratch.push_back({spec.name, *bytes});
  }
  return std::nullopt;
}

// Every output must be reachable by some launch; an output no kernel can write is a plan
// mistake worth naming before anything runs.
std::optional<PlanError> CheckOutputsReached(const Task& task, const ResolvedPlan& resolved) {
  for (size_t t = 0; t < task.tensors.size(); ++t) {
    if (task.tensors[t].role != TensorRole::kOutput) continue;
    bool reached = false;
    for (const ResolvedLaunch& launch : resolved.launches) {
      for (const ResolvedArgument& arg : launch.args) {
        if (arg.kind == PlanArgument::Kind::kTensor && arg.index == static_cast<int>(t)) {
          reached = true;
        }
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
  return std::nullopt;
}

}  // namespace

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
  const size_t first_line =
      block->line + static_cast<size_t>(std::count(
                        block->text.begin(),
                        block->text.begin() + static_cast<std::ptrdiff_t>(json_start), '\n'));
  PlanOr<LaunchPlan> plan = ParsePlanBlockJson(json_text, first_line);
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
  if (std::optional<PlanError> error = CheckLaunchPlan(plan)) return *error;
  const Resolver resolver(task, workload, limits);
  ResolvedPlan resolved;
  resolved.workload = workload.name;
  if (auto error = ResolveScratch(plan, resolver, resolved)) return *error;
  for (size_t i = 0; i < plan.tensor_maps.size(); ++i) {
    PlanOr<ResolvedTensorMap> map = plan_resolve::ResolveTensorMap(
        plan.tensor_maps[i], FieldIndex("tensor_maps", i), resolver, plan.scratch);
    if (!map.ok()) return map.error();
    resolved.tensor_maps.push_back(std::move(map).value());
  }
  for (size_t i = 0; i < plan.launches.size(); ++i) {
    PlanOr<ResolvedLaunch> launch = plan_resolve::ResolveLaunch(
        plan.launches[i], FieldIndex("launches", i), resolver, plan, resolved, kernels);
    if (!launch.ok()) return launch.error();
    resolved.launches.push_back(std::move(launch).value());
  }
  if (auto error = CheckOutputsReached(task, resolved)) return *error;
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
