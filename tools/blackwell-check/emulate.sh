#!/usr/bin/env bash
# Executes the sm_100a solutions (the four attention tasks' and the GEMM's) on the CPU emulator
# (tools/blackwell-check/emulator) and compares them with a double-precision reference. No GPU involved: this checks the
# solutions' own indexing, descriptors, barrier protocol and tensor-memory lane rules against our
# reading of the PTX ISA, not the hardware (see emulator/emu_runtime.h for what it can and
# cannot tell).
#
# Usage: tools/blackwell-check/emulate.sh [TARGET ...] (default: all)
#        tools/blackwell-check/emulate.sh --mutants
# Targets: fwd, fwd_causal, bwd, bwd_causal, gemm (sm_100a, attention_emulation.cc and
# gemm_emulation.cc), fp8gemm and gqa (sm_90a, fp8_gemm_emulation.cc, gqa_decode_emulation.cc),
# fp8gemm100 (sm_100a, fp8_gemm_emulation.cc with FP8_SM100_SMEM_BYTES),
# gqa100 (sm_100a, gqa_decode_emulation.cc), h128fp8 and b128fp8 (sm_90a and sm_100a, the fp8
# attention forward, attention_fp8_fwd_emulation.cc; not in the default list: CI runs them as a
# test of their own), and the plan-driven attention-forward targets of
# every head dim on both arches (attention_fwd_emulation.cc, launch geometry from each
# solution's own PTXBENCH_PLAN):
# h64, h64_causal, h128, h128_causal, h256, h256_causal, h128_pingpong, h128_causal_pingpong
# (sm_90a: wgmma, TMA, mbarrier, named barriers, emu_hopper_primitives.h) and b64, b64_causal,
# b256, b256_causal (sm_100a; b128 runs the d128 solution through the plan-driven driver, a
# check of the driver against attention_emulation.cc);
# hgemm and hgemm_persistent (the GEMM's sm_90a solutions, plan-driven, hopper_gemm_emulation.cc)
# and, not in the default list, hgemm_packed and hgemm_packed_serial (the kernel-dev candidate
# tools/kernel-dev/candidates/gemm_persistent_packed_overlap.cu and its -DOVERLAP=0 build).
# Each target runs twice: MMAs executed at issue, and at the covering tcgen05.commit (sm_100a) or
# wgmma.wait_group (sm_90a).
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
  [fp8gemm]="tasks/gemm_fp8bs_n7168_k16384/solutions/sm90a_qgmma_tma.cu"
  [fp8gemm100]="tasks/gemm_fp8bs_n7168_k16384/solutions/sm100a_tcgen05_tma.cu"
  [gqa]="tasks/gqa_paged_decode_hq64_hk8_d128/solutions/sm90a_wgmma_tma.cu"
  [gqa100]="tasks/gqa_paged_decode_hq64_hk8_d128/solutions/sm100a_tcgen05_tma.cu"
  [h128fp8]="tasks/mha_fp8_with_lse_d128/solutions/sm90a_fp8_fa_wgmma_tma.cu"
  [b128fp8]="tasks/mha_fp8_with_lse_d128/solutions/sm100a_tcgen05_fp8_fwd.cu"
)
# Plan-driven forward targets: the solution; the head dim is the task's (mha_with_lse_d<D>).
declare -A forward_sources=(
  [h64]="tasks/mha_with_lse_d64/solutions/sm90a_fa_wgmma_tma.cu"
  [h64_causal]="tasks/mha_with_lse_d64_causal/solutions/sm90a_fa_wgmma_tma.cu"
  [h128]="tasks/mha_with_lse_d128/solutions/sm90a_fa_wgmma_tma.cu"
  [h128_causal]="tasks/mha_with_lse_d128_causal/solutions/sm90a_fa_wgmma_tma.cu"
  [h128_pingpong]="tasks/mha_with_lse_d128/solutions/sm90a_fa_pingpong.cu"
  [h128_causal_pingpong]="tasks/mha_with_lse_d128_causal/solutions/sm90a_fa_pingpong.cu"
  [h256]="tasks/mha_with_lse_d256/solutions/sm90a_fa_wgmma_tma.cu"
  [h256_causal]="tasks/mha_with_lse_d256_causal/solutions/sm90a_fa_wgmma_tma.cu"
  [b64]="tasks/mha_with_lse_d64/solutions/sm100a_tcgen05_fwd.cu"
  [b64_causal]="tasks/mha_with_lse_d64_causal/solutions/sm100a_tcgen05_fwd_causal.cu"
  [b128]="tasks/mha_with_lse_d128/solutions/sm100a_tcgen05_fwd.cu"
  [b256]="tasks/mha_with_lse_d256/solutions/sm100a_tcgen05_fwd.cu"
  [b256_causal]="tasks/mha_with_lse_d256_causal/solutions/sm100a_tcgen05_fwd_causal.cu"
)
# Plan-driven sm_90a GEMM targets (hopper_gemm_emulation.cc): the task's sm_90a sources with the
# signature gemm_kernel(tmA, tmB, tmC, M, N, K), and (not in the default list) the kernel-dev
# candidates of that form.
declare -A hopper_gemm_sources=(
  [hgemm]="tasks/gemm_n7168_k5120/solutions/sm90a_wgmma_tma.cu"
  [hgemm_persistent]="tasks/gemm_n7168_k5120/solutions/sm90a_wgmma_tma_persistent.cu"
  [hgemm_packed]="tools/kernel-dev/candidates/gemm_persistent_packed_overlap.cu"
  [hgemm_packed_serial]="tools/kernel-dev/candidates/gemm_persistent_packed_overlap.cu"
)
# Extra g++ defines per target (a candidate's other build).
declare -A hopper_gemm_defines=([hgemm_packed_serial]="-DOVERLAP=0")
# (M, N, K): 2 x 2 tiles of 4 k-steps (the 4-stage ring wraps across a CTA's tiles); ragged M
# and N with 5 k-steps; a partial last k-step (136 = 2 x 64 + 8); 3 x 3 tiles of one k-step
# each; partial boxes in all three (136 x 200 x 72).
hopper_gemm_workloads=("256 512 256" "200 264 320" "130 260 136" "384 768 64" "136 200 72")
# A persistent plan (its grid is min(132, tiles)) also runs on 1 and 3 CTAs, so that one CTA
# takes several tiles (with 132 CTAs every workload here is one tile per CTA).
build_hopper_gemm() {  # binary source-file(.cc in build_dir) target
  local define="${hopper_gemm_defines[${3}]:-}"
  # shellcheck disable=SC2086  # an empty define is no argument
  g++ -std=c++20 -O2 -pthread -Wall -Wno-unknown-pragmas -Wno-psabi \
    -Wno-deprecated-enum-enum-conversion -I"${build_dir}/sm90" -I"${build_dir}" -I"${emulator}" \
    ${define} "-DKERNEL_SOURCE=\"${2}\"" "${emulator}/hopper_gemm_emulation.cc" \
    -o "${build_dir}/${1}"
}
run_hopper_gemm() {  # binary source mode: status 1 on any failure
  local binary="$1" source="$2" mode="$3" w status=0 extra=""
  grep -q '"grid":\["min(132,' "${repo_root}/${source}" && extra="1 3"
  for w in "${hopper_gemm_workloads[@]}"; do
    read -r m n k <<<"${w}"
    local geometry
    geometry=$(python3 "${emulator}/plan_launch.py" "${repo_root}/${source}" "M=${m}" "N=${n}" "K=${k}")
    # shellcheck disable=SC2086  # the geometry and the grids are lists of numbers
    "${build_dir}/${binary}" "${mode}" "${m}" "${n}" "${k}" ${geometry} ${extra} || status=1
  done
  return "${status}"
}

