#!/usr/bin/env bash
# Builds, on the CPU machine, everything tools/attention-dev/fwd_run_device.sh needs into
# .dev-fwd/ (git-ignored via .git/info/exclude's /.dev-*/): tools/kernel-dev's NVRTC checker,
# every mha_with_lse_d128(_causal) sm_90a solution and decoy as a cubin compiled the way the
# engine compiles it (NVRTC, the template header handed over as the named header
# ptxbench_hopper.cuh, no include directories, compute_90a then ptxas sm_90a), and the
# attn_fwd_dev harness (nvcc). Prints ptxas's register/spill lines and advisories per file.
set -eu
cd "$(dirname "$0")/../.."
OUT=.dev-fwd
HDR=ptxbench_hopper.cuh=tasks/_shared/templates/ptxbench_hopper.cuh
mkdir -p $OUT
g++ -std=c++17 -O1 -Wall -Wextra -Werror -I/usr/local/cuda/include tools/kernel-dev/nvrtc_check.cc \
  -L/usr/local/cuda/lib64 -lnvrtc -Wl,-rpath,/usr/local/cuda/lib64 -o $OUT/nvrtc_check
for task in mha_with_lse_d128 mha_with_lse_d128_causal; do
  tag=$([ $task = mha_with_lse_d128 ] && echo fwd || echo causal)
  for f in tasks/$task/solutions/sm90a_*.cu tasks/$task/decoys/*.cu; do
    name=${tag}_$(basename "$(dirname "$f")")_$(basename "$f" .cu)
    if $OUT/nvrtc_check --header $HDR --out $OUT/$name.cubin "$f" > $OUT/$name.log 2>&1; then
      echo "$name: $(grep -E 'Used [0-9]+ registers' $OUT/$name.log | sed 's/.*Used/Used/')" \
        "$(grep -E 'spill' $OUT/$name.log | sed 's/ptxas *\. *//')"
      grep -E "C75[0-9][0-9]" $OUT/$name.log | grep -v C7519 | sed "s|^|  $name: |" || true
    else
      echo "$name: REFUSED ($(grep -m1 error $OUT/$name.log))"
    fi
  done
done
nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a -Xcompiler -Wall,-Wextra \
  tools/attention-dev/attn_fwd_dev.cu -o $OUT/attn_fwd_dev -L/usr/local/cuda/lib64/stubs -lcuda
echo "built into $OUT/"
