#!/usr/bin/env bash
# Executes the sm_100a solutions (the four attention tasks' and the GEMM's) on the CPU emulator
# (tools/blackwell-check/emulator) and compares them with a double-precision reference. No GPU involved: this checks the
# solutions' own indexing, descriptors, barrier protocol and tensor-memory lane rules against our
# reading of the PTX ISA, not the hardware (see emulator/emu_runtime.h for what it can and
# cannot tell).
#
# Usage: tools/blackwell-check/emulate.sh [fwd|fwd_causal|bwd|bwd_causal|gemm ...] (default: all)
#        tools/blackwell-check/emulate.sh --mutants
# Each target runs twice: MMAs executed at issue, and at the covering tcgen05.commit.
# --mutants checks the checker: each of a few deliberately broken copies of the solutions (wrong
# operand major-ness, dropped causal mask, dropped Delta, misaligned tiles, a warp reading
# another warp's tensor-memory lanes, a descriptor not advanced along K) must FAIL.
# Exit status: 0 when every run passed (every mutant failed).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
emulator="${repo_root}/tools/blackwell-check/emulator"
build_dir="${PTXBENCH_CHECK_BUILD_DIR:-${TMPDIR:-/tmp}/ptxbench-blackwell-check}/emulator"
mkdir -p "${build_dir}"

declare -A sources=(
  [fwd]="tasks/mha_with_lse_d128/solutions/sm100a_tcgen05_fwd.cu"
  [fwd_causal]="tasks/mha_with_lse_d128_causal/solutions/sm100a_tcgen05_fwd_causal.cu"
  [bwd]="tasks/mha_bwd_d128/solutions/sm100a_tcgen05_bwd.cu"
  [bwd_causal]="tasks/mha_bwd_d128_causal/solutions/sm100a_tcgen05_bwd_causal.cu"
  [gemm]="tasks/gemm_n7168_k5120/solutions/sm100a_tcgen05_tma.cu"
)
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  targets=(fwd fwd_causal bwd bwd_causal gemm)
fi

python3 "${emulator}/make_header.py" header \
  "${repo_root}/tasks/_shared/templates/ptxbench_blackwell.cuh" "${build_dir}/ptxbench_blackwell.cuh"

build_target() {  # target [mutated source file]
  local target="$1"
  local mode_define="-DATTN_FWD"
  local driver="${emulator}/attention_emulation.cc"
  [[ "${target}" == bwd* ]] && mode_define="-DATTN_BWD"
  [[ "${target}" == gemm ]] && driver="${emulator}/gemm_emulation.cc"
  g++ -std=c++20 -O2 -pthread -Wall -Wno-unknown-pragmas -Wno-psabi \
    -Wno-deprecated-enum-enum-conversion -I"${build_dir}" \
    -I"${emulator}" "${mode_define}" "-DKERNEL_SOURCE=\"${2:-${target}.cc}\"" \
    "${driver}" -o "${build_dir}/${target}"
}

# target|original text|replacement|what the mutant breaks  (no field may contain "|")
mutants=(
  "fwd|/*b_mn_major=*/true);|/*b_mn_major=*/false);|V read as K-major in O += P V"
  "fwd|unsigned char* smem = dynamic_smem + ((1024u - misalignment) & 1023u);|unsigned char* smem = dynamic_smem;|tiles not realigned to 1024 bytes"
  "fwd_causal|if (static_cast<u32>(c) > row) s[c] = -__int_as_float(0x7f800000);||diagonal block not masked"
  "bwd|mnmajor_desc(dst_addr, k), mnmajor_desc(k_addr, k)|kmajor_desc(dst_addr, k), mnmajor_desc(k_addr, k)|dS^T given a K-major descriptor in dQ = dS K"
  "bwd|const u32 lane_field = static_cast<u32>(warp * 32) << 16;|const u32 lane_field = 0;|every warp reads tensor-memory lanes 0..31"
  "bwd|ds[h] = p[h] * (__uint_as_float(dp_bits[e + h]) - delta_s[q]);|ds[h] = p[h] * __uint_as_float(dp_bits[e + h]);|Delta not subtracted"
  "gemm|make_smem_desc_kmajor_sw128(b_addr + k * kMmaK * 2)|make_smem_desc_kmajor_sw128(b_addr)|B descriptor not advanced along K"
)

if [[ "${targets[0]:-}" == "--mutants" ]]; then
  status=0
  index=0
  caught=0
  for mutant in "${mutants[@]}"; do
    IFS='|' read -r target original replacement what <<<"${mutant}"
    index=$((index + 1))
    python3 "${emulator}/make_header.py" kernel "${repo_root}/${sources[${target}]}" \
      "${build_dir}/mutant${index}.cc"
    ORIGINAL="${original}" REPLACEMENT="${replacement}" FILE="${build_dir}/mutant${index}.cc" \
      python3 -c 'import os; p=os.environ["FILE"]; s=open(p).read(); o=os.environ["ORIGINAL"]
assert s.count(o) == 1, "mutant text not found exactly once: " + o
open(p, "w").write(s.replace(o, os.environ["REPLACEMENT"]))'
    if ! build_target "${target}" "mutant${index}.cc" 2>"${build_dir}/mutant${index}.build.log"; then
      echo "MUTANT DID NOT BUILD: ${target}: ${what} (${build_dir}/mutant${index}.build.log)"
      status=1
      continue
    fi
    # An inner shell (two commands, so it cannot exec) reports an abort into the log.
    if bash -c '"$0" eager; exit $?' "${build_dir}/${target}" >"${build_dir}/mutant${index}.log" \
      2>&1; then
      echo "MUTANT SURVIVED (the emulator missed it): ${target}: ${what}"
      status=1
    else
      caught=$((caught + 1))
      echo "mutant caught: ${target}: ${what}: $(grep -m1 -E 'FAIL|EMULATION ERROR' \
        "${build_dir}/mutant${index}.log" | sed 's/^ *//')"
    fi
  done
  echo "${caught} of ${index} mutants caught"
  exit "${status}"
fi

status=0
for target in "${targets[@]}"; do
  source="${sources[${target}]:-}"
  if [[ -z "${source}" ]]; then
    echo "unknown target ${target} (fwd, fwd_causal, bwd, bwd_causal, gemm)" >&2
    exit 2
  fi
  python3 "${emulator}/make_header.py" kernel "${repo_root}/${source}" "${build_dir}/${target}.cc"
  build_target "${target}"
  for mode in eager lazy; do
    "${build_dir}/${target}" "${mode}" || status=1
  done
done
exit "${status}"