# (B, H, S): one Q tile; three Q tiles (ring wrap-around, the causal diagonal at 0, 1, 2);
# two batches of two heads.
forward_workloads=("1 1 128" "1 2 384" "2 2 256")
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  targets=(fwd fwd_causal bwd bwd_causal gemm fp8gemm fp8gemm100 gqa gqa100 h64 h64_causal h128 h128_causal h256 h256_causal
           b64 b64_causal b256 b256_causal hgemm hgemm_persistent h128_pingpong h128_causal_pingpong)
fi

python3 "${emulator}/make_header.py" header \
  "${repo_root}/tasks/_shared/templates/ptxbench_blackwell.cuh" "${build_dir}/ptxbench_blackwell.cuh"
mkdir -p "${build_dir}/sm90"
python3 "${emulator}/make_header.py" header \
  "${repo_root}/tasks/_shared/templates/ptxbench_hopper.cuh" "${build_dir}/sm90/ptxbench_hopper.cuh" \
  emu_hopper_primitives.h

# The dynamic shared bytes of one launch of a source, from its own plan: plan_smem SOURCE
# [LAUNCH] (an index into the plan's launches, Python style: 0 the first, -1 the last).
plan_smem() {
  python3 -c 'import json, re, sys
plan = json.loads(re.search(r"/\*\s*PTXBENCH_PLAN(.*?)\*/", open(sys.argv[1]).read(), re.S).group(1))
print(int(plan["launches"][int(sys.argv[2])]["dynamic_shared_bytes"]))' "$1" "${2:-0}"
}

