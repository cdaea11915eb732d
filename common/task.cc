#include "common/task.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <limits>
#include <optional>
#include <set>
#include <utility>
#include <variant>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/expr.h"
#include "common/files.h"
#include "common/json_fields.h"
#include "common/sha256.h"
#include "common/status.h"
#include "common/target_families.h"
#include "common/verdict.h"

namespace ptxbench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Task files are small text; anything larger is a mistake (a build artifact named by accident).
constexpr uintmax_t kMaxTaskFileBytes = 4u << 20;

// Largest workload extent accepted per axis: 2^40 leaves room for products of three axes and an
// element size in int64 before the overflow checks fire on any realistic shape.
constexpr int64_t kMaxAxisValue = int64_t{1} << 40;

constexpr int kMaxTrials = 100;

const std::set<std::string>& ReservedNames() {
  static const std::set<std::string>* const kNames =
      new std::set<std::string>{"ceil_div", "min", "max", "sqrt"};
  return *kNames;
}

bool IsLowerSnake(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::islower(static_cast<unsigned char>(c)) ||
           std::isdigit(static_cast<unsigned char>(c)) || c == '_';
  });
}

// Validation errors carry the file and the field: "tasks/x/task.json: field 'workloads[1].axes':
// missing axis 'K'".
class FieldErrors {
 public:
  explicit FieldErrors(std::string file) : file_(std::move(file)) {}

  absl::Status Error(const std::string& field, const std::string& problem) const {
    return absl::InvalidArgumentError(absl::StrCat(file_, ": field '", field, "': ", problem));
  }
  const std::string& file() const { return file_; }

 private:
  std::string file_;
};

std::string NamedBy(const std::string& field) {
  return absl::StrCat("named by task.json field '", field, "'");
}

// The field readers are common/json_fields.h's; these adapters put the file in front of the
// field's error ("tasks/x/task.json: field 'axes[2]': expected a string").
template <typename T>
absl::StatusOr<T> Checked(const FieldErrors& errors, FieldOr<T> result) {
  if (!result.ok()) return errors.Error(result.error().field, result.error().message);
  return std::move(result).value();
}

