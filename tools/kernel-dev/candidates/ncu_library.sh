#!/usr/bin/env bash
# Device: ncu of cuBLASLt's chosen kernel and of the persistent reference, locked and free clocks.
set -u
BK=build-cand
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -e "$d/libcublasLt.so.13" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
PERS="label=persistent cubin=$BK/sm90a_wgmma_tma_persistent.cubin block=384 tile_m=128 args=tmA,tmB,tmC,M,N,K box_a=64x128 persistent=132 smem=230464 tile_n=256 cluster_x=1 box_b=64x256 box_c=64x64 shapes=8192x7168x5120 trials=1 lt_algos=8"
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section LaunchStats --section WarpStateStats"
for cc in base none; do
  timeout 150 ncu --clock-control $cc -k 'regex:^(?!(FillNormal|Compare|CountDiff|gemm_kernel))' --launch-skip 104 -c 1 $S $BK/gemm_dev $PERS > $OUT/ncu_lt_$cc.txt 2>&1; echo "lt $cc rc=$?"
  timeout 150 ncu --clock-control $cc -k gemm_kernel -c 1 $S $BK/gemm_dev $PERS > $OUT/ncu_pers_$cc.txt 2>&1; echo "pers $cc rc=$?"
done
for f in $OUT/ncu_*.txt; do echo "== $f"; grep -E "^  [a-z_].*\(|Duration|SM Frequency|Elapsed Cycles|DRAM Throughput|L2 Cache Throughput|L2 Hit Rate|Compute \(SM\) Throughput|Grid Size|Block Size|Cluster Size|Registers Per|Shared Memory Config|Dynamic Shared|Mem Busy" $f | head -20; done
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv
