// Decides the target-instruction stage from two independent views (CPU only, unit-tested):
// the static map of where each family sits in the submission's SASS (compile mode, nvdisasm)
// and the per-PC counts CUPTI measured in the instrumented runs (one process per kernel of the
// plan). A family counts as executed only when one of its own instructions, in one of the
// submission's own kernels, ran with its predicate on for at least one thread.
#ifndef PTXBENCH_WORKER_ENGINE_GPU_TARGET_ANALYSIS_H_
#define PTXBENCH_WORKER_ENGINE_GPU_TARGET_ANALYSIS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "worker/engine/gpu/protocol_messages.h"

namespace ptxbench::gpu {

struct FamilyVerdict {
  std::string family;
  bool required = false;
  int ptx_instructions = 0;      // Static count in the PTX (compile stage).
  int sass_sites = 0;            // Instructions classified to the family in the SASS.
  std::string classified_by;     // "sass_opcode" or "ptx_line".
  uint64_t warp_executions = 0;  // Summed smsp__sass_inst_executed over the sites.
  uint64_t thread_pred_on = 0;   // Summed smsp__sass_thread_inst_executed_pred_on.
  bool executed = false;
  std::vector<std::string> examples;  // "gemm_kernel+0x0470 HGMMA.64x256x16.F32.BF16 ..."
  std::string explanation;
};

struct TargetReport {
  bool ok = false;       // Every required family executed.
  bool refused = false;  // The evidence is incomplete (a kernel without records, no SASS
                         // map): never a pass, an infrastructure failure instead.
  std::string message;
  std::vector<FamilyVerdict> families;
  nlohmann::json detail;  // Coverage per kernel, cross-checks.
};
nlohmann::json ToJson(const TargetReport& report);

// `sass_map`: the sassmap process's map. `runs`: the instrumented runs (one per distinct kernel
// of the plan). `ptx_families`: the compile stage's static counts. `required`: the task's target
// families for the arch.
TargetReport AnalyzeTargets(const SassFamilyMap& sass_map, const std::vector<InstrumentEvent>& runs,
                            const std::map<std::string, int>& ptx_families,
                            const std::vector<std::string>& required);

}  // namespace ptxbench::gpu

#endif  // PTXBENCH_WORKER_ENGINE_GPU_TARGET_ANALYSIS_H_