# Builds a plan-driven forward target: target source-file(.cc in build_dir) solution-path
# A ping-pong solution (its own bar.sync / bar.arrive turns, stripped by make_header.py kernel
# --strip-asm) gets FWD_PINGPONG, the driver's emulated turns.
build_forward() {
  local target="$1" kernel="$2" solution="$3" arch_define="-DATTN_SM100" include="${build_dir}"
  local pingpong="-DFWD_PLAIN"
  if grep -q '#include "ptxbench_hopper.cuh"' "${repo_root}/${solution}"; then
    arch_define="-DATTN_SM90"
    include="${build_dir}/sm90"
  fi
  grep -q 'bar.arrive' "${repo_root}/${solution}" && pingpong="-DFWD_PINGPONG"
  g++ -std=c++20 -O2 -pthread -Wall -Wno-unknown-pragmas -Wno-psabi \
    -Wno-deprecated-enum-enum-conversion -I"${include}" -I"${build_dir}" -I"${emulator}" \
    "${arch_define}" "${pingpong}" "-DKERNEL_SOURCE=\"${kernel}\"" \
    "${emulator}/attention_fwd_emulation.cc" -o "${build_dir}/${target}"
}
# make_header.py kernel SOURCE OUT, with --strip-asm for a ping-pong solution (its turns are
# emulated by the forward driver).
make_kernel() {
  local strip=()
  grep -q 'bar.arrive' "$1" && strip=(--strip-asm)
  python3 "${emulator}/make_header.py" kernel "$1" "$2" "${strip[@]}"
}

# Runs a built forward target on every forward workload in one mode; status 1 on any failure.
run_forward() {
  local target="$1" solution="$2" mode="$3" d w status=0
  d=$(sed -E 's|.*mha_with_lse_d([0-9]+).*|\1|' <<<"${solution}")
  for w in "${forward_workloads[@]}"; do
    read -r b h s <<<"${w}"
    local geometry
    geometry=$(python3 "${emulator}/plan_launch.py" "${repo_root}/${solution}" \
      "B=${b}" "H=${h}" "S=${s}" "D=${d}")
    # shellcheck disable=SC2086  # the geometry is a list of numbers
    "${build_dir}/${target}" "${mode}" "${b}" "${h}" "${s}" "${d}" ${geometry} || status=1
  done
  return "${status}"
}

# The fp8 attention forward (sm_90a, attention_fp8_fwd_emulation.cc): the source's own
# inline-PTX wrappers (RS e4m3 wgmma, e4m3 packing) are stripped and emulated by the driver; the
# dynamic shared size is the plan's second launch's. build_fp8_forward BINARY SOURCE
build_fp8_forward() {
  local binary="$1" source="$2" smem arch_define="-DATTN_SM90" include="${build_dir}/sm90"
  if grep -q '#include "ptxbench_blackwell.cuh"' "${repo_root}/${source}"; then
    arch_define="-DATTN_SM100"
    include="${build_dir}"
  fi
  python3 "${emulator}/make_header.py" kernel "${repo_root}/${source}" "${build_dir}/${binary}.cc" \
    --strip-asm
  smem=$(plan_smem "${repo_root}/${source}" -1)
  g++ -std=c++20 -O2 -pthread -Wall -Wno-unknown-pragmas -Wno-psabi \
    -Wno-deprecated-enum-enum-conversion -I"${include}" -I"${build_dir}" -I"${emulator}" \
    "${arch_define}" "-DFP8_FWD_SMEM_BYTES=${smem}" "-DKERNEL_SOURCE=\"${binary}.cc\"" \
    "${emulator}/attention_fp8_fwd_emulation.cc" -o "${build_dir}/${binary}"
}
# (B, H, S) and the three descales (q, k, v): logits of O(1) (descales ~1), the ring of 6 stages
# wrapping (S = 896: 7 key blocks), the block_scale range (2^-10..1.875 * 2^-4, whose logits are
# ~0: nearly uniform attention), and the fp8_normal / tensor_descale inputs (x64: e4m3 of
# N(0, 64^2), descales (1 + m/8) 2^-6).
fp8_forward_workloads=("1 1 128 1.0 0.75 0.015625" "1 2 384 1.25 1.5 0.0234375"
                       "2 2 256 0.875 1.125 0.0625" "1 1 896 1.5 1.25 0.01171875"
                       "1 2 256 0.0625 0.1171875 0.0078125"
                       "1 2 256 0.0234375 0.02734375 0.017578125 x64")
