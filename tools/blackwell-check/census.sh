#!/usr/bin/env bash
# SASS census of the sm_100a solutions: which target-family opcodes (UTC*MMA, LDTM/STTM,
# UTMALDG/UTMASTG/UTMAREDG, plus the uncredited UTCBAR/UTCATOMSWS) each compiled file contains.
#
# Two steps, because the machine that compiles (NVRTC, ptxas) is not always one with a CUDA 13
# disassembler: the development machines have no cuobjdump/nvdisasm, the lent H200 has both.
#
#   census.sh compile [OUT_DIR]   NVRTC -> PTX (as the worker compiles) -> ptxas -arch=sm_100a ->
#                                 OUT_DIR/<name>.cubin for every solution below; checks that each
#                                 causal/non-causal pair differs only in its kCausal line.
#                                 Default OUT_DIR: $PTXBENCH_CHECK_BUILD_DIR/census.
#   census.sh sass [OUT_DIR]      Disassembles every OUT_DIR/*.cubin (cuobjdump -sass, else
#                                 nvdisasm) and prints one line per file with the opcode counts;
#                                 exits 1 if a file lacks an opcode of a family its task credits
#                                 for sm_100a (tcgen05_mma, tcgen05_tmem, tma).
#   census.sh                     Both, when a disassembler is present; otherwise compile only,
#                                 and says so (exit 3).
#
# To take the census on the lent H200 (nothing there needs NVRTC): run `census.sh compile
# .dev-<you>/census` here, then carry that folder and run
# `tools/blackwell-check/census.sh sass .dev-<you>/census` there.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cuda="${CUDA_HOME:-/usr/local/cuda}"
build_dir="${PTXBENCH_CHECK_BUILD_DIR:-${TMPDIR:-/tmp}/ptxbench-blackwell-check}"
header="${repo_root}/tasks/_shared/templates/ptxbench_blackwell.cuh"

# name|source (relative to the repository root)
solutions=(
  "gemm_n7168_k5120.sm100a_tcgen05_tma|tasks/gemm_n7168_k5120/solutions/sm100a_tcgen05_tma.cu"
  "mha_with_lse_d128.sm100a_tcgen05_fwd|tasks/mha_with_lse_d128/solutions/sm100a_tcgen05_fwd.cu"
  "mha_with_lse_d128_causal.sm100a_tcgen05_fwd_causal|tasks/mha_with_lse_d128_causal/solutions/sm100a_tcgen05_fwd_causal.cu"
  "mha_bwd_d128.sm100a_tcgen05_bwd|tasks/mha_bwd_d128/solutions/sm100a_tcgen05_bwd.cu"
  "mha_bwd_d128_causal.sm100a_tcgen05_bwd_causal|tasks/mha_bwd_d128_causal/solutions/sm100a_tcgen05_bwd_causal.cu"
  "gqa_paged_decode_hq64_hk8_d128.sm100a_tcgen05_tma|tasks/gqa_paged_decode_hq64_hk8_d128/solutions/sm100a_tcgen05_tma.cu"
)
# Causal copies that must equal their non-causal original except for `kCausal = 0` -> `= 1`.
pairs=(
  "tasks/mha_with_lse_d128/solutions/sm100a_tcgen05_fwd.cu|tasks/mha_with_lse_d128_causal/solutions/sm100a_tcgen05_fwd_causal.cu"
  "tasks/mha_bwd_d128/solutions/sm100a_tcgen05_bwd.cu|tasks/mha_bwd_d128_causal/solutions/sm100a_tcgen05_bwd_causal.cu"
)

find_disassembler() {
  if [[ -x "${cuda}/bin/cuobjdump" ]]; then
    echo "${cuda}/bin/cuobjdump -sass"
  elif [[ -x "${cuda}/bin/nvdisasm" ]]; then
    echo "${cuda}/bin/nvdisasm"
  fi
}

