#!/usr/bin/env bash
# Build and device steps for the gemm_n7168_k5120 candidates in tools/kernel-dev/candidates.
#
#   bash tools/kernel-dev/candidates/run_candidates.sh build    # CPU machine: NVRTC cubins
#        (the engine's compile path: nvrtc_check with the template header as a named header),
#        ptxas figures, and the gemm_dev harness, all into build-cand/ (git-ignored by
#        /build*/ in .gitignore; ~1.2 MB)
#   bash tools/kernel-dev/candidates/run_candidates.sh device   # GPU machine, build-cand/
#        carried: correctness on every task workload plus edge shapes, then timing against
#        cuBLASLt's fastest of its first 8 heuristic candidates, interleaved, L2 flushed per
#        sample. Writes $OUT/cand_log.txt; prints a compact table. About 40-70 s.
#   ... device full   # adds compute-sanitizer memcheck + synccheck on two small shapes.
#   ... device ncu    # adds one ncu report per tail candidate ($OUT/ncu_<label>.txt).
#   CANDIDATES=streamk ... device   # the reference and the tail candidates (stream-K first,
#        last and off, split-K tail) instead of the cluster ones; timing runs four rounds.
#   CANDIDATES=n176 ... device      # the reference and the 128x176 tiles without clusters,
#        with the epilogue overlapped (gemm_persistent_n176_overlap.cu) and without
#        (its -DOVERLAP=0 build).
#   CANDIDATES=packed ... device    # the reference and the 128x256 tiles with each tile's
#        epilogue packed to bf16 and written beside the next tile's first k-steps
#        (gemm_persistent_packed_overlap.cu), its -DOVERLAP=0 build, and n176_overlap.
set -u
cd "$(dirname "$0")/../../.."
BK=build-cand
TASK=tasks/gemm_n7168_k5120
CAND=tools/kernel-dev/candidates
HDR=ptxbench_hopper.cuh=tasks/_shared/templates/ptxbench_hopper.cuh

if [ "${1:-}" = build ]; then
  set -e
  mkdir -p $BK
  g++ -std=c++17 -O1 -I/usr/local/cuda/include tools/kernel-dev/nvrtc_check.cc \
    -L/usr/local/cuda/lib64 -lnvrtc -Wl,-rpath,/usr/local/cuda/lib64 -o $BK/nvrtc_check
  for f in $TASK/solutions/sm90a_wgmma_tma_persistent.cu $CAND/gemm_*.cu; do
    b=$(basename $f .cu)
    [ "$b" = gemm_dev ] && continue
    $BK/nvrtc_check --header $HDR --out $BK/$b.cubin $f > $BK/$b.log 2>&1
    echo "$b: $(grep -E 'registers' $BK/$b.log | sed 's/ptxas info *: //'); $(grep -E 'spill' $BK/$b.log | sed 's/ptxas *\. *//')"
  done
  # The other builds, by macro, of gemm_persistent_tail.cu (the loop above built the default,
  # the stream-K tail done first), of gemm_persistent_n176_overlap.cu and of
  # gemm_persistent_packed_overlap.cu (serial epilogues).
  for v in streamk_last:-DSTREAMK_FIRST=0:tail streamk_off:-DTAIL_OFF=1:tail \
    splitk_tail:-DTAIL_SPLIT=1:tail n176_serial:-DOVERLAP=0:n176_overlap \
    packed_serial:-DOVERLAP=0:packed_overlap; do
    IFS=: read -r name macro source <<< "$v"
    $BK/nvrtc_check --header $HDR "$macro" --out "$BK/gemm_persistent_$name.cubin" \
      "$CAND/gemm_persistent_$source.cu" > "$BK/gemm_persistent_$name.log" 2>&1
    echo "$name: $(grep -E 'registers' "$BK/gemm_persistent_$name.log" | sed 's/ptxas info *: //')"
  done
  nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a tools/kernel-dev/gemm_dev.cu \
    -o $BK/gemm_dev -L/usr/local/cuda/lib64/stubs -lcuda -lcublasLt
  du -sh $BK
  exit 0
fi

OUT=${OUT:-/tmp/cand-out}
mkdir -p "$OUT"
LOG="$OUT/cand_log.txt"
: > "$LOG"
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -e "$d/libcublasLt.so.13" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
if ! ldd $BK/gemm_dev | grep -q "libcublasLt.so.13 => /"; then
  lt=$(find / -name 'libcublasLt.so.13*' -not -path '/proc/*' 2>/dev/null | head -1)
  if [ -n "$lt" ]; then
    LD_LIBRARY_PATH="$(dirname "$lt"):${LD_LIBRARY_PATH:-}"
    export LD_LIBRARY_PATH
  fi
