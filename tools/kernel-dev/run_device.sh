#!/usr/bin/env bash
# One device call's worth of checks for the gemm_n7168_k5120 reference solutions and decoys.
# Run on the H200 machine from the repository root, with build-kernel/ carried (cubins from
# tools/kernel-dev/build.sh and the gemm_dev binary). Writes everything under $OUT.
# usage: bash tools/kernel-dev/run_device.sh [full]   (full: also the RS solution, memcheck and
#        every decoy; without it: the fast solutions, timing, ncu and the newest decoy)
set -u
OUT=${OUT:-/tmp/kernel-dev-out}
mkdir -p "$OUT"
LOG="$OUT/log.txt"
BK=build-kernel
exec > >(tee -a "$LOG") 2>&1

echo "== machine"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,temperature.gpu \
  --format=csv
# cuBLASLt: the toolkit's, else the one PyTorch's wheels carry.
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -e "$d/libcublasLt.so.13" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
if ! ldd $BK/gemm_dev | grep -q "libcublasLt.so.13 => /"; then
  lt=$(find / -name 'libcublasLt.so.13*' -not -path '*/proc/*' 2>/dev/null | head -1)
  [ -n "$lt" ] && export LD_LIBRARY_PATH="$(dirname "$lt"):${LD_LIBRARY_PATH:-}"
fi
ldd $BK/gemm_dev | grep -E "cublasLt|cuda" || true
if ! $BK/gemm_dev cubin=/nonexistent 2>&1 | grep -q SETUP_ERROR; then
  echo "carried gemm_dev does not start; building it here"
  nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a tools/kernel-dev/gemm_dev.cu \
    -o /tmp/gemm_dev -lcuda -lcublasLt && cp /tmp/gemm_dev $BK/gemm_dev_local && \
    GEMM_DEV=$BK/gemm_dev_local
fi
GEMM_DEV=${GEMM_DEV:-$BK/gemm_dev}

