#include "common/target_families.h"

#include <algorithm>
#include <cctype>

namespace ptxbench {
namespace {

// SASS opcode lists. NVIDIA's CUDA binary utilities documentation ("Hopper Instruction Set",
// "Blackwell Instruction Set") names the opcodes. Which PTX instruction becomes which opcode was
// measured on 2026-11-30: one probe kernel per arch using every family, assembled by the ptxas
// 13.0.88 of the compile stage and disassembled with cuobjdump 13.0 on the lent H200; the
// observed instructions are listed in docs/task-authoring.md and checked by
// tests/common/target_families_test.cc.
std::vector<TargetFamily> BuildRegistry() {
  std::vector<TargetFamily> families;
  families.push_back({
      .name = "wgmma",
      .description = "warpgroup matrix multiply-accumulate (wgmma.mma_async)",
      .credited = true,
      .ptx = {{"wgmma.mma_async", {}}},
      // One opcode per operand type: H (f16/bf16/tf32), Q (fp8), I (int8), B (binary).
      .sass_opcodes = {"HGMMA", "QGMMA", "IGMMA", "BGMMA"},
      .arches = {"sm_90a"},
      // Measured: wgmma.fence -> WARPGROUP.ARRIVE, wait_group -> WARPGROUP.DEPBAR.LE.
      .sass_note = "wgmma.fence/commit_group/wait_group lower to WARPGROUP.* and are not credited",
  });
  families.push_back({
      .name = "tma",
      .description = "bulk tensor copies through the tensor memory accelerator "
                     "(cp.async.bulk.tensor, cp.reduce.async.bulk.tensor)",
      .credited = true,
      .ptx = {{"cp.async.bulk.tensor", {}}, {"cp.reduce.async.bulk.tensor", {}}},
      // Prefetches (UTMAPF) move nothing into shared memory and non-tensor bulk copies (UBLKCP)
      // take no tensor map, so neither earns credit.
      .sass_opcodes = {"UTMALDG", "UTMASTG", "UTMAREDG"},
      .arches = {"sm_90a", "sm_100a"},
      .sass_note = "UTMAPF (prefetch), UTMACMDFLUSH (commit) and UBLK* (non-tensor bulk) excluded",
  });
  families.push_back({
      .name = "tcgen05_mma",
      .description = "fifth-generation tensor core MMA into tensor memory (tcgen05.mma)",
      .credited = true,
      .ptx = {{"tcgen05.mma", {}}},
      // UTCHMMA (f16/bf16/tf32), UTCQMMA (fp8/fp6/fp4), UTCIMMA (int8), UTCOMMA (mxf4), ...
      .sass_opcodes = {"UTC*MMA"},
      .arches = {"sm_100a"},
      // Measured: tcgen05.commit -> UTCBAR, tcgen05.alloc/dealloc -> UTCATOMSWS.*.
      .sass_note =
          "tcgen05.commit (UTCBAR) and tcgen05.alloc/dealloc (UTCATOMSWS) are not credited",
  });
  families.push_back({
      .name = "tcgen05_tmem",
      .description = "tensor memory loads and stores (tcgen05.ld, tcgen05.st)",
      .credited = true,
      .ptx = {{"tcgen05.ld", {}}, {"tcgen05.st", {}}},
      .sass_opcodes = {"LDTM", "STTM"},
      .arches = {"sm_100a"},
      .sass_note = "",
  });
  // The TMA pipe's other instructions. The H200's hardware counter of the timed path
  // (sm__inst_executed_pipe_tma.sum) counts them beside the copies, the instrumented run's
  // per-PC TMA metric (smsp__sass_inst_executed_op_tma) does not: on 2026-12-02 the GEMM
  // solution's timed path counted 308,224 TMA-pipe instructions against 301,056 copies, 4 more
  // per CTA (its 2 tensor-map prefetches and, we take it, its TMA store's bulk-group commits);
  // the attention solution 3 more per CTA (its 3 prefetches), the register-A GEMM 2 (its 2). The
  // path cross-check (work_share.h) allows for what the instrumented run executed of these.
  families.push_back({
      .name = "tma_control",
      .description = "TMA-pipe instructions that copy no tensor tile (prefetch.tensormap, "
                     "bulk-group commits, non-tensor bulk copies and prefetches)",
      .ptx = {{"prefetch.tensormap", {}},
              {"cp.async.bulk.commit_group", {}},
              {"cp.async.bulk.wait_group", {}},
              {"cp.async.bulk.prefetch", {}},
              {"cp.async.bulk.shared", {}},
              {"cp.async.bulk.global", {}}},
      .sass_opcodes = {"UTMAPF", "UTMACMDFLUSH", "UTMACCTL", "UBLKCP", "UBLKPF", "UBLKRED"},
      .arches = {"sm_90a", "sm_100a"},
      .sass_note = "UTMAPF and UTMACMDFLUSH measured (probe, 2026-11-30); UTMACCTL and UBLK* "
                   "from NVIDIA's Hopper instruction-set table, not measured",
  });
  families.push_back({
      .name = "mbarrier",
      .description = "shared-memory transaction barriers (mbarrier.*)",
      .ptx = {{"mbarrier", {}}},
      // Measured: init -> SYNCS.EXCH.64, arrive.expect_tx -> SYNCS.ARRIVE.TRANS64, try_wait ->
      // SYNCS.PHASECHK.TRANS64.TRYWAIT.
      .sass_opcodes = {"SYNCS"},
      .arches = {"sm_90a", "sm_100a"},
      .sass_note = "SYNCS also implements other asynchronous synchronization",
  });
  families.push_back({
      .name = "setmaxnreg",
      .description = "per-warpgroup register reallocation (setmaxnreg)",
      .ptx = {{"setmaxnreg", {}}},
      .sass_opcodes = {"USETMAXREG"},
      .arches = {"sm_90a", "sm_100a"},
      .sass_note = "",
  });
  families.push_back({
      .name = "stmatrix",
      .description = "warp-wide matrix stores to shared memory (stmatrix)",
      .ptx = {{"stmatrix", {}}},
      .sass_opcodes = {"STSM"},
      .arches = {"sm_90a", "sm_100a"},
      .sass_note = "",
  });
  families.push_back({
      .name = "elect_sync",
      .description = "leader election within a warp (elect.sync)",
      .ptx = {{"elect.sync", {}}},
      .sass_opcodes = {"ELECT"},
      .arches = {"sm_90a", "sm_100a"},
      // Measured: 8 ELECT in the probes for 2 elect.sync; ptxas also elects for "if (tid == 0)".
      .sass_note =
          "ptxas emits ELECT for single-thread branches too, so ELECT overstates elect.sync",
  });
  families.push_back({
      .name = "cluster_barrier",
      .description = "thread-block-cluster barriers (barrier.cluster.*)",
      .ptx = {{"barrier.cluster", {}}},
      .sass_opcodes = {"UCGABAR_ARV", "UCGABAR_WAIT"},
      .arches = {"sm_90a", "sm_100a"},
      .sass_note = "",
  });
  families.push_back({
      .name = "mapa",
      .description = "mapping a shared address to another CTA of the cluster (mapa)",
      .ptx = {{"mapa", {}}},
      .sass_opcodes = {},
      .arches = {"sm_90a", "sm_100a"},
      .sass_note = "no opcode of its own in the probes (address arithmetic); counted in PTX only",
  });
  families.push_back({
      .name = "fence_proxy_async",
      .description = "fences between the generic and async proxies (fence.proxy.async)",
      .ptx = {{"fence.proxy.async", {}}},
      .sass_opcodes = {"FENCE.VIEW.ASYNC.S"},
      .arches = {"sm_90a", "sm_100a"},
      // Measured: fence.proxy.async.shared::cta -> FENCE.VIEW.ASYNC.S; the FENCE.VIEW.ASYNC.T that
      // follows tcgen05.wait::st on sm_100a is not this fence.
      .sass_note = "only the shared::cta form was measured; other state spaces are not classified",
  });
  families.push_back({
      .name = "red_global_v4",
      .description = "vector reductions to global memory (red.global...v4)",
      .ptx = {{"red", {"global", "v4"}}},
      // Measured: red.global.add.v4.f32 -> REDG.E.ADD.F32x4.FTZ.RN.STRONG.GPU.
      .sass_opcodes = {"REDG"},
      .arches = {"sm_90a", "sm_100a"},
      .sass_note = "REDG also implements scalar global reductions; the vector form says F32x4",
  });
  return families;
}

bool GlobMatch(std::string_view pattern, std::string_view text) {
  const size_t star = pattern.find('*');
  if (star == std::string_view::npos) return pattern == text;
  const std::string_view head = pattern.substr(0, star);
  const std::string_view tail = pattern.substr(star + 1);
  if (text.size() < head.size() + tail.size()) return false;
  if (text.substr(0, head.size()) != head) return false;
  // Only one '*' is ever used; the rest of the pattern must match the end of the text.
  return text.substr(text.size() - tail.size()) == tail && tail.find('*') == std::string_view::npos;
}

// True when `part` is one of the dot-separated parts of `mnemonic` ("v4" in "red.global.v4.f32").
bool HasDotPart(std::string_view mnemonic, std::string_view part) {
  size_t start = 0;
  while (start <= mnemonic.size()) {
    size_t end = mnemonic.find('.', start);
    if (end == std::string_view::npos) end = mnemonic.size();
    if (mnemonic.substr(start, end - start) == part) return true;
    start = end + 1;
  }
  return false;
}

}  // namespace

const std::vector<TargetFamily>& TargetFamilies() {
  static const std::vector<TargetFamily>* const kFamilies =
      new std::vector<TargetFamily>(BuildRegistry());
  return *kFamilies;
}

const TargetFamily* FindTargetFamily(std::string_view name) {
  for (const TargetFamily& family : TargetFamilies()) {
    if (family.name == name) return &family;
  }
  return nullptr;
}

bool FamilyExistsOn(const TargetFamily& family, std::string_view arch) {
  return std::find(family.arches.begin(), family.arches.end(), arch) != family.arches.end();
}

bool PtxMnemonicInFamily(const TargetFamily& family, std::string_view mnemonic) {
  for (const PtxPattern& pattern : family.ptx) {
    const std::string_view prefix = pattern.prefix;
    if (mnemonic.size() < prefix.size() || mnemonic.substr(0, prefix.size()) != prefix) continue;
    if (mnemonic.size() > prefix.size() && mnemonic[prefix.size()] != '.') continue;
    bool has_all_parts = true;
    for (const std::string& required : pattern.required_parts) {
      if (!HasDotPart(mnemonic, required)) has_all_parts = false;
    }
    if (has_all_parts) return true;
  }
  return false;
}

std::string SassBaseOpcode(std::string_view instruction) {
  size_t i = 0;
  auto skip_space = [&] {
    while (i < instruction.size() && std::isspace(static_cast<unsigned char>(instruction[i]))) ++i;
  };
  skip_space();
  if (i < instruction.size() && instruction[i] == '@') {  // Predicate guard "@!P0".
    while (i < instruction.size() && !std::isspace(static_cast<unsigned char>(instruction[i]))) ++i;
    skip_space();
  }
  const size_t start = i;
  while (i < instruction.size() && instruction[i] != '.' && instruction[i] != ';' &&
         !std::isspace(static_cast<unsigned char>(instruction[i]))) {
    ++i;
  }
  return std::string(instruction.substr(start, i - start));
}

bool SassOpcodeInFamily(const TargetFamily& family, std::string_view instruction) {
  const std::string opcode = SassBaseOpcode(instruction);
  if (opcode.empty()) return false;
  // The opcode with its modifiers ("FENCE.VIEW.ASYNC.S"), for patterns that name modifiers.
  const size_t start = instruction.find(opcode);
  size_t end = start;
  while (end < instruction.size() && instruction[end] != ';' &&
         !std::isspace(static_cast<unsigned char>(instruction[end]))) {
    ++end;
  }
  const std::string_view full = instruction.substr(start, end - start);
  for (const std::string& pattern : family.sass_opcodes) {
    if (pattern.find('.') != std::string::npos) {
      if (full == pattern ||
          (full.size() > pattern.size() && full.substr(0, pattern.size()) == pattern &&
           full[pattern.size()] == '.')) {
        return true;
      }
    } else if (GlobMatch(pattern, opcode)) {
      return true;
    }
  }
  return false;
}

std::vector<std::string> FamiliesOfSassOpcode(std::string_view arch, std::string_view instruction) {
  std::vector<std::string> names;
  for (const TargetFamily& family : TargetFamilies()) {
    if (FamilyExistsOn(family, arch) && SassOpcodeInFamily(family, instruction)) {
      names.push_back(family.name);
    }
  }
  return names;
}

}  // namespace ptxbench
