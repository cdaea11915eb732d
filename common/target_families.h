// The registry of target instruction families, as data. A task names the families a submission
// must execute for target-instruction correctness (TIC); the compile stage counts them in the PTX
// and the CUPTI stage classifies per-PC SASS records with the opcode lists here.
//
// Families are "credited" (a task may require them: wgmma, tma, tcgen05_mma, tcgen05_tmem) or
// informational (the other architecture-specific PTX the original benchmark counted: mbarrier,
// setmaxnreg, stmatrix, elect_sync, cluster_barrier, mapa, fence_proxy_async, red_global_v4).
// docs/task-authoring.md lists them with their instructions and opcodes.
#ifndef PTXBENCH_COMMON_TARGET_FAMILIES_H_
#define PTXBENCH_COMMON_TARGET_FAMILIES_H_

#include <string>
#include <string_view>
#include <vector>

namespace ptxbench {

// One PTX instruction pattern: the mnemonic starts with `prefix` at a '.' boundary and contains
// every one of `required_parts` among its dot-separated parts (".global", ".v4").
struct PtxPattern {
  std::string prefix;                       // e.g. "wgmma.mma_async", "cp.async.bulk.tensor".
  std::vector<std::string> required_parts;  // e.g. {"global", "v4"} for red.global...v4.
};

struct TargetFamily {
  std::string name;         // "wgmma", "tma", ...
  std::string description;  // One line for prompts and reports.
  bool credited = false;    // May appear in a task's target_families.
  std::vector<PtxPattern> ptx;
  // SASS opcodes that implement the family, without modifiers ("HGMMA", not
  // "HGMMA.64x128x16.F32.BF16"); '*' matches any run of characters ("UTC*MMA"). An entry with
  // a '.' names modifiers and matches an instruction that starts with them at a '.' boundary
  // ("FENCE.VIEW.ASYNC.S").
  std::vector<std::string> sass_opcodes;
  std::vector<std::string> arches;  // "sm_90a", "sm_100a".
  std::string sass_note;            // Caveats of the opcode list (breadth, provenance).
};

// Every family, in a fixed order (credited first).
const std::vector<TargetFamily>& TargetFamilies();

// nullptr when no family has that name.
const TargetFamily* FindTargetFamily(std::string_view name);

bool FamilyExistsOn(const TargetFamily& family, std::string_view arch);

// True when a PTX instruction mnemonic ("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16",
// without predicate or operands) belongs to the family.
bool PtxMnemonicInFamily(const TargetFamily& family, std::string_view mnemonic);

// The opcode of a SASS instruction text without predicate or modifiers:
// "@P0 HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], R24" -> "HGMMA".
std::string SassBaseOpcode(std::string_view instruction);

// True when the SASS instruction (or bare opcode, with or without modifiers) implements the
// family.
bool SassOpcodeInFamily(const TargetFamily& family, std::string_view instruction);

// Names of the families whose SASS opcodes match, restricted to those that exist on `arch`.
std::vector<std::string> FamiliesOfSassOpcode(std::string_view arch, std::string_view instruction);

}  // namespace ptxbench

#endif  // PTXBENCH_COMMON_TARGET_FAMILIES_H_