compile_all() {
  local out_dir="$1"
  mkdir -p "${out_dir}"
  local status=0
  for pair in "${pairs[@]}"; do
    local plain="${repo_root}/${pair%%|*}"
    local causal="${repo_root}/${pair##*|}"
    if ! sed 's/^  kCausal = 0,$/  kCausal = 1,/' "${plain}" | cmp -s - "${causal}"; then
      echo "PAIR MISMATCH: ${pair##*|} is not ${pair%%|*} with kCausal = 1"
      status=1
    fi
  done
  for entry in "${solutions[@]}"; do
    local name="${entry%%|*}"
    local source="${repo_root}/${entry##*|}"
    # compile_check.sh's build: NVRTC with the header supplied by name, PTX written out.
    if ! PTXBENCH_CHECK_BUILD_DIR="${build_dir}" "${repo_root}/tools/blackwell-check/check.sh" \
      "${source}" "${header}" >"${out_dir}/${name}.log" 2>&1; then
      echo "COMPILE FAILED: ${entry##*|} (log: ${out_dir}/${name}.log)"
      status=1
      continue
    fi
    cp "${build_dir}/$(basename "${source}" .cu).sm_100a.ptx" "${out_dir}/${name}.ptx"
    # Whole-program ptxas, as the worker's compile stage assembles.
    "${cuda}/bin/ptxas" -arch=sm_100a -lineinfo "${out_dir}/${name}.ptx" -o "${out_dir}/${name}.cubin"
    echo "compiled ${entry##*|} -> ${out_dir}/${name}.cubin"
  done
  return "${status}"
}

sass_all() {
  local out_dir="$1"
  local disassembler
  disassembler="$(find_disassembler)"
  if [[ -z "${disassembler}" ]]; then
    echo "no cuobjdump or nvdisasm under ${cuda}/bin: cannot take the SASS census here"
    return 3
  fi
  echo "== SASS census ($(${disassembler%% *} --version | tail -1), $(date -u +%Y-%m-%d))"
  local status=0
  shopt -s nullglob
  local cubins=("${out_dir}"/*.cubin)
  if [[ ${#cubins[@]} -eq 0 ]]; then
    echo "no cubins in ${out_dir}; run '$0 compile ${out_dir}' first"
    return 2
  fi
  for cubin in "${cubins[@]}"; do
    # Base opcode of every instruction line: drop the address comment, the predicate and the
    # modifiers (`@P0 UTCHMMA.2CTA ...` -> UTCHMMA), as SassBaseOpcode does in the worker.
    local counts
    counts="$(${disassembler} "${cubin}" |
      sed -n 's@^[[:space:]]*/\*[0-9a-f]*\*/[[:space:]]*@@p' |
      sed 's/^@!\{0,1\}U\{0,1\}P[0-9T]*[[:space:]]*//' |
      awk '{ split($1, parts, "."); sub(/;$/, "", parts[1]); print parts[1] }' |
      grep -E '^(UTC[A-Z]*MMA|LDTM|STTM|UTMALDG|UTMASTG|UTMAREDG|UTCBAR|UTCATOMSWS)$' |
      sort | uniq -c | awk '{ printf "%s=%s ", $2, $1 }')"
    local missing=""
    [[ "${counts}" =~ UTC[A-Z]*MMA= ]] || missing+=" tcgen05_mma"
    [[ "${counts}" =~ (LDTM|STTM)= ]] || missing+=" tcgen05_tmem"
    [[ "${counts}" =~ UTMA(LDG|STG|REDG)= ]] || missing+=" tma"
    local verdict="ok"
    if [[ -n "${missing}" ]]; then
      verdict="MISSING${missing}"
      status=1
    fi
    printf '%-52s %s[%s]\n' "$(basename "${cubin}" .cubin)" "${counts}" "${verdict}"
  done
  return "${status}"
}

mode="${1:-all}"
out_dir="${2:-${build_dir}/census}"
case "${mode}" in
  compile) compile_all "${out_dir}" ;;
  sass) sass_all "${out_dir}" ;;
  all)
    compile_all "${out_dir}"
    sass_all "${out_dir}"
    ;;
  *)
    echo "usage: $0 [compile|sass|all] [OUT_DIR]" >&2
    exit 2
    ;;
esac
