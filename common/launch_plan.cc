#include "common/launch_plan.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/expr.h"

namespace ptxbench {
namespace {

using nlohmann::json;

PlanError Error(std::string field, std::string message) {
  return PlanError{std::move(field), std::move(message)};
}

// "has 4 entries; 1 to 3 are allowed".
std::string CountMessage(size_t count, size_t min_count, size_t max_count) {
  const std::string allowed = min_count == 0 ? absl::StrCat("at most ", max_count)
                                             : absl::StrCat(min_count, " to ", max_count);
  return absl::StrCat("has ", count, " entries; ", allowed, " are allowed");
}

std::optional<PlanError> CheckCount(size_t count, const std::string& field, size_t min_count,
                                    size_t max_count) {
  if (count < min_count || count > max_count) {
    return Error(field, CountMessage(count, min_count, max_count));
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Structural checks of the typed plan.

std::optional<PlanError> CheckText(const std::string& text, const std::string& field,
                                   size_t max_bytes, const char* what) {
  if (text.size() > max_bytes) {
    return Error(
        field, absl::StrCat(what, " of ", text.size(), " bytes exceeds the limit of ", max_bytes));
  }
  if (std::optional<size_t> at = FindControlCharacter(text)) {
    return Error(field, absl::StrCat("contains a control character (byte ", *at, ")"));
  }
  if (std::optional<size_t> at = FindInvalidUtf8(text)) {
    return Error(field, absl::StrCat("not valid UTF-8 (byte ", *at, ")"));
  }
  return std::nullopt;
}

// A kernel's name is matched against the module's entries, whatever their spelling (PTX allows
// '$' and '%'); every other name refers to a task's or the plan's identifier.
std::optional<PlanError> CheckName(const std::string& name, const std::string& field,
                                   bool identifier) {
  if (name.empty()) return Error(field, "must not be empty");
  if (auto error = CheckText(name, field, kMaxPlanNameBytes, "a name")) return error;
  if (identifier && !IsIdentifier(name)) {
    return Error(field, absl::StrCat(QuoteForMessage(name), " is not an identifier"));
  }
  return std::nullopt;
}

std::optional<PlanError> CheckExpression(const std::string& text, const std::string& field) {
  if (text.empty()) return Error(field, "empty expression");
  if (auto error = CheckText(text, field, kMaxPlanExpressionBytes, "an expression")) return error;
  auto parsed = Expr::Parse(text, ExprMode::kInteger);
  if (!parsed.ok()) return Error(field, std::string(parsed.status().message()));
  return std::nullopt;
}

std::optional<PlanError> CheckExpressions(const std::vector<std::string>& list,
                                          const std::string& field, size_t min_count,
                                          size_t max_count) {
  if (auto error = CheckCount(list.size(), field, min_count, max_count)) return error;
  for (size_t i = 0; i < list.size(); ++i) {
    if (auto error = CheckExpression(list[i], FieldIndex(field, i))) return error;
  }
  return std::nullopt;
}

std::optional<PlanError> CheckLaunch(const PlanLaunch& launch, const std::string& field) {
  if (auto error = CheckName(launch.kernel, FieldJoin(field, "kernel"), false)) return error;
  if (auto error =
          CheckExpressions(launch.grid, FieldJoin(field, "grid"), 1, kMaxLaunchDimensions)) {
    return error;
  }
  if (auto error =
          CheckExpressions(launch.block, FieldJoin(field, "block"), 1, kMaxLaunchDimensions)) {
    return error;
  }
  if (auto error =
          CheckExpressions(launch.cluster, FieldJoin(field, "cluster"), 0, kMaxLaunchDimensions)) {
    return error;
  }
  if (!launch.dynamic_shared_bytes.empty()) {
    if (auto error = CheckExpression(launch.dynamic_shared_bytes,
                                     FieldJoin(field, "dynamic_shared_bytes"))) {
      return error;
    }
  }
  const std::string args_field = FieldJoin(field, "args");
  if (auto error = CheckCount(launch.args.size(), args_field, 0, kMaxPlanArgsPerLaunch)) {
    return error;
  }
  for (size_t a = 0; a < launch.args.size(); ++a) {
    const PlanArgument& arg = launch.args[a];
    if (auto error = CheckName(
            arg.name, FieldJoin(FieldIndex(args_field, a), PlanArgumentKindName(arg.kind)), true)) {
      return error;
    }
  }
  return std::nullopt;
}

std::optional<PlanError> CheckTensorMap(const PlanTensorMap& map, const std::string& field) {
  if (auto error = CheckName(map.tensor, FieldJoin(field, "tensor"), true)) return error;
  if (auto error = CheckExpressions(map.box, FieldJoin(field, "box"), 1, kMaxTensorMapRank)) {
    return error;
  }
  if (auto error = CheckExpressions(map.element_strides, FieldJoin(field, "element_strides"), 0,
                                    kMaxTensorMapRank)) {
    return error;
  }
  if (auto error = CheckExpressions(map.dims, FieldJoin(field, "dims"), 0, kMaxTensorMapRank)) {
    return error;
  }
  // cuTensorMapEncodeTiled: CU_TENSOR_MAP_INTERLEAVE_32B requires CU_TENSOR_MAP_SWIZZLE_32B
  // (cuda.h, CUDA 13.0).
  if (map.interleave == TensorMapInterleave::k32B && map.swizzle != TensorMapSwizzle::k32B) {
    return Error(FieldJoin(field, "swizzle"), "32B interleave requires swizzle \"32B\"");
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// JSON -> LaunchPlan: the reader checks only the shape (objects, keys, types, presence, choice
// names); every other check is CheckLaunchPlan's, so that a plan read from JSON and the same plan
// built in code are refused alike. ParseJson's limits (kMaxPlanJsonBytes, 4096 entries per list)
// bound the reading of a hostile list before its length is checked.

PlanOr<std::vector<std::string>> ReadExpressionList(const json& object, const std::string& parent,
                                                    std::string_view key, bool required) {
  const std::string field = FieldJoin(parent, key);
  PlanOr<const json*> member = GetMember(object, parent, key, required);
  if (!member.ok()) return member.error();
  if (member.value() == nullptr) return std::vector<std::string>();
  const json& list = *member.value();
  if (!list.is_array()) return Error(field, "expected an array of expressions");
  std::vector<std::string> out;
  for (size_t i = 0; i < list.size(); ++i) {
    PlanOr<std::string> text = ReadExpressionText(list[i], FieldIndex(field, i));
    if (!text.ok()) return text.error();
    out.push_back(std::move(text).value());
  }
  return out;
}

PlanOr<PlanArgument> ReadArgument(const json& value, const std::string& field) {
  const std::string shape =
      "an argument is an object with exactly one key: tensor, scratch, scalar or tensor_map";
  if (!value.is_object() || value.size() != 1) return Error(field, shape);
  const auto& [key, name] = *value.items().begin();
  const std::optional<PlanArgument::Kind> kind = FindChoice(kArgumentKindChoices, key);
  if (!kind.has_value()) {
    return Error(FieldJoin(field, key), absl::StrCat("unknown argument kind; ", shape));
  }
  if (!name.is_string()) return Error(FieldJoin(field, key), "expected a name (a string)");
  return PlanArgument{*kind, name.get<std::string>()};
}

PlanOr<PlanLaunch> ReadLaunch(const json& value, const std::string& field) {
  if (!value.is_object()) return Error(field, "expected an object");
  if (auto error = CheckKeys(value, field, PlanJsonKeys(PlanObject::kLaunch))) return *error;
  PlanLaunch launch;
  PlanOr<std::string> kernel = GetString(value, field, "kernel", true, /*allow_empty=*/true);
  if (!kernel.ok()) return kernel.error();
  launch.kernel = std::move(kernel).value();
  PlanOr<std::vector<std::string>> grid = ReadExpressionList(value, field, "grid", true);
  if (!grid.ok()) return grid.error();
  launch.grid = std::move(grid).value();
  PlanOr<std::vector<std::string>> block = ReadExpressionList(value, field, "block", true);
  if (!block.ok()) return block.error();
  launch.block = std::move(block).value();
  PlanOr<std::vector<std::string>> cluster = ReadExpressionList(value, field, "cluster", false);
  if (!cluster.ok()) return cluster.error();
  launch.cluster = std::move(cluster).value();
  if (auto it = value.find("dynamic_shared_bytes"); it != value.end()) {
    PlanOr<std::string> bytes = ReadExpressionText(*it, FieldJoin(field, "dynamic_shared_bytes"));
    if (!bytes.ok()) return bytes.error();
    launch.dynamic_shared_bytes = std::move(bytes).value();
    if (launch.dynamic_shared_bytes.empty()) {
      return Error(FieldJoin(field, "dynamic_shared_bytes"), "empty expression");
    }
  }
  if (auto it = value.find("args"); it != value.end()) {
    const std::string args_field = FieldJoin(field, "args");
    if (!it->is_array()) return Error(args_field, "expected an array of arguments");
    for (size_t i = 0; i < it->size(); ++i) {
      PlanOr<PlanArgument> argument = ReadArgument((*it)[i], FieldIndex(args_field, i));
      if (!argument.ok()) return argument.error();
      launch.args.push_back(std::move(argument).value());
    }
  }
  return launch;
}

PlanOr<PlanScratch> ReadScratch(const json& value, const std::string& field) {
  if (!value.is_object()) return Error(field, "expected an object");
  if (auto error = CheckKeys(value, field, PlanJsonKeys(PlanObject::kScratch))) return *error;
  PlanScratch buffer;
  PlanOr<std::string> name = GetString(value, field, "name", true, /*allow_empty=*/true);
  if (!name.ok()) return name.error();
  buffer.name = std::move(name).value();
  PlanOr<const json*> bytes = GetMember(value, field, "bytes", true);
  if (!bytes.ok()) return bytes.error();
  PlanOr<std::string> text = ReadExpressionText(*bytes.value(), FieldJoin(field, "bytes"));
  if (!text.ok()) return text.error();
  buffer.bytes = std::move(text).value();
  return buffer;
}

template <typename Enum, size_t N>
std::optional<PlanError> ReadChoice(const json& object, const std::string& parent,
                                    std::string_view key,
                                    const std::array<Choice<Enum>, N>& choices, Enum& out) {
  PlanOr<std::string> text = GetString(object, parent, key, false, /*allow_empty=*/true);
  if (!text.ok()) return text.error();
  PlanOr<Enum> value = ParseChoice(choices, text.value(), FieldJoin(parent, key));
  if (!value.ok()) return value.error();
  out = value.value();
  return std::nullopt;
}

PlanOr<PlanTensorMap> ReadTensorMap(const json& value, const std::string& field) {
  if (!value.is_object()) return Error(field, "expected an object");
  if (auto error = CheckKeys(value, field, PlanJsonKeys(PlanObject::kTensorMap))) return *error;
  PlanTensorMap map;
  PlanOr<std::string> name = GetString(value, field, "name", true, /*allow_empty=*/true);
  if (!name.ok()) return name.error();
  map.name = std::move(name).value();
  PlanOr<std::string> tensor = GetString(value, field, "tensor", true, /*allow_empty=*/true);
  if (!tensor.ok()) return tensor.error();
  map.tensor = std::move(tensor).value();
  PlanOr<std::vector<std::string>> box = ReadExpressionList(value, field, "box", true);
  if (!box.ok()) return box.error();
  map.box = std::move(box).value();
  PlanOr<std::vector<std::string>> strides =
      ReadExpressionList(value, field, "element_strides", false);
  if (!strides.ok()) return strides.error();
  map.element_strides = std::move(strides).value();
  if (auto error = ReadChoice(value, field, "swizzle", kSwizzleChoices, map.swizzle)) {
    return *error;
  }
  if (auto error = ReadChoice(value, field, "interleave", kInterleaveChoices, map.interleave)) {
    return *error;
  }
  if (auto error =
          ReadChoice(value, field, "l2_promotion", kL2PromotionChoices, map.l2_promotion)) {
    return *error;
  }
  if (auto error = ReadChoice(value, field, "oob_fill", kOobFillChoices, map.oob_fill)) {
    return *error;
  }
  PlanOr<std::vector<std::string>> dims = ReadExpressionList(value, field, "dims", false);
  if (!dims.ok()) return dims.error();
  map.dims = std::move(dims).value();
  return map;
}

// Reads the array `key` of the plan, entry by entry with `read`.
template <typename T, typename Read>
std::optional<PlanError> ReadList(const json& root, std::string_view key, bool required, Read read,
                                  std::vector<T>& out) {
  PlanOr<const json*> member = GetMember(root, "", key, required);
  if (!member.ok()) return member.error();
  if (member.value() == nullptr) return std::nullopt;
  const json& list = *member.value();
  const std::string field(key);
  if (!list.is_array()) return Error(field, "expected an array");
  for (size_t i = 0; i < list.size(); ++i) {
    PlanOr<T> entry = read(list[i], FieldIndex(field, i));
    if (!entry.ok()) return entry.error();
    out.push_back(std::move(entry).value());
  }
  return std::nullopt;
}

JsonLimits PlanJsonLimits() {
  JsonLimits limits;
  limits.max_bytes = kMaxPlanJsonBytes;
  limits.max_depth = kMaxPlanJsonDepth;
  return limits;
}

// Parses `text`; malformed JSON is described by `where` (the error's field and the position
// in the caller's terms).
template <typename Where>
PlanOr<LaunchPlan> ParseWith(std::string_view text, const std::string& whole_field, Where where) {
  if (text.size() > kMaxPlanJsonBytes) {
    return Error(whole_field, absl::StrCat("the plan is ", text.size(), " bytes; the limit is ",
                                           kMaxPlanJsonBytes));
  }
  std::variant<json, JsonParseError> parsed = ParseJson(text, PlanJsonLimits());
  if (const JsonParseError* failure = std::get_if<JsonParseError>(&parsed)) {
    if (failure->malformed) {
      return Error(whole_field,
                   absl::StrCat("not valid JSON at ", where(*failure), ": ", failure->message));
    }
    return Error(failure->field, failure->message);
  }
  return LaunchPlanFromJson(std::get<json>(parsed));
}

}  // namespace

std::string PlanArgumentKindName(PlanArgument::Kind kind) {
  return std::string(ChoiceName(kArgumentKindChoices, kind));
}

std::string_view TensorMapSwizzleName(TensorMapSwizzle swizzle) {
  return ChoiceName(kSwizzleChoices, swizzle);
}

const std::vector<std::string_view>& PlanJsonKeys(PlanObject object) {
  static const std::vector<std::string_view> kLaunchPlan = {"launches", "scratch", "tensor_maps"};
  static const std::vector<std::string_view> kLaunch = {
      "kernel", "grid", "block", "cluster", "dynamic_shared_bytes", "args"};
  static const std::vector<std::string_view> kArgument = [] {
    std::vector<std::string_view> keys;
    keys.reserve(kArgumentKindChoices.size());
    for (const auto& choice : kArgumentKindChoices) keys.push_back(choice.name);
    return keys;
  }();
  static const std::vector<std::string_view> kScratch = {"name", "bytes"};
  static const std::vector<std::string_view> kTensorMap = {
      "name",         "tensor",   "box", "element_strides", "swizzle", "interleave",
      "l2_promotion", "oob_fill", "dims"};
  switch (object) {
    case PlanObject::kLaunchPlan:
      return kLaunchPlan;
    case PlanObject::kLaunch:
      return kLaunch;
    case PlanObject::kArgument:
      return kArgument;
    case PlanObject::kScratch:
      return kScratch;
    case PlanObject::kTensorMap:
      return kTensorMap;
  }
  return kLaunchPlan;
}

std::optional<PlanError> CheckLaunchPlan(const LaunchPlan& plan) {
  if (auto error = CheckCount(plan.launches.size(), "launches", 1, kMaxPlanLaunches)) {
    return error;
  }
  if (auto error = CheckCount(plan.scratch.size(), "scratch", 0, kMaxPlanScratchBuffers)) {
    return error;
  }
  if (auto error = CheckCount(plan.tensor_maps.size(), "tensor_maps", 0, kMaxPlanTensorMaps)) {
    return error;
  }
  for (size_t i = 0; i < plan.launches.size(); ++i) {
    if (auto error = CheckLaunch(plan.launches[i], FieldIndex("launches", i))) return error;
  }
  std::set<std::string> scratch_names;
  for (size_t i = 0; i < plan.scratch.size(); ++i) {
    const PlanScratch& buffer = plan.scratch[i];
    const std::string field = FieldIndex("scratch", i);
    if (auto error = CheckName(buffer.name, FieldJoin(field, "name"), true)) return error;
    if (!scratch_names.insert(buffer.name).second) {
      return Error(FieldJoin(field, "name"),
                   absl::StrCat("duplicate scratch buffer '", buffer.name, "'"));
    }
    if (auto error = CheckExpression(buffer.bytes, FieldJoin(field, "bytes"))) return error;
  }
  std::set<std::string> map_names;
  for (size_t i = 0; i < plan.tensor_maps.size(); ++i) {
    const PlanTensorMap& map = plan.tensor_maps[i];
    const std::string field = FieldIndex("tensor_maps", i);
    if (auto error = CheckName(map.name, FieldJoin(field, "name"), true)) return error;
    if (!map_names.insert(map.name).second) {
      return Error(FieldJoin(field, "name"), absl::StrCat("duplicate tensor map '", map.name, "'"));
    }
    if (auto error = CheckTensorMap(map, field)) return error;
  }
  return std::nullopt;
}

PlanOr<LaunchPlan> LaunchPlanFromJson(const json& root) {
  if (!root.is_object()) return Error("", "a launch plan is a JSON object");
  if (auto error = CheckKeys(root, "", PlanJsonKeys(PlanObject::kLaunchPlan))) return *error;
  LaunchPlan plan;
  if (auto error = ReadList(root, "launches", true, ReadLaunch, plan.launches)) return *error;
  if (auto error = ReadList(root, "scratch", false, ReadScratch, plan.scratch)) return *error;
  if (auto error = ReadList(root, "tensor_maps", false, ReadTensorMap, plan.tensor_maps)) {
    return *error;
  }
  if (auto error = CheckLaunchPlan(plan)) return *error;
  return plan;
}

PlanOr<LaunchPlan> ParseLaunchPlanJson(std::string_view text) {
  return ParseWith(text, "", [](const JsonParseError& failure) {
    return absl::StrCat("line ", failure.line, " (byte ", failure.byte, ")");
  });
}

PlanOr<LaunchPlan> ParsePlanBlockJson(std::string_view text, size_t first_line) {
  return ParseWith(text, "PTXBENCH_PLAN", [first_line](const JsonParseError& failure) {
    return absl::StrCat("source line ", first_line + failure.line - 1);
  });
}

json ToJson(const LaunchPlan& plan) {
  json launches = json::array();
  for (const PlanLaunch& launch : plan.launches) {
    json args = json::array();
    for (const PlanArgument& arg : launch.args) {
      args.push_back({{PlanArgumentKindName(arg.kind), arg.name}});
    }
    json entry = {
        {"kernel", launch.kernel}, {"grid", launch.grid}, {"block", launch.block}, {"args", args}};
    if (!launch.cluster.empty()) entry["cluster"] = launch.cluster;
    if (!launch.dynamic_shared_bytes.empty()) {
      entry["dynamic_shared_bytes"] = launch.dynamic_shared_bytes;
    }
    launches.push_back(std::move(entry));
  }
  json out = {{"launches", std::move(launches)}};
  if (!plan.scratch.empty()) {
    json scratch = json::array();
    for (const PlanScratch& s : plan.scratch) {
      scratch.push_back({{"name", s.name}, {"bytes", s.bytes}});
    }
    out["scratch"] = std::move(scratch);
  }
  if (!plan.tensor_maps.empty()) {
    json maps = json::array();
    for (const PlanTensorMap& m : plan.tensor_maps) {
      json entry = {{"name", m.name}, {"tensor", m.tensor}, {"box", m.box}};
      if (!m.element_strides.empty()) entry["element_strides"] = m.element_strides;
      if (m.swizzle != kSwizzleChoices.front().value) {
        entry["swizzle"] = ChoiceName(kSwizzleChoices, m.swizzle);
      }
      if (m.interleave != kInterleaveChoices.front().value) {
        entry["interleave"] = ChoiceName(kInterleaveChoices, m.interleave);
      }
      if (m.l2_promotion != kL2PromotionChoices.front().value) {
        entry["l2_promotion"] = ChoiceName(kL2PromotionChoices, m.l2_promotion);
      }
      if (m.oob_fill != kOobFillChoices.front().value) {
        entry["oob_fill"] = ChoiceName(kOobFillChoices, m.oob_fill);
      }
      if (!m.dims.empty()) entry["dims"] = m.dims;
      maps.push_back(std::move(entry));
    }
    out["tensor_maps"] = std::move(maps);
  }
  return out;
}

}  // namespace ptxbench