# The decoys run on three of them (three tiles of two heads; the block_scale range; the
# fp8_normal inputs), which is where each is caught or must pass.
fp8_decoy_workloads=("${fp8_forward_workloads[1]}" "${fp8_forward_workloads[4]}"
                     "${fp8_forward_workloads[5]}")
# run_fp8_forward BINARY MODE [model|decoy]: status 1 on any failure.
run_fp8_forward() {
  local binary="$1" mode="$2" model="${3:-}" w status=0
  local workloads=("${fp8_forward_workloads[@]}")
  if [[ "${model}" == decoy ]]; then
    workloads=("${fp8_decoy_workloads[@]}")
    model=""
  fi
  for w in "${workloads[@]}"; do
    # shellcheck disable=SC2086  # the workload is a list of numbers
    "${build_dir}/${binary}" "${mode}" ${w} ${model} || status=1
  done
  return "${status}"
}

build_target() {  # target [mutated source file [extra define]]
  local target="$1"
  local mode_define="-DATTN_FWD"
  local driver="${emulator}/attention_emulation.cc"
  local include="${build_dir}"
  [[ "${target}" == bwd* ]] && mode_define="-DATTN_BWD"
  [[ "${target}" == gemm ]] && driver="${emulator}/gemm_emulation.cc"
  if [[ "${target}" == fp8gemm ]]; then
    driver="${emulator}/fp8_gemm_emulation.cc"
    include="${build_dir}/sm90"
    mode_define="${3:--DFP8_SOLUTION}"
  fi
  if [[ "${target}" == fp8gemm100 ]]; then
    driver="${emulator}/fp8_gemm_emulation.cc"
    mode_define="-DFP8_SM100_SMEM_BYTES=$(plan_smem "${repo_root}/${sources[${target}]}")"
  fi
  if [[ "${target}" == gqa || "${target}" == gqa100 ]]; then
    driver="${emulator}/gqa_decode_emulation.cc"
    [[ "${target}" == gqa ]] && include="${build_dir}/sm90"
    # The split kernel's dynamic shared bytes: the solution's own plan (a constant there).
    mode_define="-DGQA_SPLIT_SMEM_BYTES=$(plan_smem "${repo_root}/${sources[${target}]}")"
  fi
  g++ -std=c++20 -O2 -pthread -Wall -Wno-unknown-pragmas -Wno-psabi \
    -Wno-deprecated-enum-enum-conversion -I"${include}" -I"${build_dir}" \
    -I"${emulator}" "${mode_define}" "-DKERNEL_SOURCE=\"${2:-${target}.cc}\"" \
    "${driver}" -o "${build_dir}/${target}"
}