echo "== SASS (target families per cubin)"
for c in $BK/*.cubin; do
  name=$(basename "$c" .cubin)
  cuobjdump -sass "$c" > "$OUT/sass_$name.txt" 2>&1 || true
  printf '%-40s HGMMA=%-4s UTMALDG=%-4s UTMASTG=%-4s UBLKCP=%-3s SYNCS=%-4s STSM=%-3s LDSM=%-3s\n' \
    "$name" "$(grep -c 'HGMMA' "$OUT/sass_$name.txt")" "$(grep -c 'UTMALDG' "$OUT/sass_$name.txt")" \
    "$(grep -c 'UTMASTG' "$OUT/sass_$name.txt")" "$(grep -c 'UBLKCP' "$OUT/sass_$name.txt")" \
    "$(grep -c 'SYNCS' "$OUT/sass_$name.txt")" "$(grep -c 'STSM' "$OUT/sass_$name.txt")" \
    "$(grep -c 'LDSM' "$OUT/sass_$name.txt")"
done
echo "-- HGMMA lines in the wgmma decoys (guard predicate / branch around them)"
grep -n -B3 'HGMMA' "$OUT/sass_decoy_wgmma_predicated_off.txt" | head -20
grep -n -B2 'HGMMA' "$OUT/sass_decoy_wgmma_branch_never_taken.txt" | head -8
grep -n 'HGMMA' "$OUT/sass_decoy_wgmma_empty_commit.txt" | head -4
tar czf "$OUT/sass.tgz" -C "$OUT" $(cd "$OUT" && ls sass_*.txt) && rm -f "$OUT"/sass_*.txt

SHAPES_ALL=8192x7168x5120,256x256x256,1024x2048x1024,384x7168x5120
WS="block=384 smem=197696 tile_m=128 tile_n=256 args=tmA,tmB,tmC,M,N,K box_a=64x128 box_c=64x64"
MAIN="label=ws cubin=$BK/sm90a_wgmma_tma.cubin $WS cluster_m=1 box_b=64x256"
MCAST="label=ws_multicast cubin=$BK/sm90a_wgmma_tma_multicast.cubin $WS cluster_m=2 box_b=64x128"
RS="label=rs_simple cubin=$BK/sm90a_wgmma_rs_ldmatrix.cubin kernel=gemm_rs_kernel block=128 smem=50192 tile_m=64 tile_n=128 args=tmA,tmB,C,M,N,K box_a=64x64 box_b=64x128"
run() { echo "\$ gemm_dev $*"; timeout "${TMO:-120}" $GEMM_DEV "$@"; echo "rc=$?"; }

echo "== solutions: correctness on all workloads"
run $MAIN shapes=$SHAPES_ALL trials=2
run $MCAST shapes=$SHAPES_ALL trials=1
[ "${1:-}" = full ] && run $RS shapes=$SHAPES_ALL trials=2
echo "-- timing, timed workload (interleaved with cuBLASLt, L2 flushed per sample)"
nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader
run $MAIN shapes=8192x7168x5120 trials=1 time_iters=40 warmup_ms=500
run $MCAST shapes=8192x7168x5120 trials=1 time_iters=20 warmup_ms=300
run $MAIN shapes=8192x7168x5120 trials=1 time_iters=40 warmup_ms=500
[ "${1:-}" = full ] && run $RS shapes=8192x7168x5120 trials=1 time_iters=10 warmup_ms=200
nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader
echo "-- ncu (one launch each, clocks left alone): occupancy and throughput"
for v in "$MAIN" "$MCAST"; do
  timeout 120 ncu --clock-control none --section LaunchStats --section Occupancy \
    --section SpeedOfLight -k regex:gemm -c 1 $GEMM_DEV $v shapes=8192x7168x5120 trials=1 2>&1 | \
    grep -E "gemm_kernel|Cluster|Grid Size|Registers|Theoretical Occ|Achieved Occ|Waves|Duration|Compute \(SM\) Thr|Memory Thr|SM Frequency|Block Limit|RESULT" | head -30
done
echo "-- new decoy: empty wgmma commit group"
run label=wgmma_empty_commit cubin=$BK/decoy_wgmma_empty_commit.cubin block=256 smem=0 tile_m=64 tile_n=64 args=tmA,tmB,C,M,N,K box_a=32x64 box_b=32x64 swizzle=none shapes=1024x2048x1024,384x7168x512 trials=1
cuobjdump -sass $BK/decoy_wgmma_empty_commit.cubin | grep -E "HGMMA|WARPGROUP"
[ "${1:-}" = full ] || exit 0

echo "== memcheck on small shapes (main solution)"
TMO=180 timeout 180 compute-sanitizer --tool memcheck $GEMM_DEV $MAIN \
  shapes=256x256x256,384x1024x512 trials=1 2>&1 | tail -8

echo "== decoys (dev-harness behaviour only; plan and compile decoys need the engine)"
PLAIN="block=256 smem=0 tile_m=64 tile_n=64 args=A,B,C,M,N,K"
TMAF="block=256 smem=0 tile_m=64 tile_n=64 args=tmA,tmB,C,M,N,K box_a=32x64 box_b=32x64 swizzle=none"
SMALL=1024x2048x1024,384x7168x512
run label=wrong_transposed_b cubin=$BK/decoy_wrong_transposed_b.cubin kernel=gemm_fma_kernel $PLAIN shapes=$SMALL trials=1
run label=wgmma_branch_never_taken cubin=$BK/decoy_wgmma_branch_never_taken.cubin $TMAF shapes=$SMALL,8192x7168x5120 trials=1
run label=wgmma_predicated_off cubin=$BK/decoy_wgmma_predicated_off.cubin $TMAF shapes=$SMALL,8192x7168x5120 trials=1
run label=partial_write cubin=$BK/decoy_partial_write.cubin kernel=gemm_fma_kernel $PLAIN shapes=$SMALL trials=1
run label=cache_across_launches cubin=$BK/decoy_cache_across_launches.cubin kernel=gemm_fma_kernel $PLAIN shapes=1024x2048x1024 trials=3
run label=mutate_inputs cubin=$BK/decoy_mutate_inputs.cubin kernel=gemm_fma_kernel $PLAIN shapes=$SMALL trials=1
run label=illegal_address cubin=$BK/decoy_illegal_address.cubin kernel=gemm_fma_kernel $PLAIN shapes=$SMALL trials=1
run label=trap cubin=$BK/decoy_trap.cubin kernel=gemm_fma_kernel $PLAIN shapes=$SMALL trials=1
run label=scan_for_reference cubin=$BK/decoy_scan_for_reference.cubin kernel=scan_kernel block=256 smem=0 tile_m=1000000000 tile_n=1 args=A,B,C,C,M,N,K shapes=256x256x256 trials=1
TMO=15 run label=hang cubin=$BK/decoy_hang.cubin kernel=gemm_fma_kernel $PLAIN shapes=256x256x256 trials=1
echo "== done"
