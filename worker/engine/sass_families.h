// Where each target instruction family sits in a compiled module's SASS: the static half of the
// target-instruction stage (docs/measurement.md, "Target instructions"), run by the evaluator's
// sassmap mode on the cubin, compared by the supervisor with CUPTI's per-PC counts
// (gpu/target_analysis.h).
//
// By SASS opcode for families with opcodes (exact, common/target_families.h); for every family
// also by line correlation: either the PTX line of each SASS instruction (nvdisasm -gp, with the
// PTX that -lineinfo embeds in .nv_debug_ptx_txt) or the source line that both the PTX (.loc)
// and the SASS (nvdisasm -g) carry, whichever agrees better with the opcode classification on
// this module. PTX lines are read with the compile stage's PTX tokenizer (ptx_scan.h).
#ifndef PTXBENCH_WORKER_ENGINE_SASS_FAMILIES_H_
#define PTXBENCH_WORKER_ENGINE_SASS_FAMILIES_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/target_families.h"
#include "worker/engine/gpu/protocol_messages.h"

namespace ptxbench {

// What the classification reads: nvdisasm's two listings of the cubin and its PTX.
struct SassListings {
  std::string with_source_lines;              // nvdisasm -c -g
  std::optional<std::string> with_ptx_lines;  // nvdisasm -c -gp; nullopt when it failed.
  std::optional<std::string> embedded_ptx;    // The cubin's .nv_debug_ptx_txt, if any.
  std::string compile_ptx;                    // The compile stage's PTX (its .file/.loc).
  std::string tool;                           // The nvdisasm that produced the listings.
};

// The classification of the listings (pure: unit-tested on real nvdisasm output).
gpu::SassFamilyMap ClassifySassFamilies(std::string_view arch, const SassListings& listings);

// Runs nvdisasm (gpu/sass_listing.h FindNvdisasm) on `cubin_path` and classifies; a map that
// says why it is unavailable when nvdisasm is missing or fails.
gpu::SassFamilyMap StaticFamilyMap(std::string_view arch, const std::string& cubin_path,
                                   const std::string& cubin, const std::string& compile_ptx);

// ptxas 13.0 implements an empty wgmma commit group, and the else-path of a guarded
// '@p wgmma', with 'HGMMA.64x8x16.F16 RZ, gdesc[URZ], RZ, !UPT' (tools/kernel-dev/NOTES.md): it
// runs predicate-on but does no matrix work, so it is never a wgmma site.
bool IsNoOpMatrixInstruction(std::string_view opcode, std::string_view text);

// (source file's base name, line) -> the families of the PTX instructions the compile stage's
// PTX attributes to that line (.loc). NVRTC names the submission "submission.cu".
using SourceLine = std::pair<std::string, int>;
std::map<SourceLine, std::set<std::string>> SourceLineFamilies(
    std::string_view ptx, const std::vector<const TargetFamily*>& families);

}  // namespace ptxbench

#endif  // PTXBENCH_WORKER_ENGINE_SASS_FAMILIES_H_