# target|mode|original text|replacement|what the mutant breaks  (no field may contain "|"); mode
# eager or lazy: the schedule under which the mutant must fail (a lazy mutant is one that only
# the latest legal execution of the MMAs exposes).
mutants=(
  "fwd|eager|/*b_mn_major=*/true);|/*b_mn_major=*/false);|V read as K-major in O += P V"
  "fwd|eager|unsigned char* smem = dynamic_smem + ((1024u - misalignment) & 1023u);|unsigned char* smem = dynamic_smem;|tiles not realigned to 1024 bytes"
  "fwd_causal|eager|if (static_cast<u32>(c) > row) s[c] = -__int_as_float(0x7f800000);||diagonal block not masked"
  "bwd|eager|mnmajor_desc(dst_addr, k), mnmajor_desc(k_addr, k)|kmajor_desc(dst_addr, k), mnmajor_desc(k_addr, k)|dS^T given a K-major descriptor in dQ = dS K"
  "bwd|eager|const u32 lane_field = static_cast<u32>(warp * 32) << 16;|const u32 lane_field = 0;|every warp reads tensor-memory lanes 0..31"
  "bwd|eager|ds[h] = p[h] * (__uint_as_float(dp_bits[e + h]) - delta_s[q]);|ds[h] = p[h] * __uint_as_float(dp_bits[e + h]);|Delta not subtracted"
  "gemm|eager|make_smem_desc_kmajor_sw128(b_addr + k * kMmaK * 2)|make_smem_desc_kmajor_sw128(b_addr)|B descriptor not advanced along K"
  "h128|eager|sm90::wgmma_m64n128k16_rs_bf16_t<1>(|sm90::wgmma_m64n128k16_rs_bf16_t<0>(|sm_90a: V read as K-major in O += P V"
  "h256|eager|sm90::make_smem_desc_sw128_mn(v_base + t * 2048, kKVBoxBytes)|sm90::make_smem_desc_sw128_mn(v_base + t * 2048, kQBoxBytes)|sm_90a d256: V's 64-column boxes taken 128 rows apart (LBO)"
  "h256|eager|const u32 k_offset = (kk / 4) * kKVBoxBytes + (kk % 4) * 32;|const u32 k_offset = (kk / 4) * kQBoxBytes + (kk % 4) * 32;|sm_90a d256: K's boxes taken 128 rows apart in S = Q K^T"
  "h64|lazy|      sm90::wgmma_wait_group<1>();|      sm90::wgmma_wait_group<2>();|sm_90a: softmax reads S before its wgmma group completed"
  "b256|eager|bw::make_smem_desc_mnmajor_sw128(v_addr + k * kMmaK * 128, kKVBoxBytes)|bw::make_smem_desc_mnmajor_sw128(v_addr + k * kMmaK * 128, kBoxBytes)|sm_100a d256: V's 64-column boxes taken 128 rows apart (LBO)"
  "b256_causal|eager|if (kCausal && j >= num_kv_blocks - kDiagonalBlocks) {|if (kCausal && j == num_kv_blocks - 1) {|sm_100a d256: only the last key block masked"
  "gqa|eager|sm90::wgmma_m64n8k16_ss_bf16_t<1, 0>(|sm90::wgmma_m64n8k16_ss_bf16_t<0, 0>(|sm_90a decode: V read as K-major in O^T += V^T P^T"
  "gqa|eager|const u32 q_offset = (kk / 4) * kQBoxBytes + (kk % 4) * 32;|const u32 q_offset = (kk % 4) * 32;|sm_90a decode: Q's second 64-d box never read"
  "gqa100|eager|/*accum_f32=*/true, /*a_mn_major=*/true,|/*accum_f32=*/true, /*a_mn_major=*/false,|sm_100a decode: V read as K-major in O^T = V^T P^T"
  "gqa100|eager|bw::make_smem_desc_mnmajor_sw128(v_addr + kk * 2048, kPairHalfBytes)|bw::make_smem_desc_mnmajor_sw128(v_addr + kk * 2048, kPageBoxBytes)|sm_100a decode: V's d halves taken one page box apart (LBO)"
  "gqa100|eager|const u32 offset = (kk / 4) * kPairHalfBytes + (kk % 4) * 32;|const u32 offset = (kk / 4) * kPageBoxBytes + (kk % 4) * 32;|sm_100a decode: K's d 64-127 taken from the pair's second page"
  "gqa100|eager|const u32 q_offset = (kk / 4) * kHalf16Bytes + (kk % 4) * 32;|const u32 q_offset = (kk % 4) * 32;|sm_100a decode: Q's second 64-d box never read"
  "gqa100|eager|const bool valid = (first + 2 * i) * kPageSize + row < length;|const bool valid = (first + 2 * i) * kPageSize + row % 64 < length;|sm_100a decode: a pair's second page masked as its first (the repeated page of an odd pair attended)"
  "hgemm_persistent|eager|      for (int i = 0; i < 128; ++i) acc[i] = 0.0f;||sm_90a GEMM: accumulators not zeroed per tile (caught only where one CTA takes several tiles)"
  "hgemm_packed|eager|                                   (first && kk == 0) ? 0 : 1);|                                   1);|sm_90a GEMM candidate: a tile's first wgmma accumulates onto the previous tile"
  "hgemm_packed|lazy|  sm90::wgmma_wait_group<0>();|  sm90::wgmma_wait_group<1>();|sm_90a GEMM candidate: a tile packed with its last k-step's group still pending"
  "fp8gemm100|eager|                             static_cast<u32>(buffer) * kPartialColumns + static_cast<u32>(c)),|                             static_cast<u32>(c)),|sm_100a fp8 GEMM: the promotion reads partial 0 for every K block"
  "fp8gemm100|eager|      const float scale = sa * sb_row[kb];|      const float scale = sa * sb_row[0];|sm_100a fp8 GEMM: every K block promoted with the first block's SB"
  "h64_causal|eager|const int q0 = q_tile * kBlockM;|const int q0 = q_tile * kBlockM + 0 * kDiagonalBlocks;\n  const int unused_q0 = 0;|sm_90a: (control: a no-op edit must SURVIVE)"
)

# Plan-driven forward decoys whose verdict is wrong_result: the emulator must fail them too.
forward_decoys=(
  "h64|tasks/mha_with_lse_d64/decoys/scale_from_d128.cu"
  "h64_causal|tasks/mha_with_lse_d64_causal/decoys/scale_from_d128.cu"
  "h256_causal|tasks/mha_with_lse_d256_causal/decoys/scale_from_d128.cu"
  "h256|tasks/mha_with_lse_d256/decoys/scale_from_d128.cu"
  "h256|tasks/mha_with_lse_d256/decoys/o_first_128_columns.cu"
  "h256_causal|tasks/mha_with_lse_d256_causal/decoys/mask_last_block_only.cu"
)