fi
DEV=$BK/gemm_dev
if ! $DEV cubin=/nonexistent 2>&1 | grep -q SETUP_ERROR; then
  echo "carried gemm_dev does not start; building it here" | tee -a "$LOG"
  nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a tools/kernel-dev/gemm_dev.cu \
    -o /tmp/gemm_dev -lcuda -lcublasLt >> "$LOG" 2>&1 && DEV=/tmp/gemm_dev
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu \
  --format=csv,noheader | tee -a "$LOG"

if command -v cuobjdump > /dev/null; then
  for c in $BK/*.cubin; do
    cuobjdump -sass "$c" > "$OUT/sass.txt" 2>&1 || true
    printf 'SASS %-36s HGMMA=%s UTMALDG=%s (MULTICAST %s) UTMASTG=%s STSM=%s\n' "$(basename "$c" .cubin)" \
      "$(grep -c HGMMA "$OUT/sass.txt")" "$(grep -c UTMALDG "$OUT/sass.txt")" \
      "$(grep -c 'UTMALDG.*MULTICAST' "$OUT/sass.txt")" "$(grep -c UTMASTG "$OUT/sass.txt")" \
      "$(grep -c STSM "$OUT/sass.txt")" >> "$LOG"
  done
  rm -f "$OUT/sass.txt"
fi

# The plans' facts (grid / block / cluster / smem / boxes), as the candidates' PTXBENCH_PLANs
# declare them.
COMMON="block=384 tile_m=128 args=tmA,tmB,tmC,M,N,K box_a=64x128 persistent=132 lt_algos=8"
PERS="label=persistent cubin=$BK/sm90a_wgmma_tma_persistent.cubin $COMMON smem=230464 tile_n=256 cluster_x=1 box_b=64x256 box_c=64x64"
C2="label=cluster2 cubin=$BK/gemm_persistent_cluster2.cubin $COMMON smem=230464 tile_n=256 cluster_x=2 box_b=64x128 box_c=64x64"
SK_PLAN="block=384 tile_m=128 args=tmA,tmB,tmC,M,N,K,W box_a=64x128 persistent=132 lt_algos=8 smem=230480 scratch_bytes=86511616 tile_n=256 cluster_x=1 box_b=64x256 box_c=64x64"
SK="label=streamk cubin=$BK/gemm_persistent_tail.cubin $SK_PLAN"
SKL="label=streamk_last cubin=$BK/gemm_persistent_streamk_last.cubin $SK_PLAN"
SPK="label=splitk_tail cubin=$BK/gemm_persistent_splitk_tail.cubin $SK_PLAN"
SKO="label=streamk_off cubin=$BK/gemm_persistent_streamk_off.cubin $SK_PLAN"
N176_PLAN="$COMMON smem=218192 tile_n=176 cluster_x=1 box_b=64x176 box_c=88x64 swizzle_c=none"
N176O="label=n176_overlap cubin=$BK/gemm_persistent_n176_overlap.cubin $N176_PLAN"
N176S="label=n176_serial cubin=$BK/gemm_persistent_n176_serial.cubin $N176_PLAN"
PACKO="label=packed_overlap cubin=$BK/gemm_persistent_packed_overlap.cubin $COMMON smem=230464 tile_n=256 cluster_x=1 box_b=64x256 box_c=64x64"
PACKS="label=packed_serial cubin=$BK/gemm_persistent_packed_serial.cubin $COMMON smem=230464 tile_n=256 cluster_x=1 box_b=64x256 box_c=64x64"
C176="label=cluster2_n176 cubin=$BK/gemm_persistent_cluster2_n176.cubin $COMMON smem=218192 tile_n=176 cluster_x=2 box_b=64x88 box_c=88x64 swizzle_c=none"

# Task workloads (timed, small_square, medium, ragged_m) plus edge shapes: 136x200x72 (partial
# M, N and K boxes; rank 1's tile partly in range), 2176x7168x512 (17 M tiles: 252 pairs over 66
# clusters, the last pair's rank-1 tile wholly below M in the middle of the persistent loop),
# 384x1024x512.
SHAPES=8192x7168x5120,256x256x256,1024x2048x1024,384x7168x5120,136x200x72,2176x7168x512,384x1024x512
run() { echo "\$ $*" >> "$LOG"; timeout "${TMO:-30}" $DEV "$@" >> "$LOG" 2>&1; echo "rc=$? $(echo "$*" | grep -o 'label=[^ ]*')" >> "$LOG"; }

# Stream-K edge shapes (tiles, R = tiles mod 132, k-steps): 2176x7168x512 (476, 80, 8: up to 3
# CTAs per tile, middle ones wholly inside a tile), 2304x4096x1000 (288, 24, 16 with a partial
# last k-step: up to 6 CTAs per tile), 1100x7168x96 (252, 120, 2: ranges of 1-2 steps),
# 2176x7168x64 (476, 80, 1: 80 steps < 132 CTAs, so no stream-K).
SK_SHAPES=$SHAPES,2304x4096x1000,1100x7168x96,2176x7168x64
case "${CANDIDATES:-all}" in
  streamk) LIST=("$PERS" "$SK" "$SKL" "$SKO" "$SPK") ;;
  n176) LIST=("$PERS" "$N176O" "$N176S") ;;
  packed) LIST=("$PERS" "$PACKO" "$PACKS" "$N176O") ;;
  *) LIST=("$PERS" "$C2" "$C176" "$SK") ;;
esac
for v in "${LIST[@]}"; do
  if [ "$v" = "$SK" ] || [ "$v" = "$SKL" ] || [ "$v" = "$SPK" ]; then run $v shapes=$SK_SHAPES trials=2; else run $v shapes=$SHAPES trials=1; fi
done
for _ in 1 2 3 4; do
  for v in "${LIST[@]}"; do
    run $v shapes=8192x7168x5120 trials=1 time_iters=30 warmup_ms=300
  done
done
nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader >> "$LOG"
if [ "${1:-}" = "device" ] && [ "${2:-}" = ncu ] && command -v ncu > /dev/null; then
  # Stall reasons and throughput of one timed-shape launch of each candidate of the list (the
  # question the NOTES left open: what limits the persistent kernel at 0.97-0.99 of cuBLASLt).
  for v in "${LIST[@]}"; do
    lbl=$(echo "$v" | grep -o 'label=[^ ]*' | cut -d= -f2)
    timeout 180 ncu -k gemm_kernel -c 1 --section SpeedOfLight --section WarpStateStats \
      --section SchedulerStats --section MemoryWorkloadAnalysis --section LaunchStats \
      $DEV $v shapes=8192x7168x5120 trials=1 lt_algos=1 > "$OUT/ncu_$lbl.txt" 2>&1
    echo "ncu $lbl rc=$?" >> "$LOG"
  done
fi
if [ "${1:-}" = "device" ] && [ "${2:-}" = full ]; then
  for v in "$C2" "$C176"; do
    for tool in memcheck synccheck; do
      echo "== compute-sanitizer $tool $(echo "$v" | grep -o 'label=[^ ]*')" >> "$LOG"
      timeout 120 compute-sanitizer --tool $tool $DEV $v shapes=256x256x256,2176x1024x256 \
        trials=1 lt_algos=1 2>&1 | tail -4 >> "$LOG"
    done
  done
fi

echo "== summary (full log: $LOG)"
grep -E "^OCCUPANCY" "$LOG" | sort | uniq -c
grep -E "^SASS" "$LOG" || true
echo "-- correctness (label shape status fails max_abs_err)"
grep -E "^RESULT" "$LOG" | grep -v after_timing | awk '{printf "%-14s %-16s %s %s %s %s\n", $2, $3, $5, $6, $8, $10}'
echo "after-timing re-checks: $(grep -c 'after_timing status=ok' "$LOG") ok, $(grep -c 'after_timing status=MISMATCH' "$LOG") mismatch"
grep -E "RUNTIME_ERROR|SETUP_ERROR|launch_failed|^rc=[^0]" "$LOG" || echo "no errors, every rc=0"
echo "-- timing 8192x7168x5120 (median ms; speedup = cuBLASLt median / candidate median)"
grep -E "^LT 8192" "$LOG" | head -1
grep -E "^TIMING" "$LOG" | sed -E 's/TIMING ([^ ]*) [^ ]* iters=([0-9]*) cand_median_ms=([0-9.]*) \(min ([0-9.]*) max ([0-9.]*)\) ([0-9.]*) TFLOP\/s \| cublasLt_median_ms=([0-9.]*).*speedup=([0-9.]*)/\1 cand=\3 (min \4) \6 TF\/s lt=\7 speedup=\8/'
grep -E "== compute-sanitizer|ERROR SUMMARY" "$LOG" || true
