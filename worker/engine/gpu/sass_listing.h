// The static side of the target-instruction stage: which SASS instruction sits at each PC of
// the submission's cubin, and which PTX line produced it. Read from `nvdisasm` (CUDA toolkit,
// present on the GPU workers; there is no library API for it) on the cubin: `-c -g` gives
// opcodes and source lines, `-c -gp` the PTX line of each instruction (from the
// .nv_debug_line_sass section that -lineinfo builds carry with the PTX text in
// .nv_debug_ptx_txt). CPU-only and unit-tested on real nvdisasm output of the H200 probe.
#ifndef PTXBENCH_WORKER_ENGINE_GPU_SASS_LISTING_H_
#define PTXBENCH_WORKER_ENGINE_GPU_SASS_LISTING_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ptxbench::gpu {

struct SassInstruction {
  uint32_t pc = 0;
  std::string text;    // "@P0 HGMMA.64x8x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT, gsb0"
  std::string opcode;  // "HGMMA" (no predicate, no modifiers).
  std::string file;    // From the nearest preceding "//## File" annotation, if any.
  int line = 0;
};

struct SassFunction {
  std::string name;
  std::vector<SassInstruction> instructions;
  const SassInstruction* AtPc(uint32_t pc) const;
};

// function name -> listing.
using SassListing = std::map<std::string, SassFunction>;

// Parses nvdisasm text output (with or without -g/-gp/-hex).
SassListing ParseNvdisasm(const std::string& text);

// The opcode of an instruction text without predicate or modifiers.
std::string SassOpcode(const std::string& instruction);

// $PTXBENCH_NVDISASM, else nvdisasm beside CUDA_HOME/bin or /usr/local/cuda/bin, else PATH;
// nullopt when none exists.
std::optional<std::string> FindNvdisasm();

// Runs nvdisasm with `flags` on `cubin_path` and returns its standard output.
absl::StatusOr<std::string> RunNvdisasm(const std::string& nvdisasm,
                                        const std::vector<std::string>& flags,
                                        const std::string& cubin_path, double timeout_seconds);

// The bytes of an ELF64 section by name (e.g. ".nv_debug_ptx_txt"); nullopt when absent or the
// image is not ELF64.
std::optional<std::string> ElfSection(const std::string& elf, const std::string& section);

}  // namespace ptxbench::gpu

#endif  // PTXBENCH_WORKER_ENGINE_GPU_SASS_LISTING_H_
