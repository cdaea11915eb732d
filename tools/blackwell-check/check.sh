#!/usr/bin/env bash
# Compile check for Blackwell (sm_100a) sources on a machine without a Blackwell GPU.
#
# Builds compile_check (NVRTC + nvJitLink, as the worker compiles submissions), runs it on the
# given source with the given template headers, and cross-checks the PTX with `ptxas -v` for the
# resource line. Exit status is compile_check's (0 compiled, 1 refused, 2 usage/I/O).
#
# Usage: tools/blackwell-check/check.sh [--arch=sm_100a] SOURCE.cu [HEADER.cuh ...]
#   Default (no arguments): the gemm_n7168_k5120 sm_100a reference solution with the shared
#   Blackwell header.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cuda="${CUDA_HOME:-/usr/local/cuda}"
build_dir="${PTXBENCH_CHECK_BUILD_DIR:-${TMPDIR:-/tmp}/ptxbench-blackwell-check}"
arch="sm_100a"
if [[ "${1:-}" == --arch=* ]]; then
  arch="${1#--arch=}"
  shift
fi
if [[ $# -eq 0 ]]; then
  set -- "${repo_root}/tasks/gemm_n7168_k5120/solutions/sm100a_tcgen05_tma.cu" \
    "${repo_root}/tasks/_shared/templates/ptxbench_blackwell.cuh"
fi
source_file="$1"
shift

mkdir -p "${build_dir}"
binary="${build_dir}/compile_check"
if [[ ! -x "${binary}" || "${repo_root}/tools/blackwell-check/compile_check.cc" -nt "${binary}" ]]; then
  g++ -std=c++20 -O1 -Wall -Wextra -Werror -I"${cuda}/include" \
    "${repo_root}/tools/blackwell-check/compile_check.cc" -o "${binary}" \
    -L"${cuda}/lib64" -Wl,-rpath,"${cuda}/lib64" -lnvrtc -lnvJitLink
fi

header_args=()
for header in "$@"; do
  header_args+=("--header=${header}")
done
ptx_file="${build_dir}/$(basename "${source_file}" .cu).${arch}.ptx"
status=0
"${binary}" --arch="${arch}" "${header_args[@]}" --ptx-out="${ptx_file}" "${source_file}" ||
  status=$?

if [[ ${status} -eq 0 && -x "${cuda}/bin/ptxas" ]]; then
  echo "== ptxas -v (${arch}) on ${ptx_file}"
  "${cuda}/bin/ptxas" -arch="${arch}" -v "${ptx_file}" -o "${build_dir}/check.cubin" 2>&1 |
    sed 's/^/  /'
fi
exit "${status}"
