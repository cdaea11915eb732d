#!/usr/bin/env bash
# Builds, on the CPU machine, everything tools/kernel-dev/run_device.sh needs into build-kernel/:
# the NVRTC checker, every gemm_n7168_k5120 sm_90a solution and decoy as an NVRTC cubin (the
# template header passed as a named NVRTC header, as the engine does), and the gemm_dev harness.
# Decoys that must not compile are expected to fail here; their logs say why.
set -eu
cd "$(dirname "$0")/../.."
BK=build-kernel
TASK=tasks/gemm_n7168_k5120
HDR=ptxbench_hopper.cuh=tasks/_shared/templates/ptxbench_hopper.cuh
mkdir -p $BK
g++ -std=c++17 -O1 -Wall -Wextra -Werror -I/usr/local/cuda/include tools/kernel-dev/nvrtc_check.cc \
  -L/usr/local/cuda/lib64 -lnvrtc -Wl,-rpath,/usr/local/cuda/lib64 -o $BK/nvrtc_check
for f in $TASK/solutions/sm90a_*.cu; do
  $BK/nvrtc_check --header $HDR --out $BK/$(basename $f .cu).cubin $f > $BK/$(basename $f .cu).log
  grep -E "registers|spill|C75" $BK/$(basename $f .cu).log | sed "s|^|$(basename $f): |"
done
for f in $TASK/decoys/*.cu; do
  b=$(basename $f .cu)
  if $BK/nvrtc_check --header $HDR --out $BK/decoy_$b.cubin $f > $BK/decoy_$b.log 2>&1; then
    echo "decoy $b: compiled"
  else
    echo "decoy $b: REFUSED ($(grep -m1 -E 'error' $BK/decoy_$b.log))"
  fi
done
nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a -Xcompiler -Wall,-Wextra \
  tools/kernel-dev/gemm_dev.cu -o $BK/gemm_dev -L/usr/local/cuda/lib64/stubs -lcuda -lcublasLt
echo "built into $BK/"
