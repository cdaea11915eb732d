#include "worker/engine/gpu/target_analysis.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace ptxbench::gpu {
namespace {

using json = nlohmann::json;

struct PcCounts {
  uint64_t warp = 0, threads = 0, gmma = 0, tma = 0;
};

}  // namespace

json ToJson(const TargetReport& r) {
  json families = json::array();
  for (const FamilyVerdict& f : r.families) {
    families.push_back({{"family", f.family},
                        {"required", f.required},
                        {"ptx_instructions", f.ptx_instructions},
                        {"sass_sites", f.sass_sites},
                        {"classified_by", f.classified_by},
                        {"warp_executions", f.warp_executions},
                        {"thread_pred_on", f.thread_pred_on},
                        {"executed", f.executed},
                        {"examples", f.examples},
                        {"explanation", f.explanation}});
  }
  return {{"ok", r.ok},
          {"refused", r.refused},
          {"message", r.message},
          {"families", families},
          {"detail", r.detail}};
}

TargetReport AnalyzeTargets(const SassFamilyMap& sass_map, const std::vector<InstrumentEvent>& runs,
                            const std::map<std::string, int>& ptx_families,
                            const std::vector<std::string>& required) {
  TargetReport report;
  if (!sass_map.available) {
    report.refused = true;
    report.message = absl::StrCat("target instructions not verified: no SASS map of the module (",
                                  sass_map.reason.value_or("unknown"), ")");
    return report;
  }
  // Measured counts per (function, pc), summed over runs; coverage per instrumented kernel.
  std::map<std::pair<std::string, uint32_t>, PcCounts> counts;
  json coverage = json::array();
  std::vector<std::string> uncovered;
  for (const InstrumentEvent& run : runs) {
    std::set<std::string> functions;
    for (const PcRecord& rec : run.records) {
      PcCounts& c = counts[{rec.function, rec.pc}];
      c.warp += rec.warp_inst_executed;
      c.threads += rec.thread_inst_pred_on;
      c.gmma += rec.gmma_warp_inst;
      c.tma += rec.tma_warp_inst;
      functions.insert(rec.function);
    }
    bool covered = functions.count(run.kernel) > 0;
    if (!covered) uncovered.push_back(run.kernel);
    coverage.push_back({{"kernel", run.kernel},
                        {"launch_index", run.launch_index},
                        {"records", run.records.size()},
                        {"functions_with_records", functions},
                        {"covered", covered}});
  }
  report.detail["coverage"] = coverage;

  // Sites per family from the static map.
  struct Site {
    std::string function;
    uint32_t pc;
    std::string sass;
    bool by_opcode;
  };
  std::map<std::string, std::vector<Site>> sites;
  for (const auto& [function, map] : sass_map.functions) {
    for (const auto& [family, family_sites] : map.sites) {
      for (const SassSite& s : family_sites) {
        sites[family].push_back({function, s.pc, s.sass, s.by == SiteEvidence::kSassOpcode});
      }
    }
  }
  // Cross-check: every PC where CUPTI counted a GMMA must be a wgmma site by opcode.
  size_t gmma_pcs = 0, gmma_agree = 0;
  std::set<std::pair<std::string, uint32_t>> wgmma_opcode_sites;
  for (const Site& s : sites["wgmma"]) {
    if (s.by_opcode) wgmma_opcode_sites.insert({s.function, s.pc});
  }
  for (const auto& [key, c] : counts) {
    if (c.gmma == 0) continue;
    ++gmma_pcs;
    if (wgmma_opcode_sites.count(key)) ++gmma_agree;
  }
  report.detail["cupti_gmma_cross_check"] = {{"pcs_with_gmma_counts", gmma_pcs},
                                             {"matching_static_hgmma_sites", gmma_agree}};

  std::set<std::string> names(required.begin(), required.end());
  for (const auto& [name, list] : sites) names.insert(name);
  for (const auto& [name, count] : ptx_families) names.insert(name);
  std::vector<std::string> failed;
  for (const std::string& name : names) {
    FamilyVerdict f;
    f.family = name;
    f.required = std::find(required.begin(), required.end(), name) != required.end();
    if (auto it = ptx_families.find(name); it != ptx_families.end())
      f.ptx_instructions = it->second;
    const std::vector<Site>& all = sites[name];
    bool has_opcode =
        std::any_of(all.begin(), all.end(), [](const Site& s) { return s.by_opcode; });
    f.classified_by = has_opcode ? "sass_opcode" : (all.empty() ? "" : "ptx_line");
    for (const Site& s : all) {
      if (has_opcode && !s.by_opcode) continue;
      ++f.sass_sites;
      auto it = counts.find({s.function, s.pc});
      if (it != counts.end()) {
        f.warp_executions += it->second.warp;
        f.thread_pred_on += it->second.threads;
      }
      if (f.examples.size() < 3) {
        f.examples.push_back(absl::StrFormat("%s+0x%04x %s", s.function, s.pc, s.sass));
      }
    }
    f.executed = f.thread_pred_on > 0;
    if (f.executed) {
      f.explanation = absl::StrFormat(
          "%d SASS instructions; executed %d warp-times with %d predicate-on thread-instructions",
          f.sass_sites, f.warp_executions, f.thread_pred_on);
    } else if (f.sass_sites > 0 && f.warp_executions > 0) {
      f.explanation = absl::StrFormat(
          "present in SASS (%d instructions, e.g. %s) and issued %d times, but never with its "
          "predicate on",
          f.sass_sites, f.examples.empty() ? "" : f.examples[0], f.warp_executions);
    } else if (f.sass_sites > 0) {
      f.explanation =
          absl::StrFormat("present in SASS (%d instructions, e.g. %s) but never executed",
                          f.sass_sites, f.examples.empty() ? "" : f.examples[0]);
    } else if (f.ptx_instructions > 0) {
      f.explanation = absl::StrFormat(
          "present in the PTX (%d instructions) but not in the SASS: the assembler produced none",
          f.ptx_instructions);
    } else {
      f.explanation = "not used by the submission";
    }
    if (f.required && !f.executed) failed.push_back(absl::StrCat(name, ": ", f.explanation));
    report.families.push_back(std::move(f));
  }
  if (!uncovered.empty()) {
    report.refused = true;
    report.message =
        absl::StrCat("target instructions not verified: CUPTI returned no records for kernel(s) ",
                     absl::StrJoin(uncovered, ", "), " of the plan");
    return report;
  }
  if (runs.empty()) {
    report.refused = true;
    report.message = "target instructions not verified: no instrumented run";
    return report;
  }
  report.ok = failed.empty();
  report.message = report.ok
                       ? "every target family executed with its predicate on"
                       : absl::StrCat("target family not executed: ", absl::StrJoin(failed, "; "));
  return report;
}

}  // namespace ptxbench::gpu