# The fp8 block-scaled GEMM's decoys that the emulator can run: source|define of the driver.
fp8_decoys=(
  "tasks/gemm_fp8bs_n7168_k16384/decoys/per_tensor_scale.cu|-DKERNEL_SIGNATURE_WITH_SA"
  "tasks/gemm_fp8bs_n7168_k16384/decoys/sb_indexed_by_n.cu|-DFP8_DECOY"
  "tasks/gemm_fp8bs_n7168_k16384/decoys/no_promotion.cu|-DKERNEL_SIGNATURE_WITH_SA"
)

# The paged decode's wrong_result decoys that the emulator can run (wrong_kv_head's rank-4 TMA is
# its own inline PTX, not emulated).
gqa_decoys=(
  "tasks/gqa_paged_decode_hq64_hk8_d128/decoys/contiguous_pages.cu"
  "tasks/gqa_paged_decode_hq64_hk8_d128/decoys/reads_past_length.cu"
)

# --fp8-attention-decoys: the fp8 attention forward's own mutants (must fail the emulator) and the
# task's decoys (tools/attention-dev/fp8_fwd_gen_decoys.py --list: each wrong_result one must fail
# at least one workload, each other one must pass every workload, its verdict being the GPU's
# target check). p_e5m2's e5m2 conversion and wgmma are its own PTX, not emulated.
fp8_mutants=(
  "  return 16 * (k / 16) + 8 * (e / 2) + 2 * c + e % 2;|  return k;|V^T packed in the natural key order (P's fragment order not matched)"
  "                            vt_head + static_cast<long long>(j) * kTileBytes, kTileBytes,|                            vt_head, kTileBytes,|every stage reads the head's first V^T tile"
  "    const float out_scale = *descale_v;|    const float out_scale = *descale_v * 1.0f;|(control: a no-op edit must SURVIVE)"
)
if [[ "${targets[0]:-}" == "--fp8-attention-decoys" ]]; then
  status=0
  caught=0
  index=0
  for mutant in "${fp8_mutants[@]}"; do
    IFS='|' read -r original replacement what <<<"${mutant}"
    index=$((index + 1))
    mutated="${build_dir}/fp8mutant${index}.cu"
    ORIGINAL="${original}" REPLACEMENT="${replacement}" SRC="${repo_root}/${sources[h128fp8]}" \
      OUT="${mutated}" python3 -c 'import os; s=open(os.environ["SRC"]).read(); o=os.environ["ORIGINAL"]
assert s.count(o) == 1, "mutant text not found exactly once: " + o
open(os.environ["OUT"], "w").write(s.replace(o, os.environ["REPLACEMENT"]))'
    # build_fp8_forward takes paths relative to the repository: hand it the absolute one.
    if ! repo_root="" build_fp8_forward "fp8mutant${index}" "${mutated}" \
      2>"${build_dir}/fp8mutant${index}.build.log"; then
      echo "MUTANT DID NOT BUILD: ${what}"
      status=1
      continue
    fi
    if run_fp8_forward "fp8mutant${index}" eager model >"${build_dir}/fp8mutant${index}.log" 2>&1; then
      if [[ "${what}" == *"must SURVIVE"* ]]; then
        echo "control survived, as it must: h128fp8: ${what}"
      else
        echo "MUTANT SURVIVED (the emulator missed it): h128fp8: ${what}"
        status=1
      fi
    elif [[ "${what}" == *"must SURVIVE"* ]]; then
      echo "CONTROL FAILED (the emulator rejects a correct kernel): h128fp8: ${what}"
      status=1
    else
      caught=$((caught + 1))
      echo "mutant caught: h128fp8: ${what}: $(grep -m1 FAIL "${build_dir}/fp8mutant${index}.log" | sed 's/^ *//')"
    fi
  done
  while read -r decoy expect; do
    [[ "${decoy}" == p_e5m2.cu ]] && continue
    index=$((index + 1))
    path="tasks/mha_fp8_with_lse_d128/decoys/${decoy}"
    if ! build_fp8_forward "fp8decoy${index}" "${path}" 2>"${build_dir}/fp8decoy${index}.build.log"; then
      echo "DECOY DID NOT BUILD: ${path}"
      status=1
      continue
    fi
    run_fp8_forward "fp8decoy${index}" eager decoy >"${build_dir}/fp8decoy${index}.log" 2>&1 &&
      passed=yes || passed=no
    summary=$(grep "summary" "${build_dir}/fp8decoy${index}.log" | sed 's/^ *summary //' | paste -sd';')
    if [[ "${expect}" == wrong_result ]]; then
      if [[ "${passed}" == yes ]]; then
        echo "DECOY PASSED the emulator (expected wrong_result): ${path}"
        status=1
      else
        caught=$((caught + 1))
        echo "decoy caught: ${path}: ${summary}"
      fi
    elif [[ "${passed}" == yes ]]; then
      echo "decoy passes the emulator, as it must (its verdict ${expect} is the GPU's): ${path}"
    else
      echo "DECOY FAILED the emulator (its output must be right): ${path}: ${summary}"
      status=1
    fi
  done < <(python3 "${repo_root}/tools/attention-dev/fp8_fwd_gen_decoys.py" --list)
  echo "${caught} fp8 attention mutants and wrong_result decoys caught"
  exit "${status}"
