#include "client/run/feedback.h"

#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "proto/wire_names.h"

namespace ptxbench::client::run {
namespace {

using nlohmann::json;

std::string Cut(const std::string& text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t end = text.rfind('\n', max_bytes);
  if (end == std::string::npos || end < max_bytes / 2) end = max_bytes;
  return absl::StrCat(text.substr(0, end), "\n[... ", text.size() - end, " more bytes cut]\n");
}

std::string Text(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_null()) return "";
  return value.dump();
}

double Number(const json& object, const char* key, double fallback = 0) {
  if (object.is_object() && object.contains(key) && object[key].is_number()) {
    return object[key].get<double>();
  }
  return fallback;
}

int64_t Int(const json& object, const char* key) {
  return static_cast<int64_t>(Number(object, key));
}

const v1::StageResult* FindStage(const v1::Verdict& verdict, v1::Stage stage) {
  for (const v1::StageResult& result : verdict.stages()) {
    if (result.stage() == stage) return &result;
  }
  return nullptr;
}

json Detail(const v1::StageResult* stage) {
  if (stage == nullptr || stage->detail_json().empty()) return json::object();
  json detail = json::parse(stage->detail_json(), nullptr, /*allow_exceptions=*/false);
  return detail.is_object() ? detail : json::object();
}

void CompileSection(const v1::Verdict& verdict, const FeedbackOptions& options, std::string* out) {
  const v1::StageResult* stage = FindStage(verdict, v1::STAGE_COMPILE);
  absl::StrAppend(out, "## 1. Compile\n");
  if (stage == nullptr) {
    absl::StrAppend(out, "The compile stage did not report.\n\n");
    return;
  }
  const json detail = Detail(stage);
  absl::StrAppend(out, stage->ok() ? "ok: " : "FAILED: ", stage->summary(), "\n");
  std::map<std::string, int64_t> static_shared;  // Kernel name -> ptxas's static figure.
  if (detail.contains("kernels") && detail["kernels"].is_array()) {
    for (const json& kernel : detail["kernels"]) {
      if (!kernel.is_object() || !kernel.contains("resources")) continue;
      const json& r = kernel["resources"];
      const std::string name = Text(kernel.value("name", json("")));
      static_shared[name] = Int(r, "shared_bytes");
      absl::StrAppend(
          out, absl::StrFormat("kernel %s: %d registers, %d bytes static shared memory, %d bytes "
                               "spill stores, %d bytes spill loads, %d bytes stack frame\n",
                               name, Int(r, "registers"), Int(r, "shared_bytes"),
                               Int(r, "spill_store_bytes"), Int(r, "spill_load_bytes"),
                               Int(r, "stack_frame_bytes")));
    }
  }
  // What each launch of the timed workload uses: static (ptxas) plus dynamic (the plan). The
  // static figure alone said "0 bytes" for a TMA pipeline launched with 197,696 B.
  if (detail.contains("launches") && detail["launches"].is_array()) {
    int index = 0;
    for (const json& launch : detail["launches"]) {
      if (!launch.is_object()) continue;
      const std::string kernel = Text(launch.value("kernel", json("")));
      const int64_t dynamic = Int(launch, "dynamic_shared_bytes");
      const auto found = static_shared.find(kernel);
      const int64_t fixed = found != static_shared.end() ? found->second : 0;
      absl::StrAppend(
          out, absl::StrFormat("launch %d (%s, timed workload): grid %s, block %s, shared memory "
                               "per block %d bytes (%d dynamic from the plan + %d static)\n",
                               index++, kernel, Text(launch.value("grid", json::array())),
                               Text(launch.value("block", json::array())), dynamic + fixed, dynamic,
                               fixed));
    }
  }
  if (detail.contains("plan_error")) {
    absl::StrAppend(out, "launch plan error: ", Text(detail["plan_error"]), "\n");
  }
  const std::string log = detail.contains("log") ? Text(detail["log"]) : "";
  if (!log.empty()) {
    absl::StrAppend(out, "compiler log (NVRTC, then ptxas -v):\n```\n",
                    Cut(log, options.max_log_bytes), log.back() == '\n' ? "" : "\n", "```\n");
  }
  absl::StrAppend(out, "\n");
}

void RuntimeSection(const v1::Verdict& verdict, const FeedbackOptions& options, std::string* out) {
  const v1::VerdictClass c = verdict.verdict_class();
  if (c != v1::VERDICT_CLASS_RUNTIME_ERROR && c != v1::VERDICT_CLASS_TIMEOUT &&
      c != v1::VERDICT_CLASS_INPUT_MUTATED) {
    return;
  }
  absl::StrAppend(out, "## 2. Runtime error\n", Cut(verdict.message(), options.max_log_bytes),
                  "\n");
  // The sanitizer's report is in the message when the worker had the tool; otherwise the
  // stage detail says why not.
  for (const v1::StageResult& stage : verdict.stages()) {
    const json detail = Detail(&stage);
    if (detail.contains("compute_sanitizer") && detail["compute_sanitizer"].is_string()) {
      const std::string report = detail["compute_sanitizer"].get<std::string>();
      if (verdict.message().find(report.substr(0, 200)) == std::string::npos) {
        absl::StrAppend(out, "compute-sanitizer: ", Cut(report, options.max_log_bytes), "\n");
      }
    }
  }
  absl::StrAppend(out, "\n");
}

void CorrectnessSection(const v1::Verdict& verdict, std::string* out) {
  const v1::StageResult* stage = FindStage(verdict, v1::STAGE_CORRECTNESS);
  const bool wrong = verdict.verdict_class() == v1::VERDICT_CLASS_WRONG_RESULT;
  if (stage == nullptr && !wrong) return;
  absl::StrAppend(out, "## 3. Correctness\n");
  if (stage != nullptr) {
    absl::StrAppend(out, stage->ok() ? "ok: " : "FAILED: ", stage->summary(), "\n");
  }
  const json detail = Detail(stage);
  if (detail.contains("trials") && detail["trials"].is_array()) {
    for (const json& trial : detail["trials"]) {
      if (!trial.is_object()) continue;
      const std::string head = absl::StrFormat(
          "workload %s (%s seed): %s", Text(trial.value("workload", json(""))),
          Text(trial.value("seed_kind", json("?"))),
          trial.value("input_mutated", false) ? "INPUTS MUTATED"
                                              : (trial.value("pass", false) ? "pass" : "FAIL"));
      const json tensors = trial.value("compare", json::object()).value("tensors", json::object());
      if (!tensors.is_object() || tensors.empty()) {
        absl::StrAppend(out, head, "\n");
        continue;
      }
      for (auto it = tensors.begin(); it != tensors.end(); ++it) {
        const json& t = it.value();
        absl::StrAppend(
            out, head,
            absl::StrFormat("; %s: max abs error %.4g, max rel error %.4g, matched ratio %.6f",
                            it.key(), Number(t, "max_abs_error"), Number(t, "max_rel_error"),
                            Number(t, "matched_ratio")));
        if (Number(t, "unwritten") > 0) {
          absl::StrAppend(out, absl::StrFormat(", %d unwritten", Int(t, "unwritten")));
        }
        if (Number(t, "nonfinite") > 0) {
          absl::StrAppend(out, absl::StrFormat(", %d NaN/Inf", Int(t, "nonfinite")));
        }
        if (!t.value("pass", true)) absl::StrAppend(out, "; ", Text(t.value("reason", json(""))));
        absl::StrAppend(out, "\n");
      }
    }
  }
  if (wrong) {
    absl::StrAppend(out, verdict.message(), "\n");
  }
  absl::StrAppend(out, "\n");
}

void TargetSection(const v1::Verdict& verdict, std::string* out) {
  const v1::StageResult* stage = FindStage(verdict, v1::STAGE_TARGET_INSTRUCTIONS);
  const json compile = Detail(FindStage(verdict, v1::STAGE_COMPILE));
  if (stage == nullptr) {
    // Presence in the PTX is no credit, but it tells the model its inline PTX was kept.
    const json families = compile.value("ptx_families", json::object());
    if (families.is_object() && !families.empty()) {
      std::vector<std::string> parts;
      for (auto it = families.begin(); it != families.end(); ++it) {
        parts.push_back(absl::StrCat(it.key(), " ", Text(it.value())));
      }
      absl::StrAppend(out, "## 4. Target instructions\nnot checked (the stage did not run); ",
                      "instructions per family in your PTX: ", absl::StrJoin(parts, ", "),
                      ". Presence earns no credit: they must execute.\n\n");
    }
    return;
  }
  absl::StrAppend(out, "## 4. Target instructions\n",
                  stage->ok() ? "ok: " : "FAILED: ", stage->summary(), "\n");
  const json detail = Detail(stage);
  if (detail.contains("families") && detail["families"].is_array()) {
    for (const json& f : detail["families"]) {
      if (!f.is_object()) continue;
      absl::StrAppend(
          out,
          absl::StrFormat(
              "%s%s: %s; PTX instructions %d, SASS sites %d, warp executions %d, threads "
              "with predicate on %d",
              Text(f.value("family", json("?"))), f.value("required", false) ? " (required)" : "",
              f.value("executed", false) ? "executed" : "NOT executed", Int(f, "ptx_instructions"),
              Int(f, "sass_sites"), Int(f, "warp_executions"), Int(f, "thread_pred_on")));
      if (f.contains("examples") && f["examples"].is_array() && !f["examples"].empty()) {
        absl::StrAppend(out, "; e.g. ", Text(f["examples"][0]));
      }
      const std::string why = Text(f.value("explanation", json("")));
      if (!why.empty()) absl::StrAppend(out, "; ", why);
      if (Number(f, "ptx_instructions") > 0 && Number(f, "sass_sites") == 0) {
        absl::StrAppend(out, "; WARNING: present in your PTX but not in the compiled SASS");
      }
      absl::StrAppend(out, "\n");
    }
  }
  absl::StrAppend(out, "\n");
}

void SpeedupSection(const v1::Verdict& verdict, const FeedbackOptions& options, std::string* out) {
  const v1::StageResult* stage = FindStage(verdict, v1::STAGE_TIMING);
  if (stage == nullptr && verdict.speedup() <= 0) return;
  absl::StrAppend(out, "## 5. Speedup\n");
  if (stage != nullptr) absl::StrAppend(out, stage->summary(), "\n");
  const bool unstable = verdict.has_sampling() && !verdict.sampling().speedup_stable();
  absl::StrAppend(
      out, absl::StrFormat("speedup %.3f over the library; the target is %.2f%s\n\n",
                           verdict.speedup(), options.target_speedup,
                           SpeedupReachesTarget(verdict, options.target_speedup) ? " (reached)"
                           : unstable ? " (not counted: the kernel's samples scattered far more "
                                        "than the library's, so it is not a clean figure)"
                                      : " (not reached)"));
}

}  // namespace