absl::Status CheckKeys(const FieldErrors& errors, const json& object, const std::string& field,
                       const std::vector<std::string_view>& allowed) {
  if (std::optional<FieldError> error = ptxbench::CheckKeys(object, field, allowed)) {
    return errors.Error(error->field, error->message);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> GetString(const FieldErrors& errors, const json& object,
                                      const std::string& parent, const std::string& key,
                                      bool required = true, bool allow_empty = false) {
  return Checked(errors, ptxbench::GetString(object, parent, key, required, allow_empty));
}

absl::StatusOr<std::optional<int64_t>> GetInt(const FieldErrors& errors, const json& object,
                                              const std::string& parent, const std::string& key,
                                              bool required = true) {
  return Checked(errors, ptxbench::GetInt(object, parent, key, required));
}

absl::StatusOr<std::optional<double>> GetNumber(const FieldErrors& errors, const json& object,
                                                const std::string& parent, const std::string& key,
                                                bool required = true) {
  return Checked(errors, ptxbench::GetNumber(object, parent, key, required));
}

absl::StatusOr<bool> GetBool(const FieldErrors& errors, const json& object,
                             const std::string& parent, const std::string& key,
                             bool default_value) {
  return Checked(errors, ptxbench::GetBool(object, parent, key, default_value));
}

absl::StatusOr<const json*> GetObject(const FieldErrors& errors, const json& object,
                                      const std::string& parent, const std::string& key,
                                      bool required = true) {
  return Checked(errors, ptxbench::GetObject(object, parent, key, required));
}

absl::StatusOr<const json*> GetArray(const FieldErrors& errors, const json& object,
                                     const std::string& parent, const std::string& key,
                                     bool required = true) {
  return Checked(errors, ptxbench::GetArray(object, parent, key, required));
}

absl::StatusOr<DType> ParseDType(const std::string& name) {
  if (name == "bf16") return DType::kBF16;
  if (name == "fp16") return DType::kFP16;
  if (name == "fp32") return DType::kFP32;
  if (name == "fp8_e4m3") return DType::kFP8E4M3;
  if (name == "int32") return DType::kInt32;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype '", name, "' (known: bf16, fp16, fp32, fp8_e4m3, int32)"));
}

// Reads a file named by task.json, refusing paths that leave the tasks/ folder: task content is
// served to vendors, and a stray "../../" must not publish a file of the host.
class TaskFiles {
 public:
  TaskFiles(fs::path task_dir, std::string display_dir)
      : task_dir_(std::move(task_dir)),
        tasks_root_(task_dir_.parent_path()),
        display_dir_(std::move(display_dir)) {}

  std::string Display(const std::string& relative) const {
    return (fs::path(display_dir_) / relative).lexically_normal().string();
  }

  // Reads `relative` into `files`. `field` is the task.json field naming the file (empty for
  // files every task has); `why` says what the file is for, in the not-found message.
  absl::Status Read(const std::string& relative, const std::string& field, const std::string& why,
                    std::map<std::string, std::string>& files) const {
    const FieldErrors field_errors(Display("task.json"));
    auto error = [&](const std::string& problem) {
      if (field.empty())
        return absl::InvalidArgumentError(absl::StrCat(Display(relative), ": ", problem));
      return field_errors.Error(field, problem);
    };
    if (relative.empty()) return error("empty path");
    if (fs::path(relative).is_absolute()) {
      return error(absl::StrCat("path '", relative, "' must be relative to the task folder"));
    }
    const fs::path full = (task_dir_ / relative).lexically_normal();
    const fs::path inside = full.lexically_relative(tasks_root_);
    if (inside.empty() || *inside.begin() == "..") {
      return error(absl::StrCat("path '", relative, "' leaves the tasks folder"));
    }
    std::error_code ec;
    const fs::file_status status = fs::status(full, ec);
    if (ec || !fs::exists(status)) {
      return absl::NotFoundError(absl::StrCat(Display(relative), ": file not found (", why, ")"));
    }
    if (!fs::is_regular_file(status)) {
      return error(absl::StrCat("'", relative, "' is not a regular file"));
    }
    // Symbolic links may not lead out of the tasks folder either.
    const fs::path canonical = fs::weakly_canonical(full, ec);
    const fs::path canonical_root = fs::weakly_canonical(tasks_root_, ec);
    const fs::path canonical_inside = canonical.lexically_relative(canonical_root);
    if (ec || canonical_inside.empty() || *canonical_inside.begin() == "..") {
      return error(absl::StrCat("'", relative, "' resolves outside the tasks folder"));
    }
    const uintmax_t size = fs::file_size(full, ec);
    if (ec || size > kMaxTaskFileBytes) {
      return error(absl::StrCat("'", relative, "' is larger than ", kMaxTaskFileBytes, " bytes"));
    }
    // The size was checked above; the limit again here holds for a file that grew since.
    absl::StatusOr<std::string> content =
        ReadFileToString(full.string(), Display(relative), {.max_bytes = kMaxTaskFileBytes});
    if (!content.ok()) return absl::UnavailableError(content.status().message());
    files[relative] = *std::move(content);
    return absl::OkStatus();
  }

 private:
  fs::path task_dir_;
  fs::path tasks_root_;
  std::string display_dir_;
};

// ---------------------------------------------------------------------------------------------
// Prompt placeholders.

const std::set<std::string>& PlaceholderNames() {
  static const std::set<std::string>* const kNames = new std::set<std::string>{"task_id",
                                                                               "title",
                                                                               "description",
                                                                               "arch",
                                                                               "gpu",
                                                                               "knowledge_level",
                                                                               "axes",
                                                                               "tensors",
                                                                               "scalars",
                                                                               "workloads",
                                                                               "tolerance",
                                                                               "baseline",
                                                                               "roofline",
                                                                               "target_families",
                                                                               "hardware",
                                                                               "contract",
                                                                               "arch_contract",
                                                                               "templates",
                                                                               "template_includes",
                                                                               "scratch_cap_bytes"};
  return *kNames;
}

struct Placeholder {
  size_t begin = 0;  // Offset of "{{".
  size_t end = 0;    // Offset just past "}}".
  std::string name;
};

// Finds "{{ name }}" where name is a lower_snake word. Other "{{" (C++ brace initializers in
// code samples) are left alone.
std::vector<Placeholder> FindPlaceholders(const std::string& text) {
  std::vector<Placeholder> found;
  size_t pos = 0;
  while ((pos = text.find("{{", pos)) != std::string::npos) {
    size_t i = pos + 2;
    while (i < text.size() && text[i] == ' ') ++i;
    const size_t name_begin = i;
    while (i < text.size() &&
           (std::islower(static_cast<unsigned char>(text[i])) || text[i] == '_')) {
      ++i;
    }
    const size_t name_end = i;
    while (i < text.size() && text[i] == ' ') ++i;
    if (name_end > name_begin && text.compare(i, 2, "}}") == 0) {
      found.push_back({pos, i + 2, text.substr(name_begin, name_end - name_begin)});
      pos = i + 2;
    } else {
      pos += 2;
    }
  }
  return found;
}

size_t LineOf(const std::string& text, size_t offset) {
  return 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n');
}

absl::Status CheckPromptPlaceholders(const std::string& display_path, const std::string& level,
                                     const std::string& text) {
  for (const Placeholder& placeholder : FindPlaceholders(text)) {
    if (PlaceholderNames().count(placeholder.name) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          display_path, ":", LineOf(text, placeholder.begin), ": unknown placeholder '{{",
          placeholder.name, "}}' (known: ", absl::StrJoin(PlaceholderNames(), ", "), ")"));
    }
    if (level == "none" &&
        (placeholder.name == "templates" || placeholder.name == "template_includes")) {
      return absl::InvalidArgumentError(absl::StrCat(
          display_path, ":", LineOf(text, placeholder.begin), ": placeholder '{{", placeholder.name,
          "}}' at knowledge level 'none', which gets no template headers"));
    }
    if (level != "contract" && placeholder.name == "arch_contract") {
      return absl::InvalidArgumentError(
          absl::StrCat(display_path, ":", LineOf(text, placeholder.begin),
                       ": placeholder '{{arch_contract}}' "
                       "at knowledge level '",
                       level, "'; the architecture rules belong to level 'contract'"));
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// The parts of task.json, each validated with its field path.

absl::Status CheckExprNames(const FieldErrors& errors, const std::string& field,
                            const std::string& text, ExprMode mode, const Task& task) {
  auto expr = Expr::Parse(text, mode);
  if (!expr.ok()) return errors.Error(field, std::string(expr.status().message()));
  for (const std::string& name : expr->Names()) {
    if (std::find(task.axes.begin(), task.axes.end(), name) == task.axes.end()) {
      return errors.Error(field, absl::StrCat("'", name, "' is not an axis of the task"));
    }
  }
  return absl::OkStatus();
}

// "distribution": a kind name ("normal"), or an object {"kind": ..., parameters} for the kinds
// that take parameters (docs/task-authoring.md, "Inputs").
absl::Status LoadDistribution(const FieldErrors& errors, const json& value,
                              const std::string& field, const Task& task, TensorSpec& spec) {
  std::string kind;
  const json* object = nullptr;
  std::string kind_field = field;
  if (value.is_string()) {
    kind = value.get<std::string>();
  } else if (value.is_object()) {
    object = &value;
    ASSIGN_OR_RETURN(kind, GetString(errors, value, field, "kind"));
    kind_field = FieldJoin(field, "kind");
  } else {
    return errors.Error(field, "expected a distribution name or an object with a 'kind'");
  }
  // A parameter: an axis expression (or an integer), checked against the axes here and
  // evaluated per workload in CheckWorkloadExpressions.
  auto parameter = [&](const std::string& key, std::string& out) -> absl::Status {
    const std::string parameter_field = FieldJoin(field, key);
    if (object == nullptr || !object->contains(key)) {
      return errors.Error(parameter_field,
                          absl::StrCat("'", kind, "' needs the parameter '", key, "'"));
    }
    const json& v = (*object)[key];
    if (v.is_string()) {
      out = v.get<std::string>();
    } else if (v.is_number_integer()) {
      out = std::to_string(v.get<int64_t>());
    } else {
      return errors.Error(parameter_field, "expected an axis expression or an integer");
    }
    return CheckExprNames(errors, parameter_field, out, ExprMode::kInteger, task);
  };
  const bool integer_kind = kind == "page_permutation" || kind == "length_ladder";
  if (integer_kind && spec.dtype != DType::kInt32) {
    return errors.Error(kind_field, absl::StrCat("'", kind,
                                                 "' draws int32 values: the tensor's dtype must "
                                                 "be int32"));
  }
  if (kind == "normal" || kind == "spiky" || kind == "block_scale" || kind == "fp8_normal" ||
      kind == "tensor_descale") {
    if (object != nullptr) RETURN_IF_ERROR(CheckKeys(errors, *object, field, {"kind"}));
    if (kind == "normal") {
      spec.distribution = Distribution::kNormal;
    } else if (kind == "spiky") {
      spec.distribution = Distribution::kSpiky;
    } else if (kind == "fp8_normal") {
      if (spec.dtype != DType::kFP8E4M3) {
        return errors.Error(kind_field,
                            "'fp8_normal' draws e4m3 values: the tensor's dtype must be fp8_e4m3");
      }
      spec.distribution = Distribution::kFp8Normal;
    } else {
      if (spec.dtype != DType::kFP32) {
        return errors.Error(kind_field, absl::StrCat("'", kind,
                                                     "' draws fp32 scales: the tensor's dtype "
                                                     "must be fp32"));
      }
      spec.distribution =
          kind == "block_scale" ? Distribution::kBlockScale : Distribution::kTensorDescale;
    }
  } else if (kind == "page_permutation") {
    if (object != nullptr) RETURN_IF_ERROR(CheckKeys(errors, *object, field, {"kind", "pages"}));
    RETURN_IF_ERROR(parameter("pages", spec.distribution_params.pages));
    spec.distribution = Distribution::kPagePermutation;
  } else if (kind == "length_ladder") {
    if (object != nullptr) {
      RETURN_IF_ERROR(CheckKeys(errors, *object, field, {"kind", "max", "jitter"}));
    }
    RETURN_IF_ERROR(parameter("max", spec.distribution_params.max));
    RETURN_IF_ERROR(parameter("jitter", spec.distribution_params.jitter));
    spec.distribution = Distribution::kLengthLadder;
  } else {
    return errors.Error(kind_field, absl::StrCat("'", kind,
                                                 "' is not 'normal', 'spiky', 'block_scale', "
                                                 "'fp8_normal', 'tensor_descale', "
                                                 "'page_permutation' or 'length_ladder'"));
  }
  return absl::OkStatus();
}

absl::Status LoadTensors(const FieldErrors& errors, const json& root, Task& task) {
  ASSIGN_OR_RETURN(const json* tensors, GetArray(errors, root, "", "tensors"));
  if (tensors->empty()) return errors.Error("tensors", "at least one tensor is needed");
  std::set<std::string> names;
  bool has_input = false, has_output = false;
  for (size_t i = 0; i < tensors->size(); ++i) {
    const std::string field = FieldIndex("tensors", i);
    const json& entry = (*tensors)[i];
    if (!entry.is_object()) return errors.Error(field, "expected an object");
    RETURN_IF_ERROR(CheckKeys(errors, entry, field,
                              {"name", "role", "dtype", "shape", "distribution", "derived"}));
    TensorSpec spec;
    ASSIGN_OR_RETURN(spec.name, GetString(errors, entry, field, "name"));
    if (!IsIdentifier(spec.name)) {
      return errors.Error(FieldJoin(field, "name"),
                          absl::StrCat("'", spec.name, "' is not an identifier"));
    }
    if (!names.insert(spec.name).second) {
      return errors.Error(FieldJoin(field, "name"),
                          absl::StrCat("duplicate tensor '", spec.name, "'"));
    }
    if (std::find(task.axes.begin(), task.axes.end(), spec.name) != task.axes.end()) {
      return errors.Error(FieldJoin(field, "name"),
                          absl::StrCat("'", spec.name, "' is also an axis"));
    }
    ASSIGN_OR_RETURN(std::string role, GetString(errors, entry, field, "role"));
    if (role == "input") {
      spec.role = TensorRole::kInput;
      has_input = true;
    } else if (role == "output") {
      spec.role = TensorRole::kOutput;
      has_output = true;
    } else {
      return errors.Error(FieldJoin(field, "role"),
                          absl::StrCat("'", role, "' is not 'input' or 'output'"));
    }
    ASSIGN_OR_RETURN(std::string dtype, GetString(errors, entry, field, "dtype"));
    auto parsed_dtype = ParseDType(dtype);
    if (!parsed_dtype.ok())
      return errors.Error(FieldJoin(field, "dtype"), std::string(parsed_dtype.status().message()));
    spec.dtype = *parsed_dtype;
    ASSIGN_OR_RETURN(const json* shape, GetArray(errors, entry, field, "shape"));
    if (shape->empty() || shape->size() > 8) {
      return errors.Error(FieldJoin(field, "shape"), "needs 1 to 8 dimensions");
    }
    for (size_t d = 0; d < shape->size(); ++d) {
      const std::string dim_field = FieldIndex(FieldJoin(field, "shape"), d);
      const json& dim = (*shape)[d];
      std::string text;
      if (dim.is_string()) {
        text = dim.get<std::string>();
      } else if (dim.is_number_integer()) {
        text = std::to_string(dim.get<int64_t>());
      } else {
        return errors.Error(dim_field, "expected an axis name, an expression or an integer");
      }
      auto expr = Expr::Parse(text);
      if (!expr.ok()) return errors.Error(dim_field, std::string(expr.status().message()));
      for (const std::string& name : expr->Names()) {
        if (std::find(task.axes.begin(), task.axes.end(), name) == task.axes.end()) {
          return errors.Error(dim_field, absl::StrCat("'", name, "' is not an axis of the task"));
        }
      }
      spec.shape.push_back(text);
    }
    const bool has_distribution = entry.contains("distribution");
    if (has_distribution) {
      if (spec.role == TensorRole::kOutput) {
        return errors.Error(FieldJoin(field, "distribution"), "outputs have no input distribution");
      }
      RETURN_IF_ERROR(LoadDistribution(errors, entry["distribution"],
                                       FieldJoin(field, "distribution"), task, spec));
    }
    ASSIGN_OR_RETURN(const json* derived, GetObject(errors, entry, field, "derived", false));
    if (derived != nullptr) {
      const std::string derived_field = FieldJoin(field, "derived");
      if (spec.role != TensorRole::kInput) {
        return errors.Error(derived_field, "only inputs can be derived");
      }
      if (has_distribution) {
        return errors.Error(derived_field, "a derived input has no distribution");
      }
      RETURN_IF_ERROR(CheckKeys(errors, *derived, derived_field, {"operation", "output"}));
      DerivedInput from;
      ASSIGN_OR_RETURN(from.operation, GetString(errors, *derived, derived_field, "operation"));
      ASSIGN_OR_RETURN(from.output, GetString(errors, *derived, derived_field, "output"));
      spec.derived = std::move(from);
    }
    task.tensors.push_back(std::move(spec));
  }
  if (!has_input) return errors.Error("tensors", "no tensor has role 'input'");
  if (!has_output) return errors.Error("tensors", "no tensor has role 'output'");
  return absl::OkStatus();
}

absl::Status LoadWorkloads(const FieldErrors& errors, const json& root, Task& task) {
  ASSIGN_OR_RETURN(const json* workloads, GetArray(errors, root, "", "workloads"));
  if (workloads->empty()) return errors.Error("workloads", "at least one workload is needed");
  std::set<std::string> names;
  int timed = 0;
  for (size_t i = 0; i < workloads->size(); ++i) {
    const std::string field = FieldIndex("workloads", i);
    const json& entry = (*workloads)[i];
    if (!entry.is_object()) return errors.Error(field, "expected an object");
    RETURN_IF_ERROR(CheckKeys(errors, entry, field, {"name", "axes", "timed", "trials"}));
    Workload workload;
    ASSIGN_OR_RETURN(workload.name, GetString(errors, entry, field, "name"));
    if (!IsLowerSnake(workload.name)) {
      return errors.Error(FieldJoin(field, "name"),
                          absl::StrCat("'", workload.name, "' is not lower_snake_case"));
    }
    if (!names.insert(workload.name).second) {
      return errors.Error(FieldJoin(field, "name"),
                          absl::StrCat("duplicate workload '", workload.name, "'"));
    }
    ASSIGN_OR_RETURN(const json* axes, GetObject(errors, entry, field, "axes"));
    const std::string axes_field = FieldJoin(field, "axes");
    for (const auto& [name, value] : axes->items()) {
      if (std::find(task.axes.begin(), task.axes.end(), name) == task.axes.end()) {
        return errors.Error(FieldJoin(axes_field, name), "not an axis of the task");
      }
      ASSIGN_OR_RETURN(std::optional<int64_t> extent, GetInt(errors, *axes, axes_field, name));
      if (*extent < 1 || *extent > kMaxAxisValue) {
        return errors.Error(FieldJoin(axes_field, name),
                            absl::StrCat(*extent, " is outside 1..", kMaxAxisValue));
      }
      workload.axes[name] = *extent;
    }
    for (const std::string& axis : task.axes) {
      if (workload.axes.count(axis) == 0) {
        return errors.Error(axes_field, absl::StrCat("missing axis '", axis, "'"));
      }
    }
    ASSIGN_OR_RETURN(workload.timed, GetBool(errors, entry, field, "timed", false));
    if (workload.timed) ++timed;
    ASSIGN_OR_RETURN(std::optional<int64_t> trials, GetInt(errors, entry, field, "trials", false));
    if (trials.has_value()) {
      if (*trials < 1 || *trials > kMaxTrials) {
        return errors.Error(FieldJoin(field, "trials"),
                            absl::StrCat(*trials, " is outside 1..", kMaxTrials));
      }
      workload.trials = static_cast<int>(*trials);
    }
    task.workloads.push_back(std::move(workload));
  }
  if (timed != 1) {
    return errors.Error("workloads",
                        absl::StrCat("exactly one workload must be timed; ", timed, " are"));
  }
  return absl::OkStatus();
}

}  // namespace

bool Fp64ReferenceSupported(const std::string& baseline_operation) {
  return baseline_operation == "sdpa_bwd_bf16" || baseline_operation == "sdpa_bwd_bf16_causal";
}

namespace {

// "fp64_reference" of a rule object at `field`: {"outputs": [names], "max_relative_norm": x}.
// Each output must be an output tensor of the task (tensors are read before the tolerance); the
// baseline operation is checked once it is read (LoadTask).
absl::Status LoadFp64ReferenceField(const FieldErrors& errors, const json& rule_json,
                                    const std::string& field, const Task& task, Tolerance& t) {
  auto it = rule_json.find("fp64_reference");
  if (it == rule_json.end()) return absl::OkStatus();
  const std::string f = FieldJoin(field, "fp64_reference");
  if (!t.fp64_outputs.empty()) return errors.Error(f, "declared twice");
  if (!it->is_object()) return errors.Error(f, "expected an object");
  RETURN_IF_ERROR(CheckKeys(errors, *it, f, {"outputs", "max_relative_norm"}));
  auto outputs = it->find("outputs");
  if (outputs == it->end()) return errors.Error(FieldJoin(f, "outputs"), "missing");
  if (!outputs->is_array() || outputs->empty()) {
    return errors.Error(FieldJoin(f, "outputs"), "expected a non-empty array of output names");
  }
  std::vector<std::string> names;
  for (size_t i = 0; i < outputs->size(); ++i) {
    const json& name = (*outputs)[i];
    if (!name.is_string()) {
      return errors.Error(FieldIndex(FieldJoin(f, "outputs"), i), "expected a string");
    }
    if (std::find(names.begin(), names.end(), name.get<std::string>()) != names.end()) {
      return errors.Error(FieldIndex(FieldJoin(f, "outputs"), i),
                          absl::StrCat("'", name.get<std::string>(), "' is listed twice"));
    }
    const auto tensor =
        std::find_if(task.tensors.begin(), task.tensors.end(),
                     [&](const TensorSpec& x) { return x.name == name.get<std::string>(); });
    if (tensor == task.tensors.end() || tensor->role != TensorRole::kOutput) {
      return errors.Error(FieldIndex(FieldJoin(f, "outputs"), i),
                          absl::StrCat("'", name.get<std::string>(), "' is not an output tensor"));
    }
    names.push_back(name.get<std::string>());
  }
  ASSIGN_OR_RETURN(std::optional<double> bound,
                   GetNumber(errors, *it, f, "max_relative_norm", true));
  // A bound of 1 or more accepts an all-zero output: it would judge nothing.
  if (!(*bound > 0 && *bound < 1)) {
    return errors.Error(FieldJoin(f, "max_relative_norm"),
                        absl::StrCat(*bound, " is not in (0, 1)"));
  }
  t.fp64_outputs = std::move(names);
  t.fp64_max_relative_norm = *bound;
  return absl::OkStatus();
}

// One rule object of "tolerance" at `field` ("tolerance" or "tolerance[1]") into `t`; `seen`
// holds the rules read before it (each at most once).
absl::Status LoadToleranceRule(const FieldErrors& errors, const json& rule_json,
                               const std::string& field, const Task& task, Tolerance& t,
                               std::vector<std::string>& seen) {
  if (!rule_json.is_object()) return errors.Error(field, "expected an object");
  ASSIGN_OR_RETURN(std::string rule, GetString(errors, rule_json, field, "rule"));
  if (rule != "allclose" && rule != "relative_norm") {
    return errors.Error(FieldJoin(field, "rule"),
                        absl::StrCat("'", rule, "' is not 'allclose' or 'relative_norm'"));
  }
  if (std::find(seen.begin(), seen.end(), rule) != seen.end()) {
    return errors.Error(FieldJoin(field, "rule"),
                        absl::StrCat("rule '", rule, "' is declared twice"));
  }
  seen.push_back(rule);
  if (rule == "relative_norm") {
    RETURN_IF_ERROR(CheckKeys(
        errors, rule_json, field,
        {"rule", "max_relative_norm", "block_rows", "max_block_relative_norm", "fp64_reference"}));
    RETURN_IF_ERROR(LoadFp64ReferenceField(errors, rule_json, field, task, t));
    ASSIGN_OR_RETURN(std::optional<double> norm,
                     GetNumber(errors, rule_json, field, "max_relative_norm", true));
    t.max_relative_norm = *norm;
    if (!(t.max_relative_norm > 0)) {
      return errors.Error(FieldJoin(field, "max_relative_norm"), "must be positive");
    }
    // The block rule: both fields or neither (a bound without a block size, or the reverse, is
    // an author's slip that would otherwise judge nothing).
    ASSIGN_OR_RETURN(std::optional<int64_t> block_rows,
                     GetInt(errors, rule_json, field, "block_rows", false));
    ASSIGN_OR_RETURN(std::optional<double> block_norm,
                     GetNumber(errors, rule_json, field, "max_block_relative_norm", false));
    if (block_rows.has_value() != block_norm.has_value()) {
      return errors.Error(FieldJoin(field, block_rows ? "max_block_relative_norm" : "block_rows"),
                          "missing: block_rows and max_block_relative_norm are declared together");
    }
    if (block_rows) {
      if (*block_rows < 1 || *block_rows > (int64_t{1} << 20)) {
        return errors.Error(FieldJoin(field, "block_rows"),
                            absl::StrCat(*block_rows, " is outside 1..1048576"));
      }
      if (!(*block_norm > 0)) {
        return errors.Error(FieldJoin(field, "max_block_relative_norm"), "must be positive");
      }
      t.block_rows = *block_rows;
      t.max_block_relative_norm = *block_norm;
    }
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(CheckKeys(errors, rule_json, field,
                            {"rule", "atol", "rtol", "matched_ratio", "fp64_reference"}));
  RETURN_IF_ERROR(LoadFp64ReferenceField(errors, rule_json, field, task, t));
  t.all_close = true;
  ASSIGN_OR_RETURN(std::optional<double> atol, GetNumber(errors, rule_json, field, "atol", true));
  ASSIGN_OR_RETURN(std::optional<double> rtol, GetNumber(errors, rule_json, field, "rtol", true));
  ASSIGN_OR_RETURN(std::optional<double> ratio,
                   GetNumber(errors, rule_json, field, "matched_ratio", false));
  t.atol = *atol;
  t.rtol = *rtol;
  if (ratio) t.matched_ratio = *ratio;
  if (t.atol < 0) return errors.Error(FieldJoin(field, "atol"), "must not be negative");
  if (t.rtol < 0) return errors.Error(FieldJoin(field, "rtol"), "must not be negative");
  if (!(t.matched_ratio > 0 && t.matched_ratio <= 1)) {
    return errors.Error(FieldJoin(field, "matched_ratio"), "must be in (0, 1]");
  }
  return absl::OkStatus();
}

// "tolerance": one rule object, or an array of rule objects that must all hold.
absl::Status LoadTolerance(const FieldErrors& errors, const json& root, Task& task) {
  auto it = root.find("tolerance");
  if (it == root.end()) return errors.Error("tolerance", "missing");
  Tolerance& t = task.tolerance;
  t.all_close = false;
  std::vector<std::string> seen;
  if (it->is_array()) {
    if (it->empty()) return errors.Error("tolerance", "at least one rule is needed");
    for (size_t i = 0; i < it->size(); ++i) {
      RETURN_IF_ERROR(
          LoadToleranceRule(errors, (*it)[i], FieldIndex("tolerance", i), task, t, seen));
    }
    return absl::OkStatus();
  }
  if (!it->is_object()) {
    return errors.Error("tolerance", "expected a rule object or an array of rule objects");
  }
  return LoadToleranceRule(errors, *it, "tolerance", task, t, seen);
}

// The matrix-multiply families, whose work share the strong check measures.
bool IsMatrixFamily(const std::string& family) {
  return family == "wgmma" || family == "tcgen05_mma";
}

absl::StatusOr<std::optional<MinWorkShare>> LoadMinWorkShare(const FieldErrors& errors,
                                                             const json& entry,
                                                             const std::string& field,
                                                             const ArchSpec& spec) {
  const bool matrix =
      std::any_of(spec.target_families.begin(), spec.target_families.end(), IsMatrixFamily);
  const std::string share_field = FieldJoin(field, "min_work_share");
  ASSIGN_OR_RETURN(const json* share, GetObject(errors, entry, field, "min_work_share", false));
  if (share == nullptr) {
    if (matrix) {
      return errors.Error(share_field,
                          "missing: required with a matrix-multiply target family (wgmma, "
                          "tcgen05_mma); {\"share_of_task\": x, \"share_of_executed\": y}");
    }
    return std::optional<MinWorkShare>();
  }
  if (!matrix) {
    return errors.Error(share_field, "only meaningful with a matrix-multiply target family");
  }
  RETURN_IF_ERROR(CheckKeys(errors, *share, share_field, {"share_of_task", "share_of_executed"}));
  MinWorkShare out;
  ASSIGN_OR_RETURN(std::optional<double> of_task,
                   GetNumber(errors, *share, share_field, "share_of_task", true));
  ASSIGN_OR_RETURN(std::optional<double> of_executed,
                   GetNumber(errors, *share, share_field, "share_of_executed", true));
  out.share_of_task = *of_task;
  out.share_of_executed = *of_executed;
  if (!(out.share_of_task > 0 && out.share_of_task <= 1)) {
    return errors.Error(FieldJoin(share_field, "share_of_task"), "must be in (0, 1]");
  }
  if (!(out.share_of_executed > 0 && out.share_of_executed <= 1)) {
    return errors.Error(FieldJoin(share_field, "share_of_executed"), "must be in (0, 1]");
  }
  return std::optional<MinWorkShare>(out);
}

absl::Status LoadArches(const FieldErrors& errors, const json& root, Task& task) {
  ASSIGN_OR_RETURN(const json* arches, GetObject(errors, root, "", "arches"));
  if (arches->empty()) return errors.Error("arches", "at least one arch is needed");
  for (const auto& [arch, entry] : arches->items()) {
    const std::string field = FieldJoin("arches", arch);
    if (arch != "sm_90a" && arch != "sm_100a") {
      return errors.Error(field, "unknown arch (known: sm_90a, sm_100a)");
    }
    if (!entry.is_object()) return errors.Error(field, "expected an object");
    RETURN_IF_ERROR(CheckKeys(errors, entry, field,
                              {"target_families", "runtime_unverified", "min_work_share"}));
    ArchSpec spec;
    spec.arch = arch;
    ASSIGN_OR_RETURN(const json* families, GetArray(errors, entry, field, "target_families"));
    if (families->empty())
      return errors.Error(FieldJoin(field, "target_families"), "must not be empty");
    for (size_t i = 0; i < families->size(); ++i) {
      const std::string family_field = FieldIndex(FieldJoin(field, "target_families"), i);
      if (!(*families)[i].is_string()) return errors.Error(family_field, "expected a string");
      const std::string name = (*families)[i].get<std::string>();
      const TargetFamily* family = FindTargetFamily(name);
      if (family == nullptr) {
        return errors.Error(family_field, absl::StrCat("unknown target family '", name, "'"));
      }
      if (!family->credited) {
        return errors.Error(family_field,
                            absl::StrCat("'", name, "' is informational and cannot be required"));
      }
      if (!FamilyExistsOn(*family, arch)) {
        return errors.Error(family_field, absl::StrCat("'", name, "' does not exist on ", arch));
      }
      if (std::find(spec.target_families.begin(), spec.target_families.end(), name) !=
          spec.target_families.end()) {
        return errors.Error(family_field, absl::StrCat("duplicate family '", name, "'"));
      }
      spec.target_families.push_back(name);
    }
    ASSIGN_OR_RETURN(spec.runtime_unverified,
                     GetBool(errors, entry, field, "runtime_unverified", false));
    ASSIGN_OR_RETURN(spec.min_work_share, LoadMinWorkShare(errors, entry, field, spec));
    task.arches[arch] = std::move(spec);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<SourceRef>> LoadSourceRefs(const FieldErrors& errors, const json& root,
                                                      const std::string& key, const Task& task) {
  std::vector<SourceRef> refs;
  ASSIGN_OR_RETURN(const json* list, GetArray(errors, root, "", key, /*required=*/false));
  if (list == nullptr) return refs;
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string field = FieldIndex(key, i);
    const json& entry = (*list)[i];
    if (!entry.is_object()) return errors.Error(field, "expected an object");
    RETURN_IF_ERROR(CheckKeys(errors, entry, field, {"arch", "path", "expect", "scope", "note"}));
    SourceRef ref;
    ASSIGN_OR_RETURN(ref.arch, GetString(errors, entry, field, "arch"));
    if (task.arches.count(ref.arch) == 0) {
      return errors.Error(FieldJoin(field, "arch"),
                          absl::StrCat("'", ref.arch, "' is not one of the task's arches"));
    }
    ASSIGN_OR_RETURN(ref.path, GetString(errors, entry, field, "path"));
    ASSIGN_OR_RETURN(ref.expect, GetString(errors, entry, field, "expect"));
    auto expected = ParseVerdictClass(ref.expect);
    if (!expected.ok())
      return errors.Error(FieldJoin(field, "expect"), std::string(expected.status().message()));
    if (*expected == VerdictClass::kInfrastructureFailure ||
        *expected == VerdictClass::kCancelled) {
      return errors.Error(FieldJoin(field, "expect"), "must be a statement about the kernel");
    }
    ASSIGN_OR_RETURN(std::string scope, GetString(errors, entry, field, "scope", false));
    if (!scope.empty()) {
      if (scope != "full" && scope != "compile_only") {
        return errors.Error(FieldJoin(field, "scope"),
                            absl::StrCat("'", scope, "' is not 'full' or 'compile_only'"));
      }
      ref.scope = scope;
    }
    ASSIGN_OR_RETURN(ref.note, GetString(errors, entry, field, "note", false, true));
    refs.push_back(std::move(ref));
  }
  return refs;
}

// A derived input names an operation of the task's baseline library that a derived input may
// use, one of its outputs with this tensor's dtype and shape, and the operation's inputs exist as
// drawn (not derived) inputs of the task with the operation's dtypes and shapes.
absl::Status CheckDerivedInputs(const FieldErrors& errors, const Task& task) {
  auto find_tensor = [&](const std::string& name) -> const TensorSpec* {
    for (const TensorSpec& t : task.tensors) {
      if (t.name == name) return &t;
    }
    return nullptr;
  };
  auto describe = [](DType dtype, const std::vector<std::string>& shape) {
    return absl::StrCat(DTypeName(dtype), " [", absl::StrJoin(shape, ", "), "]");
  };
  for (size_t i = 0; i < task.tensors.size(); ++i) {
    const TensorSpec& tensor = task.tensors[i];
    if (!tensor.derived.has_value()) continue;
    const std::string field = FieldJoin(FieldIndex("tensors", i), "derived");
    const OperationSignature* op =
        FindDerivableOperation(task.baseline_library, tensor.derived->operation);
    if (op == nullptr) {
      return errors.Error(FieldJoin(field, "operation"),
                          absl::StrCat("'", tensor.derived->operation, "' is not an operation of ",
                                       task.baseline_library, " that can derive an input"));
    }
    const OperationSignature::Tensor* produced = nullptr;
    std::vector<std::string> output_names;
    for (const OperationSignature::Tensor& out : op->outputs) {
      output_names.push_back(out.name);
      if (out.name == tensor.derived->output) produced = &out;
    }
    if (produced == nullptr) {
      return errors.Error(
          FieldJoin(field, "output"),
          absl::StrCat("'", tensor.derived->output, "' is not an output of ", op->operation,
                       " (outputs: ", absl::StrJoin(output_names, ", "), ")"));
    }
    if (produced->dtype != tensor.dtype || produced->shape != tensor.shape) {
      return errors.Error(
          field, absl::StrCat(op->operation, " output ", produced->name, " is ",
                              describe(produced->dtype, produced->shape), ", the tensor is ",
                              describe(tensor.dtype, tensor.shape)));
    }
    for (const OperationSignature::Tensor& in : op->inputs) {
      const TensorSpec* source = find_tensor(in.name);
      if (source == nullptr || source->role != TensorRole::kInput || source->derived) {
        return errors.Error(FieldJoin(field, "operation"),
                            absl::StrCat(op->operation, " reads '", in.name,
                                         "', which is not a drawn input of the task"));
      }
      if (source->dtype != in.dtype || source->shape != in.shape) {
        return errors.Error(
            FieldJoin(field, "operation"),
            absl::StrCat(op->operation, " reads ", in.name, " as ", describe(in.dtype, in.shape),
                         ", the task has ", describe(source->dtype, source->shape)));
      }
    }
  }
  return absl::OkStatus();
}

// The integer distributions' parameters evaluate, for `workload`, to values the generator can
// draw from: a pool of at least as many pages as entries (distinct pages), lengths in int32.
absl::Status CheckDistributionParams(const FieldErrors& errors, const TensorSpec& tensor,
                                     const std::string& tensor_field, const Workload& workload) {
  const std::string where = absl::StrCat(" (workload '", workload.name, "')");
  const std::string field = FieldJoin(tensor_field, "distribution");
  auto evaluate = [&](const std::string& key, const std::string& text,
                      int64_t lowest) -> absl::StatusOr<int64_t> {
    auto value = EvalIntExpr(text, workload.axes);
    if (!value.ok()) {
      return errors.Error(FieldJoin(field, key), absl::StrCat(value.status().message(), where));
    }
    if (*value < lowest || *value > std::numeric_limits<int32_t>::max()) {
      return errors.Error(FieldJoin(field, key),
                          absl::StrCat("evaluates to ", *value, ", outside ", lowest, " .. ",
                                       std::numeric_limits<int32_t>::max(), where));
    }
    return *value;
  };
  if (tensor.distribution == Distribution::kPagePermutation) {
    int64_t elements = 1;
    for (const std::string& dim : tensor.shape) {
      auto extent = EvalIntExpr(dim, workload.axes);
      if (!extent.ok() || __builtin_mul_overflow(elements, *extent, &elements))
        return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(int64_t pages, evaluate("pages", tensor.distribution_params.pages, 1));
    if (pages < elements) {
      return errors.Error(FieldJoin(field, "pages"),
                          absl::StrCat("evaluates to ", pages, ", fewer pages than the ", elements,
                                       " distinct entries of the tensor", where));
    }
  } else if (tensor.distribution == Distribution::kLengthLadder) {
    RETURN_IF_ERROR(evaluate("max", tensor.distribution_params.max, 1).status());
    RETURN_IF_ERROR(evaluate("jitter", tensor.distribution_params.jitter, 0).status());
  }
  return absl::OkStatus();
}

// Every expression of the task evaluates for every workload: shapes to positive sizes whose
// byte counts fit in int64, roofline terms to positive numbers, scalars to finite numbers.
absl::Status CheckWorkloadExpressions(const FieldErrors& errors, const Task& task) {
  for (size_t w = 0; w < task.workloads.size(); ++w) {
    const Workload& workload = task.workloads[w];
    const std::string where = absl::StrCat(" (workload '", workload.name, "')");
    for (size_t t = 0; t < task.tensors.size(); ++t) {
      const TensorSpec& tensor = task.tensors[t];
      int64_t bytes = DTypeBytes(tensor.dtype);
      for (size_t d = 0; d < tensor.shape.size(); ++d) {
        const std::string field = FieldIndex(FieldJoin(FieldIndex("tensors", t), "shape"), d);
        auto extent = EvalIntExpr(tensor.shape[d], workload.axes);
        if (!extent.ok())
          return errors.Error(field, absl::StrCat(extent.status().message(), where));
        if (*extent < 1)
          return errors.Error(field, absl::StrCat("extent ", *extent, " is not positive", where));
        if (__builtin_mul_overflow(bytes, *extent, &bytes)) {
          return errors.Error(FieldJoin(FieldIndex("tensors", t), "shape"),
                              absl::StrCat("size overflows int64", where));
        }
      }
    }
    for (size_t t = 0; t < task.tensors.size(); ++t) {
      RETURN_IF_ERROR(
          CheckDistributionParams(errors, task.tensors[t], FieldIndex("tensors", t), workload));
    }
    for (const auto& [field, text] :
         {std::pair<std::string, std::string>{"roofline.flops", task.flops_expr},
          {"roofline.min_bytes", task.min_bytes_expr}}) {
      auto value = EvalRealExpr(text, workload.axes);
      if (!value.ok()) return errors.Error(field, absl::StrCat(value.status().message(), where));
      if (!(*value > 0)) return errors.Error(field, absl::StrCat("evaluates to ", *value, where));
    }
    for (const auto& [name, text] : task.scalars) {
      auto value = EvalRealExpr(text, workload.axes);
      if (!value.ok())
        return errors.Error(FieldJoin("scalars", name),
                            absl::StrCat(value.status().message(), where));
    }
  }
  return absl::OkStatus();
}

std::string HashStreamEntry(const std::string& path, const std::string& content) {
  return absl::StrCat(path, std::string(1, '\0'), content.size(), std::string(1, '\0'), content);
}

// ---------------------------------------------------------------------------------------------
// Prompt rendering.

std::string GpuName(const std::string& arch) {
  if (arch == "sm_90a") return "NVIDIA H100 / H200 (Hopper)";
  if (arch == "sm_100a") return "NVIDIA B200 (Blackwell)";
  return arch;
}

std::string RenderAxes(const Task& task) { return absl::StrJoin(task.axes, ", "); }

std::string RenderTensors(const Task& task) {
  std::string out =
      "| tensor | role | dtype | shape (outermost first, row-major, contiguous) |\n"
      "|---|---|---|---|\n";
  for (const TensorSpec& t : task.tensors) {
    std::string role = t.role == TensorRole::kInput ? "input" : "output";
    if (t.derived.has_value()) {
      absl::StrAppend(&role, " (computed by the harness: ", t.derived->output, " of ",
                      t.derived->operation, ")");
    }
    absl::StrAppend(&out, "| ", t.name, " | ", role, " | ", DTypeName(t.dtype), " | [",
                    absl::StrJoin(t.shape, ", "), "] |\n");
  }
  return out;
}

std::string RenderScalars(const Task& task) {
  if (task.scalars.empty()) return "(none)";
  std::string out;
  for (const auto& [name, text] : task.scalars)
    absl::StrAppend(&out, "- ", name, " = ", text, "\n");
  return out;
}

std::string RenderWorkloads(const Task& task) {
  std::string out = "| workload | axes | timed |\n|---|---|---|\n";
  for (const Workload& w : task.workloads) {
    std::vector<std::string> axes;
    for (const std::string& axis : task.axes)
      axes.push_back(absl::StrCat(axis, "=", w.axes.at(axis)));
    absl::StrAppend(&out, "| ", w.name, " | ", absl::StrJoin(axes, ", "), " | ",
                    w.timed ? "yes" : "no (correctness only)", " |\n");
  }
  return out;
}

std::string RenderTolerance(const Task& task) {
  const Tolerance& t = task.tolerance;
  std::vector<std::string> rules;
  if (t.all_close) {
    rules.push_back(absl::StrCat("allclose: an element fails only if |out - ref| > ", t.atol,
                                 " AND |out - ref| > ", t.rtol, " * |ref|; ",
                                 t.matched_ratio >= 1.0
                                     ? std::string("every element")
                                     : absl::StrCat(t.matched_ratio * 100, "% of elements"),
                                 " must pass, on every input. NaN or Inf in an output fails."));
  }
  if (t.max_relative_norm > 0) {
    rules.push_back(absl::StrCat("relative norm: ||out - ref||_2 / ||ref||_2 must not exceed ",
                                 t.max_relative_norm, " for every output on every input."));
  }
  if (t.block_rows > 0) {
    rules.push_back(absl::StrCat(
        "block relative norm: for every block of ", t.block_rows,
        " consecutive rows of an output (rows: all dims but the last flattened), ||out - ref||_2 "
        "/ ||ref||_2 over the block must not exceed ",
        t.max_block_relative_norm,
        " (a block whose reference norm is under a tenth of a typical block's is measured "
        "against that tenth)."));
  }
  if (!t.fp64_outputs.empty()) {
    rules.push_back(absl::StrCat(
        "fp64 reference: on every correctness workload (not the timed one), ",
        absl::StrJoin(t.fp64_outputs, ", "),
        " must also keep ||out - ref64||_2 / ||ref64||_2 <= ", t.fp64_max_relative_norm,
        ", where ref64 is the task's formulas computed in fp64 from the same bf16 inputs (Q, K, V, "
        "dO and the given O and LSE)."));
  }
  return absl::StrJoin(rules, " And ");
}

std::string RenderTargetFamilies(const Task& task, const std::string& arch) {
  std::string out;
  for (const std::string& name : task.arches.at(arch).target_families) {
    const TargetFamily* family = FindTargetFamily(name);
    absl::StrAppend(&out, "- ", name, ": ", family != nullptr ? family->description : "", "\n");
  }
  absl::StrAppend(
      &out,
      "Each family must EXECUTE at runtime with its predicate on; instructions that are "
      "present in the code but never run earn no credit.\n");
  return out;
}

// The common architecture rules, then the arch's own; empty for a task loaded without them.
std::string RenderArchContract(const Task& task, const std::string& arch) {
  auto common = task.files.find(kArchContractCommonPath);
  auto own = task.files.find(ArchContractPath(arch));
  if (common == task.files.end() || own == task.files.end()) return "";
  std::string out = common->second;
  if (!out.empty() && out.back() != '\n') out.push_back('\n');
  if (!out.empty()) out.push_back('\n');
  return out + own->second;
}

std::string RenderTemplateIncludes(const std::map<std::string, std::string>& headers) {
  std::vector<std::string> lines;
  for (const auto& [name, content] : headers)
    lines.push_back(absl::StrCat("#include \"", name, "\""));
  return absl::StrJoin(lines, "\n");
}

std::string RenderTemplates(const std::map<std::string, std::string>& headers) {
  std::string out;
  for (const auto& [name, content] : headers) {
    absl::StrAppend(&out, "### Template header `", name, "` (use `#include \"", name,
                    "\"`)\n\n```cpp\n", content,
                    content.empty() || content.back() == '\n' ? "" : "\n", "```\n\n");
  }
  return out;
}

}  // namespace

std::string DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return "bf16";
    case DType::kFP16:
      return "fp16";
    case DType::kFP32:
      return "fp32";
    case DType::kFP8E4M3:
      return "fp8_e4m3";
    case DType::kInt32:
      return "int32";
  }
  return "unknown";
}

double TensorRateOverBf16(DType operands) { return operands == DType::kFP8E4M3 ? 2.0 : 1.0; }

int DTypeBytes(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
    case DType::kFP16:
      return 2;
    case DType::kFP32:
    case DType::kInt32:
      return 4;
    case DType::kFP8E4M3:
      return 1;
  }
  return 0;
}

const Workload& Task::TimedWorkload() const {
  for (const Workload& w : workloads) {
    if (w.timed) return w;
  }
  // LoadTask guarantees exactly one timed workload; a hand-built Task without one is a bug.
  return workloads.front();
}

std::vector<const Workload*> Task::WorkloadsInTrialOrder() const {
  std::vector<std::pair<uint64_t, const Workload*>> sized;
  sized.reserve(workloads.size());
  for (const Workload& w : workloads) {
    uint64_t elements = 0;
    for (const TensorSpec& t : tensors) {
      if (t.role != TensorRole::kOutput) continue;
      uint64_t n = 1;
      for (const std::string& d : t.shape) {
        auto v = EvalIntExpr(d, w.axes);
        n *= v.ok() && *v > 0 ? static_cast<uint64_t>(*v) : 0;  // LoadTask checked the shapes.
      }
      elements += n;
    }
    sized.push_back({elements, &w});
  }
  std::stable_sort(sized.begin(), sized.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<const Workload*> order;
  order.reserve(sized.size());
  for (const auto& [elements, w] : sized) order.push_back(w);
  return order;
}

DType Task::OperandType() const {
  for (const TensorSpec& t : tensors) {
    if (t.role == TensorRole::kInput) return t.dtype;
  }
  return DType::kBF16;
}

std::string Task::JudgingHash() const {
  auto it = files.find("task.json");
  return Sha256Hex(it == files.end() ? definition.dump() : it->second);
}

const ArchSpec* Task::FindArch(const std::string& arch) const {
  auto it = arches.find(arch);
  return it == arches.end() ? nullptr : &it->second;
}

std::string ArchContractPath(const std::string& arch) {
  return absl::StrCat("../_shared/contract/arch_", arch, ".md");
}

const OperationSignature* FindDerivableOperation(const std::string& library,
                                                 const std::string& operation) {
  // The cuDNN SDPA forward (worker/engine/gpu/cudnn_sdpa_baseline.cc), in the tensor order of the
  // forward attention tasks: Q, K, V -> O and the natural-log log-sum-exp of each query row.
  static const std::vector<OperationSignature>* const kOperations = [] {
    const std::vector<std::string> bhsd = {"B", "H", "S", "D"};
    auto* ops = new std::vector<OperationSignature>;
    for (const char* name : {"sdpa_fwd_bf16", "sdpa_fwd_bf16_causal"}) {
      ops->push_back(
          {"cudnn",
           name,
           {{"Q", DType::kBF16, bhsd}, {"K", DType::kBF16, bhsd}, {"V", DType::kBF16, bhsd}},
           {{"O", DType::kBF16, bhsd}, {"LSE", DType::kFP32, {"B", "H", "S"}}}});
    }
    return ops;
  }();
  for (const OperationSignature& op : *kOperations) {
    if (op.library == library && op.operation == operation) return &op;
  }
  return nullptr;
}

const std::vector<std::string>& KnowledgeLevels() {
  static const std::vector<std::string>* const kLevels =
      new std::vector<std::string>{"none", "templates", "contract"};
  return *kLevels;
}

absl::StatusOr<std::string> HardwareParametersText(const std::string& arch) {
  // Figures: NVIDIA's H100 and B200 specifications and the CUDA programming guide's compute
  // capability tables (9.0 and 10.0); the H200's 132 SMs and ~60 MB L2 were read on the lent
  // H200 (shared/reference/h200-baselines.md). B200 figures have not been measured here.
  if (arch == "sm_90a") {
    return std::string(
        "Target GPU: NVIDIA H100 / H200 (Hopper), code compiled for sm_90a.\n"
        "- 132 streaming multiprocessors (SMs).\n"
        "- Shared memory: 228 KB per SM; at most 227 KB (232448 bytes) per thread block, "
        "static plus dynamic.\n"
        "- L2 cache: 50 MB (H100) to 60 MB (H200).\n"
        "- Registers: 65536 32-bit registers per SM, at most 255 per thread.\n"
        "- Threads: at most 1024 per block; warps of 32; a warpgroup is 4 consecutive warps.\n"
        "- Thread-block clusters: up to 8 CTAs (portable size).\n");
  }
  if (arch == "sm_100a") {
    return std::string(
        "Target GPU: NVIDIA B200 (Blackwell), code compiled for sm_100a.\n"
        "- 148 streaming multiprocessors (SMs).\n"
        "- Shared memory: 228 KB per SM; at most 227 KB (232448 bytes) per thread block, "
        "static plus dynamic.\n"
        "- Tensor memory: 256 KB per SM (128 lanes x 512 columns of 32-bit cells), allocated "
        "with tcgen05.alloc in columns.\n"
        "- Registers: 65536 32-bit registers per SM, at most 255 per thread.\n"
        "- Threads: at most 1024 per block; warps of 32; a warpgroup is 4 consecutive warps.\n"
        "- Thread-block clusters: up to 8 CTAs (portable size).\n");
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown arch '", arch, "' (known: sm_90a, sm_100a)"));
}

absl::StatusOr<Task> LoadTask(const std::string& task_dir) {
  const fs::path dir = fs::absolute(fs::path(task_dir)).lexically_normal();
  // Normalizing drops a trailing separator's empty last component.
  const fs::path clean_dir = dir.filename().empty() ? dir.parent_path() : dir;
  const std::string display_dir = fs::path(task_dir).lexically_normal().string();
  const TaskFiles files(clean_dir, display_dir);
  const FieldErrors errors(files.Display("task.json"));

  Task task;
  task.dir = clean_dir.string();
  RETURN_IF_ERROR(files.Read("task.json", "", "the task definition", task.files));
  std::variant<json, JsonParseError> parsed = ParseJson(task.files.at("task.json"));
  if (const JsonParseError* failure = std::get_if<JsonParseError>(&parsed)) {
    if (failure->malformed) {
      return absl::InvalidArgumentError(absl::StrCat(errors.file(), ": not valid JSON at line ",
                                                     failure->line, " (byte ", failure->byte,
                                                     "): ", failure->message));
    }
    return errors.Error(failure->field, failure->message);
  }
  json root = std::get<json>(std::move(parsed));
  if (!root.is_object())
    return absl::InvalidArgumentError(absl::StrCat(errors.file(), ": not a JSON object"));
  RETURN_IF_ERROR(CheckKeys(errors, root, "",
                            {"schema", "id", "title", "description", "axes", "tensors", "scalars",
                             "workloads", "tolerance", "baseline", "roofline", "scratch_cap_bytes",
                             "arches", "prompts", "templates", "solutions", "decoys"}));

  ASSIGN_OR_RETURN(std::optional<int64_t> schema, GetInt(errors, root, "", "schema"));
  if (*schema != 1)
    return errors.Error("schema", absl::StrCat("version ", *schema, " is not supported (1 is)"));
  ASSIGN_OR_RETURN(task.id, GetString(errors, root, "", "id"));
  if (!IsLowerSnake(task.id))
    return errors.Error("id", absl::StrCat("'", task.id, "' is not lower_snake_case"));
  if (task.id != clean_dir.filename().string()) {
    return errors.Error("id", absl::StrCat("'", task.id, "' differs from the folder name '",
                                           clean_dir.filename().string(), "'"));
  }
  ASSIGN_OR_RETURN(task.title, GetString(errors, root, "", "title"));
  ASSIGN_OR_RETURN(task.description, GetString(errors, root, "", "description"));

  ASSIGN_OR_RETURN(const json* axes, GetArray(errors, root, "", "axes"));
  if (axes->empty()) return errors.Error("axes", "at least one axis is needed");
  for (size_t i = 0; i < axes->size(); ++i) {
    const std::string field = FieldIndex("axes", i);
    if (!(*axes)[i].is_string()) return errors.Error(field, "expected a string");
    const std::string axis = (*axes)[i].get<std::string>();
    if (!IsIdentifier(axis) || ReservedNames().count(axis) > 0) {
      return errors.Error(field, absl::StrCat("'", axis, "' is not a usable axis name"));
    }
    if (std::find(task.axes.begin(), task.axes.end(), axis) != task.axes.end()) {
      return errors.Error(field, absl::StrCat("duplicate axis '", axis, "'"));
    }
    task.axes.push_back(axis);
  }

  RETURN_IF_ERROR(LoadTensors(errors, root, task));

  ASSIGN_OR_RETURN(const json* scalars, GetObject(errors, root, "", "scalars", /*required=*/false));
  if (scalars != nullptr) {
    for (const auto& [name, value] : scalars->items()) {
      const std::string field = FieldJoin("scalars", name);
      if (!IsIdentifier(name) || ReservedNames().count(name) > 0) {
        return errors.Error(field, "not a usable scalar name");
      }
      if (std::find(task.axes.begin(), task.axes.end(), name) != task.axes.end()) {
        return errors.Error(field, "also an axis");
      }
      for (const TensorSpec& tensor : task.tensors) {
        if (tensor.name == name) return errors.Error(field, "also a tensor");
      }
      if (!value.is_string()) return errors.Error(field, "expected an expression string");
      RETURN_IF_ERROR(
          CheckExprNames(errors, field, value.get<std::string>(), ExprMode::kReal, task));
      task.scalars[name] = value.get<std::string>();
    }
  }

  RETURN_IF_ERROR(LoadWorkloads(errors, root, task));
  RETURN_IF_ERROR(LoadTolerance(errors, root, task));

  ASSIGN_OR_RETURN(const json* baseline, GetObject(errors, root, "", "baseline"));
  RETURN_IF_ERROR(CheckKeys(errors, *baseline, "baseline", {"library", "operation"}));
  ASSIGN_OR_RETURN(task.baseline_library, GetString(errors, *baseline, "baseline", "library"));
  if (task.baseline_library != "cublaslt" && task.baseline_library != "cudnn") {
    return errors.Error("baseline.library",
                        absl::StrCat("'", task.baseline_library, "' is not 'cublaslt' or 'cudnn'"));
  }
  ASSIGN_OR_RETURN(task.baseline_operation, GetString(errors, *baseline, "baseline", "operation"));
  if (!task.tolerance.fp64_outputs.empty() && !Fp64ReferenceSupported(task.baseline_operation)) {
    return errors.Error(
        "tolerance.fp64_reference",
        absl::StrCat("the engine has no fp64 reference for '", task.baseline_operation,
                     "' (only sdpa_bwd_bf16 and sdpa_bwd_bf16_causal)"));
  }

  ASSIGN_OR_RETURN(const json* roofline, GetObject(errors, root, "", "roofline"));
  RETURN_IF_ERROR(CheckKeys(errors, *roofline, "roofline", {"flops", "min_bytes"}));
  ASSIGN_OR_RETURN(task.flops_expr, GetString(errors, *roofline, "roofline", "flops"));
  ASSIGN_OR_RETURN(task.min_bytes_expr, GetString(errors, *roofline, "roofline", "min_bytes"));
  RETURN_IF_ERROR(CheckExprNames(errors, "roofline.flops", task.flops_expr, ExprMode::kReal, task));
  RETURN_IF_ERROR(
      CheckExprNames(errors, "roofline.min_bytes", task.min_bytes_expr, ExprMode::kReal, task));

  ASSIGN_OR_RETURN(std::optional<int64_t> scratch_cap,
                   GetInt(errors, root, "", "scratch_cap_bytes"));
  if (*scratch_cap < 0) return errors.Error("scratch_cap_bytes", "must not be negative");
  task.scratch_cap_bytes = *scratch_cap;

  RETURN_IF_ERROR(CheckDerivedInputs(errors, task));
  RETURN_IF_ERROR(LoadArches(errors, root, task));
  RETURN_IF_ERROR(CheckWorkloadExpressions(errors, task));

  // Prompts: one file per knowledge level, all three required.
  ASSIGN_OR_RETURN(const json* prompts, GetObject(errors, root, "", "prompts"));
  RETURN_IF_ERROR(CheckKeys(errors, *prompts, "prompts", {"none", "templates", "contract"}));
  for (const std::string& level : KnowledgeLevels()) {
    ASSIGN_OR_RETURN(std::string path, GetString(errors, *prompts, "prompts", level));
    task.prompt_paths[level] = path;
  }

  ASSIGN_OR_RETURN(const json* templates,
                   GetObject(errors, root, "", "templates", /*required=*/false));
  if (templates != nullptr) {
    for (const auto& [arch, list] : templates->items()) {
      const std::string field = FieldJoin("templates", arch);
      auto spec = task.arches.find(arch);
      if (spec == task.arches.end()) return errors.Error(field, "not one of the task's arches");
      if (!list.is_array()) return errors.Error(field, "expected an array of paths");
      std::set<std::string> include_names;
      for (size_t i = 0; i < list.size(); ++i) {
        if (!list[i].is_string())
          return errors.Error(FieldIndex(field, i), "expected a path string");
        const std::string path = list[i].get<std::string>();
        const std::string include_name = fs::path(path).filename().string();
        if (!include_names.insert(include_name).second) {
          return errors.Error(FieldIndex(field, i),
                              absl::StrCat("a second header named '", include_name, "'"));
        }
        spec->second.template_headers.push_back(path);
      }
    }
  }

  ASSIGN_OR_RETURN(task.solutions, LoadSourceRefs(errors, root, "solutions", task));
  ASSIGN_OR_RETURN(task.decoys, LoadSourceRefs(errors, root, "decoys", task));

  // Every referenced file, read once; a missing one is reported with the field naming it.
  for (const std::string& level : KnowledgeLevels()) {
    const std::string field = FieldJoin("prompts", level);
    RETURN_IF_ERROR(files.Read(task.prompt_paths[level], field, NamedBy(field), task.files));
  }
  for (const auto& [arch, spec] : task.arches) {
    for (size_t i = 0; i < spec.template_headers.size(); ++i) {
      const std::string field = FieldIndex(FieldJoin("templates", arch), i);
      RETURN_IF_ERROR(files.Read(spec.template_headers[i], field, NamedBy(field), task.files));
    }
  }
  for (size_t i = 0; i < task.solutions.size(); ++i) {
    const std::string field = FieldJoin(FieldIndex("solutions", i), "path");
    RETURN_IF_ERROR(files.Read(task.solutions[i].path, field, NamedBy(field), task.files));
  }
  for (size_t i = 0; i < task.decoys.size(); ++i) {
    const std::string field = FieldJoin(FieldIndex("decoys", i), "path");
    RETURN_IF_ERROR(files.Read(task.decoys[i].path, field, NamedBy(field), task.files));
  }
  RETURN_IF_ERROR(
      files.Read(kContractPath, "", "the submission contract every prompt includes", task.files));

  bool uses_arch_contract = false;
  for (const std::string& level : KnowledgeLevels()) {
    const std::string& path = task.prompt_paths[level];
    const std::string& text = task.files.at(path);
    RETURN_IF_ERROR(CheckPromptPlaceholders(files.Display(path), level, text));
    for (const Placeholder& placeholder : FindPlaceholders(text)) {
      if (placeholder.name == "arch_contract") uses_arch_contract = true;
    }
  }
  if (uses_arch_contract) {
    RETURN_IF_ERROR(files.Read(kArchContractCommonPath, "",
                               "the architecture rules common to every arch", task.files));
    for (const auto& [arch, spec] : task.arches) {
      RETURN_IF_ERROR(files.Read(ArchContractPath(arch), "",
                                 absl::StrCat("the architecture rules of ", arch), task.files));
    }
  }

  // version_hash: SHA-256 over (path, length, content) of every file in path order, then the
  // hardware text of each arch, which the prompts include and which lives in code.
  Sha256 hasher;
  for (const auto& [path, content] : task.files) hasher.Update(HashStreamEntry(path, content));
  for (const auto& [arch, spec] : task.arches) {
    ASSIGN_OR_RETURN(std::string hardware, HardwareParametersText(arch));
    hasher.Update(HashStreamEntry(absl::StrCat("@hardware/", arch), hardware));
  }
  task.version_hash = DigestHex(hasher.Finish());
  task.definition = std::move(root);
  return task;
}

absl::StatusOr<std::map<std::string, std::string>> TemplateHeaders(const Task& task,
                                                                   const std::string& arch) {
  const ArchSpec* spec = task.FindArch(arch);
  if (spec == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("task '", task.id, "' is not defined for arch '", arch, "'"));
  }
  std::map<std::string, std::string> headers;
  for (const std::string& path : spec->template_headers) {
    auto content = task.files.find(path);
    if (content == task.files.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "task '", task.id, "': header '", path, "' was not loaded (build Task with LoadTask)"));
    }
    headers[fs::path(path).filename().string()] = content->second;
  }
  return headers;
}

absl::StatusOr<std::string> RenderPrompt(const Task& task, const std::string& arch,
                                         const std::string& knowledge_level) {
  if (task.FindArch(arch) == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("task '", task.id, "' is not defined for arch '", arch, "'"));
  }
  const auto& levels = KnowledgeLevels();
  if (std::find(levels.begin(), levels.end(), knowledge_level) == levels.end()) {
    return absl::InvalidArgumentError(absl::StrCat("unknown knowledge level '", knowledge_level,
                                                   "' (known: none, templates, contract)"));
  }
  auto path = task.prompt_paths.find(knowledge_level);
  if (path == task.prompt_paths.end() || task.files.count(path->second) == 0 ||
      task.files.count(kContractPath) == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "task '", task.id, "': prompt files were not loaded (build Task with LoadTask)"));
  }
  const std::string& text = task.files.at(path->second);
  const bool with_templates = knowledge_level != "none";
  std::map<std::string, std::string> headers;
  if (with_templates) {
    ASSIGN_OR_RETURN(headers, TemplateHeaders(task, arch));
  }
  ASSIGN_OR_RETURN(std::string hardware, HardwareParametersText(arch));

  std::map<std::string, std::string> values = {
      {"task_id", task.id},
      {"title", task.title},
      {"description", task.description},
      {"arch", arch},
      {"gpu", GpuName(arch)},
      {"knowledge_level", knowledge_level},
      {"axes", RenderAxes(task)},
      {"tensors", RenderTensors(task)},
      {"scalars", RenderScalars(task)},
      {"workloads", RenderWorkloads(task)},
      {"tolerance", RenderTolerance(task)},
      {"baseline", absl::StrCat(task.baseline_library, " (", task.baseline_operation, ")")},
      {"roofline",
       absl::StrCat("flops = ", task.flops_expr, "; minimum bytes moved = ", task.min_bytes_expr)},
      {"target_families", RenderTargetFamilies(task, arch)},
      {"hardware", hardware},
      {"contract", task.files.at(kContractPath)},
      {"arch_contract", RenderArchContract(task, arch)},
      {"templates", with_templates ? RenderTemplates(headers) : ""},
      {"template_includes", with_templates ? RenderTemplateIncludes(headers) : ""},
      {"scratch_cap_bytes", std::to_string(task.scratch_cap_bytes)},
  };

  std::string out;
  std::set<std::string> used;
  size_t copied = 0;
  for (const Placeholder& placeholder : FindPlaceholders(text)) {
    auto value = values.find(placeholder.name);
    if (value == values.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path->second, ": unknown placeholder '{{", placeholder.name, "}}'"));
    }
    out.append(text, copied, placeholder.begin - copied);
    out.append(value->second);
    copied = placeholder.end;
    used.insert(placeholder.name);
  }
  out.append(text, copied, std::string::npos);

  // The contract, the hardware and (from level templates up) the headers are part of every
  // prompt; a prompt file that does not place them gets them appended in this order.
  auto append_section = [&](const std::string& name, const std::string& heading) {
    if (used.count(name) > 0 || values.at(name).empty()) return;
    if (!out.empty() && out.back() != '\n') out.push_back('\n');
    absl::StrAppend(&out, "\n## ", heading, "\n\n", values.at(name));
  };
  append_section("contract", "Submission contract");
  append_section("hardware", "Hardware");
  if (with_templates) append_section("templates", "Template headers");
  return out;
}

absl::StatusOr<TaskCatalog> TaskCatalog::Load(const std::string& tasks_dir) {
  std::error_code ec;
  if (!fs::is_directory(tasks_dir, ec)) {
    return absl::NotFoundError(absl::StrCat(tasks_dir, ": not a directory"));
  }
  std::vector<fs::path> dirs;
  for (const fs::directory_entry& entry : fs::directory_iterator(tasks_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || name.empty() || name[0] == '_' || name[0] == '.') continue;
    dirs.push_back(entry.path());
  }
  if (ec) return absl::UnavailableError(absl::StrCat(tasks_dir, ": cannot list: ", ec.message()));
  std::sort(dirs.begin(), dirs.end());
  TaskCatalog catalog;
  for (const fs::path& dir : dirs) {
    ASSIGN_OR_RETURN(Task task, LoadTask(dir.string()));
    catalog.tasks_.push_back(std::move(task));
  }
  return catalog;
}

const Task* TaskCatalog::Find(const std::string& id) const {
  for (const Task& task : tasks_) {
    if (task.id == id) return &task;
  }
  return nullptr;
}

}  // namespace ptxbench