fi

if [[ "${targets[0]:-}" == "--mutants" ]]; then
  status=0
  index=0
  caught=0
  for mutant in "${mutants[@]}"; do
    IFS='|' read -r target mode original replacement what <<<"${mutant}"
    index=$((index + 1))
    solution="${forward_sources[${target}]:-${hopper_gemm_sources[${target}]:-${sources[${target}]:-}}}"
    make_kernel "${repo_root}/${solution}" "${build_dir}/mutant${index}.cc"
    ORIGINAL="${original}" REPLACEMENT="${replacement}" FILE="${build_dir}/mutant${index}.cc" \
      python3 -c 'import os; p=os.environ["FILE"]; s=open(p).read(); o=os.environ["ORIGINAL"]
assert s.count(o) == 1, "mutant text not found exactly once: " + o
open(p, "w").write(s.replace(o, os.environ["REPLACEMENT"].replace("\\n", "\n")))'
    if [[ -n "${hopper_gemm_sources[${target}]:-}" ]]; then
      built=$(build_hopper_gemm "mutant${index}" "mutant${index}.cc" "${target}" \
        2>"${build_dir}/mutant${index}.build.log" && echo yes || echo no)
      run=(run_hopper_gemm "mutant${index}" "${solution}" "${mode}")
    elif [[ -n "${forward_sources[${target}]:-}" ]]; then
      built=$(build_forward "mutant${index}" "mutant${index}.cc" "${solution}" \
        2>"${build_dir}/mutant${index}.build.log" && echo yes || echo no)
      run=(run_forward "mutant${index}" "${solution}" "${mode}")
    else
      built=$(build_target "${target}" "mutant${index}.cc" 2>"${build_dir}/mutant${index}.build.log" \
        && echo yes || echo no)
      # An inner shell (two commands, so it cannot exec) reports an abort into the log.
      run=(bash -c '"$0" "$1"; exit $?' "${build_dir}/${target}" "${mode}")
    fi
    if [[ "${built}" != yes ]]; then
      echo "MUTANT DID NOT BUILD: ${target}: ${what} (${build_dir}/mutant${index}.build.log)"
      status=1
      continue
    fi
    control=$([[ "${what}" == *"must SURVIVE"* ]] && echo yes || echo no)
    if "${run[@]}" >"${build_dir}/mutant${index}.log" 2>&1; then
      if [[ "${control}" == yes ]]; then
        echo "control survived, as it must: ${target}: ${what}"
      else
        echo "MUTANT SURVIVED (the emulator missed it): ${target}: ${what}"
        status=1
      fi
    elif [[ "${control}" == yes ]]; then
      echo "CONTROL FAILED (the emulator rejects a correct kernel): ${target}: ${what}"
      status=1
    else
      caught=$((caught + 1))
      echo "mutant caught (${mode}): ${target}: ${what}: $(grep -m1 -E 'FAIL|EMULATION ERROR' \
        "${build_dir}/mutant${index}.log" | sed 's/^ *//')"
    fi
  done
  for entry in "${forward_decoys[@]}"; do
    IFS='|' read -r target decoy <<<"${entry}"
    index=$((index + 1))
    python3 "${emulator}/make_header.py" kernel "${repo_root}/${decoy}" "${build_dir}/decoy${index}.cc"
    if ! build_forward "decoy${index}" "decoy${index}.cc" "${decoy}" \
      2>"${build_dir}/decoy${index}.build.log"; then
      echo "DECOY DID NOT BUILD: ${decoy}"
      status=1
    elif run_forward "decoy${index}" "${decoy}" eager >"${build_dir}/decoy${index}.log" 2>&1; then
      echo "DECOY PASSED the emulator (expected wrong_result): ${decoy}"
      status=1
    else
      caught=$((caught + 1))
      echo "decoy caught: ${decoy}: $(grep -m1 -E 'FAIL|EMULATION ERROR' \
        "${build_dir}/decoy${index}.log" | sed 's/^ *//')"
    fi
  done
  # The fp8 GEMM's wrong_result decoys built from the solution with the header's primitives only
  # (e5m2_read_as_e4m3 and mma_sync_bf16 carry their own inline PTX, which is not emulated).
  for entry in "${fp8_decoys[@]}"; do
    IFS='|' read -r decoy define <<<"${entry}"
    index=$((index + 1))
    python3 "${emulator}/make_header.py" kernel "${repo_root}/${decoy}" "${build_dir}/decoy${index}.cc"
    if ! build_target fp8gemm "decoy${index}.cc" "${define}" \
      2>"${build_dir}/decoy${index}.build.log"; then
      echo "DECOY DID NOT BUILD: ${decoy}"
      status=1
    elif "${build_dir}/fp8gemm" eager >"${build_dir}/decoy${index}.log" 2>&1; then
      echo "DECOY PASSED the emulator (expected wrong_result): ${decoy}"
      status=1
    else
      caught=$((caught + 1))
      echo "decoy caught: ${decoy}: $(grep -m1 -E 'FAIL|EMULATION ERROR' \
        "${build_dir}/decoy${index}.log" | sed 's/^ *//')"
    fi
  done
  for decoy in "${gqa_decoys[@]}"; do
    index=$((index + 1))
    python3 "${emulator}/make_header.py" kernel "${repo_root}/${decoy}" "${build_dir}/decoy${index}.cc"
    if ! build_target gqa "decoy${index}.cc" 2>"${build_dir}/decoy${index}.build.log"; then
      echo "DECOY DID NOT BUILD: ${decoy}"
      status=1
    elif "${build_dir}/gqa" eager >"${build_dir}/decoy${index}.log" 2>&1; then
      echo "DECOY PASSED the emulator (expected wrong_result): ${decoy}"
      status=1
    else
      caught=$((caught + 1))
      echo "decoy caught: ${decoy}: $(grep -m1 -E 'FAIL|EMULATION ERROR' \
        "${build_dir}/decoy${index}.log" | sed 's/^ *//')"
    fi
  done
  echo "${caught} of $((index - 1)) mutants and decoys caught (one control kept)"
  exit "${status}"
