#!/usr/bin/env bash
# Builds, on the CPU machine, everything tools/attention-dev/bwd_run_device.sh needs into
# .dev-bwd/ (git-ignored): the generated variants (bwd_gen_variants.py), the NVRTC checker of
# tools/kernel-dev, every sm_90a solution and decoy of mha_bwd_d128 and mha_bwd_d128_causal as an
# NVRTC cubin (the template header handed to NVRTC as the named header ptxbench_hopper.cuh, no
# include directories, whole-program ptxas for sm_90a inside NVRTC), and the bwd_dev harness.
set -eu
cd "$(dirname "$0")/../.."
BD=.dev-bwd
HDR=ptxbench_hopper.cuh=tasks/_shared/templates/ptxbench_hopper.cuh
mkdir -p $BD
python3 tools/attention-dev/bwd_gen_variants.py > /dev/null
g++ -std=c++17 -O1 -Wall -Wextra -Werror -I/usr/local/cuda/include tools/kernel-dev/nvrtc_check.cc \
  -L/usr/local/cuda/lib64 -lnvrtc -Wl,-rpath,/usr/local/cuda/lib64 -o $BD/nvrtc_check
for task in mha_bwd_d128 mha_bwd_d128_causal; do
  for f in tasks/$task/solutions/sm90a_*.cu tasks/$task/decoys/*.cu; do
    kind=$(basename "$(dirname "$f")")
    name=${task}__${kind}__$(basename "$f" .cu)
    if $BD/nvrtc_check --header $HDR --out $BD/$name.cubin "$f" > $BD/$name.log 2>&1; then
      echo "$name: $(grep -A2 "Function properties for attn_bwd_main" $BD/$name.log | \
        tr -s ' \n' ' ' | sed 's/.*main ptxas . //') $(grep -c 'C75' $BD/$name.log) advisories"
    else
      echo "$name: REFUSED ($(grep -m1 -E 'error' $BD/$name.log))"
    fi
  done
done
nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a -Xcompiler -Wall,-Wextra \
  tools/attention-dev/bwd_dev.cu -o $BD/bwd_dev -L/usr/local/cuda/lib64/stubs -lcuda
echo "built into $BD/"