bool SpeedupReachesTarget(const v1::Verdict& verdict, double target) {
  if (verdict.has_sampling() && !verdict.sampling().speedup_stable()) return false;
  return verdict.speedup() >= target;
}

std::string VerdictFeedback(const v1::Verdict& verdict, const FeedbackOptions& options) {
  std::string out = absl::StrFormat(
      "Evaluation of your submission: %s (compiled: %s, correct: %s, target instructions "
      "executed: %s)\n\n",
      wire::VerdictClassName(verdict.verdict_class()), verdict.compiled() ? "yes" : "no",
      verdict.correct() ? "yes" : "no", verdict.target_executed() ? "yes" : "no");
  CompileSection(verdict, options, &out);
  RuntimeSection(verdict, options, &out);
  CorrectnessSection(verdict, &out);
  TargetSection(verdict, &out);
  SpeedupSection(verdict, options, &out);
  if (options.compile_only) {
    absl::StrAppend(&out, "Only the compile stage was run for this evaluation.\n");
  } else if (verdict.runtime_unverified()) {
    absl::StrAppend(&out, "The runtime stages could not run for this arch here.\n");
  }
  // Classes whose message repeats a section above (the compile log, the failing workload, the
  // runtime error) get no summary line.
  const v1::VerdictClass c = verdict.verdict_class();
  if (!verdict.message().empty() && c != v1::VERDICT_CLASS_COMPILE_ERROR &&
      c != v1::VERDICT_CLASS_WRONG_RESULT && c != v1::VERDICT_CLASS_RUNTIME_ERROR &&
      c != v1::VERDICT_CLASS_TIMEOUT && c != v1::VERDICT_CLASS_INPUT_MUTATED) {
    absl::StrAppend(&out, "Summary: ", Cut(verdict.message(), options.max_log_bytes), "\n");
  }
  return out;
}

std::string RejectedSubmissionFeedback(const std::string& reason) {
  return absl::StrCat("The server refused your submission before evaluating it: ", reason,
                      "\nFix the source file and send it again.\n");
}

}  // namespace ptxbench::client::run