fi

status=0
for target in "${targets[@]}"; do
  if [[ "${target}" == h128fp8 || "${target}" == b128fp8 ]]; then
    build_fp8_forward "${target}" "${sources[${target}]}"
    for mode in eager lazy; do
      run_fp8_forward "${target}" "${mode}" model || status=1
    done
    continue
  fi
  if [[ -n "${hopper_gemm_sources[${target}]:-}" ]]; then
    solution="${hopper_gemm_sources[${target}]}"
    python3 "${emulator}/make_header.py" kernel "${repo_root}/${solution}" "${build_dir}/${target}.cc"
    build_hopper_gemm "${target}" "${target}.cc" "${target}"
    for mode in eager lazy; do
      run_hopper_gemm "${target}" "${solution}" "${mode}" || status=1
    done
    continue
  fi
  if [[ -n "${forward_sources[${target}]:-}" ]]; then
    solution="${forward_sources[${target}]}"
    make_kernel "${repo_root}/${solution}" "${build_dir}/${target}.cc"
    build_forward "${target}" "${target}.cc" "${solution}"
    for mode in eager lazy; do
      run_forward "${target}" "${solution}" "${mode}" || status=1
    done
    continue
  fi
  source="${sources[${target}]:-}"
  if [[ -z "${source}" ]]; then
    echo "unknown target ${target} (fwd, fwd_causal, bwd, bwd_causal, gemm, fp8gemm, fp8gemm100, gqa, gqa100, h128fp8, b128fp8, h64, h64_causal," \
      "h128, h128_causal, h128_pingpong, h128_causal_pingpong, h256, h256_causal, b64, b64_causal," \
      "b128, b256, b256_causal, hgemm," \
      "hgemm_persistent, hgemm_packed, hgemm_packed_serial)" >&2
    exit 2
  fi
  python3 "${emulator}/make_header.py" kernel "${repo_root}/${source}" "${build_dir}/${target}.cc"
  build_target "${target}"
  for mode in eager lazy; do
    "${build_dir}/${target}" "${mode}" || status=1
  done
done
exit "${status}"
