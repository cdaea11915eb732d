#!/usr/bin/env bash
# Candidates for tasks/mha_bwd_d128(_causal) sm_90a, against the current solution.
#
#   bash tools/attention-dev/candidates/run_candidates.sh build    # CPU machine (here)
#   bash tools/attention-dev/candidates/run_candidates.sh device   # H100/H200, carry build-bwd-cand
#
# build: the NVRTC checker (tools/kernel-dev/nvrtc_check.cc), every source below compiled for
# sm_90a as the engine does (template header handed to NVRTC as the named header
# ptxbench_hopper.cuh), a causal copy of each (kCausal = true, the one-constant switch), ptxas
# registers/spills per main kernel, and the harness bwd_dev (bwd_dev.cu plus kv= and
# main-kernel timing). Output in build-bwd-cand/ at the repository root (git-ignored by /build*/).
# device: every source on every task workload (all heads checked on the small ones, 3 heads on
# the timed one) with relative norms, timing (median of CUDA-event runs) on 4x48x4096, and a
# compact table at the end. About 1 minute on an H100.
set -u
cd "$(dirname "$0")/../../.."
BD=build-bwd-cand
HDR=ptxbench_hopper.cuh=tasks/_shared/templates/ptxbench_hopper.cuh
# name:source:kv:block:smem
SOURCES="ref:tasks/mha_bwd_d128/solutions/sm90a_wgmma_tma.cu:64:128:108608
kv128:tasks/mha_bwd_d128/solutions/sm90a_wgmma_tma_kv128.cu:128:256:232000
kv128_defer:$BD/bwd_kv128_defer.cu:128:256:232000"

if [ "${1:-}" = build ]; then
  set -e
  mkdir -p $BD
  # The deferred variant is held as its difference from kv128, now the task's reference solution
  # (tasks/mha_bwd_d128/solutions/sm90a_wgmma_tma_kv128.cu; the lines it changes).
  patch -s -o $BD/bwd_kv128_defer.cu tasks/mha_bwd_d128/solutions/sm90a_wgmma_tma_kv128.cu \
    tools/attention-dev/candidates/bwd_kv128_defer.diff
  g++ -std=c++17 -O1 -I/usr/local/cuda/include tools/kernel-dev/nvrtc_check.cc \
    -L/usr/local/cuda/lib64 -lnvrtc -Wl,-rpath,/usr/local/cuda/lib64 -o $BD/nvrtc_check
  for line in $SOURCES; do
    IFS=: read -r name src kv block smem <<< "$line"
    sed 's/^constexpr bool kCausal = false;/constexpr bool kCausal = true;/' "$src" > $BD/${name}_causal.cu
    grep -q '^constexpr bool kCausal = true;' $BD/${name}_causal.cu
    cp "$src" $BD/${name}.cu
    for v in $name ${name}_causal; do
      if $BD/nvrtc_check --header $HDR --out $BD/$v.cubin $BD/$v.cu > $BD/$v.log 2>&1; then
        echo "$v: $(grep -A2 "Function properties for attn_bwd_main" $BD/$v.log | \
          tr -s ' \n' ' ' | sed 's/.*main ptxas . //') $(grep -c 'C75' $BD/$v.log) advisories"
      else
        echo "$v: REFUSED"; cat $BD/$v.log; exit 1
      fi
    done
  done
  nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a -Xcompiler -Wall,-Wextra \
    tools/attention-dev/bwd_dev.cu -o $BD/bwd_dev \
    -L/usr/local/cuda/lib64/stubs -lcuda
  echo "built into $BD/ ($(du -sh $BD | cut -f1))"
  exit 0
fi

if [ "${1:-}" = device ]; then
  OUT=${OUT:-/tmp/bwd-cand-out}
  mkdir -p "$OUT"
  LOG=$OUT/cand_log.txt
  : > $LOG
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a $LOG
  SMALL=1x2x128,1x3x384,2x4x1024,1x1x16384
  for line in $SOURCES; do
    IFS=: read -r name src kv block smem <<< "$line"
    for c in 0 1; do
      v=$name; [ $c = 1 ] && v=${name}_causal
      common="cubin=$BD/$v.cubin label=$v causal=$c kv=$kv block=$block smem=$smem"
      timeout 60 $BD/bwd_dev $common shapes=$SMALL >> $LOG 2>&1 || echo "[$v] rc=$?" >> $LOG
      timeout 60 $BD/bwd_dev $common shapes=4x48x4096 iters=${ITERS:-7} >> $LOG 2>&1 || \
        echo "[$v] rc=$?" >> $LOG
    done
  done
  echo "== full log"; cat $LOG
  echo "== table (rel norms: worst over shapes of max(dQ,dK,dV); time: 4x48x4096 median)"
  printf '%-14s %-5s %-10s %-10s %-9s %-9s %s\n' source pass worst_rel timed_rel total_ms main_ms TFLOPs
  for line in $SOURCES; do
    IFS=: read -r name src kv block smem <<< "$line"
    for v in $name ${name}_causal; do
      awk -v v="[$v]" '
        index($0, v " ") == 1 && /rel_norm/ {
          on = 0; lw = 0
          for (i = 1; i <= NF; ++i) {
            if ($i == "rel_norm") on = 1; else if ($i == "max_abs_err") on = 0;
            else if (on) { split($i, a, "="); x = a[2] + 0; if (x > lw) lw = x; } }
          if (lw > w) w = lw; if ($0 ~ /4x48x4096/) t = sprintf("%.3e", lw);
          if ($0 ~ /FAIL/) f++; seen++ }
        index($0, v " ") == 1 && /time median/ {
          for (i = 1; i <= NF; ++i) { if ($i == "median" && tm == "") tm = $(i+1);
            if ($i == "TFLOP/s;") tf = $(i-1); }
          mm = $(NF-1) }
        index($0, v " ") == 1 && /RUNTIME_ERROR|CUDA_ERROR/ { f++ }
        END { printf "%-14s %-5s %-10.3e %-10s %-9s %-9s %s\n", substr(v, 2, length(v) - 2),
              (f == 0 && seen >= 5) ? "yes" : "NO", w, t, tm, mm, tf }' $LOG
    done
  done
  exit 0
fi
echo "usage: $0 build|device"; exit 2
