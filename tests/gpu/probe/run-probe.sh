#!/usr/bin/env bash
# Runs the one-off device probe on the lent H200 and writes its findings under $OUT.
# Built here first (see README.md); run there from the repo root:
#   bash tests/gpu/probe/run-probe.sh        (carry: build-gpu/probe)
set -uo pipefail
OUT=${OUT:-/tmp/probe-out}; mkdir -p "$OUT"
P=build-gpu/probe
log="$OUT/probe.log"
exec > >(tee "$log") 2>&1
echo "== host"; uname -a; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv
py=$(command -v python3)
cublas_dir=$($py -c 'import nvidia.cublas, os; print(os.path.join(os.path.dirname(nvidia.cublas.__file__), "lib"))' 2>/dev/null)
cudnn_dir=$($py -c 'import nvidia.cudnn, os; print(os.path.join(os.path.dirname(nvidia.cudnn.__file__), "lib"))' 2>/dev/null)
echo "python=$py cublas_dir=$cublas_dir cudnn_dir=$cudnn_dir"
ls "$cublas_dir" "$cudnn_dir" 2>&1 | head -40
ls -la /usr/local/cuda/lib64/ | grep -i -E "cupti|nvperf|cublas|cudnn|nvrtc|nvJit" ; ls /usr/local/cuda/extras/CUPTI/lib64 2>&1 | head
find / -xdev \( -name 'libcublasLt.so*' -o -name 'libcudnn.so*' -o -name 'libcupti.so*' -o -name 'libnvidia-ml.so*' \) 2>/dev/null | head -30
which nvdisasm cuobjdump compute-sanitizer ncu; compute-sanitizer --version | tail -1; nvdisasm --version | tail -1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64:$cublas_dir:$cudnn_dir:${LD_LIBRARY_PATH:-}
ldd $P/device_probe | grep -E "cublas|cupti|not found"
CUBIN=$P/probe_kernels.cubin
echo "== sass variants"
for v in list lazy1_all lazy0_all flush_each enable_each config_each prerun_then_enable reload_each twice wgmma_off overhead; do
  echo "---- $v"; timeout -s KILL 90 $P/device_probe sass $v $CUBIN; echo "exit $?"
done 2>&1 | grep -v "^metric_available" ; timeout 60 $P/device_probe sass list $CUBIN | grep metric_available > "$OUT/sass-metrics.txt"
echo "== disassembly"
{ nvdisasm -c -hex -g $CUBIN; echo "=== -gi"; nvdisasm -c -gi $CUBIN | head -80; echo "=== cuobjdump"; cuobjdump -sass $CUBIN | head -60; echo "=== help"; nvdisasm --help; } > "$OUT/sass.txt" 2>&1
echo "== sandbox"; timeout 60 $P/device_probe sandbox
echo "== gemm"; timeout -s KILL 120 $P/device_probe gemm
echo "== torch"
timeout -s KILL 120 $py - <<'PY'
import torch, time, statistics
M, N, K = 8192, 7168, 5120
a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16); b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
flush = torch.empty(2 * 64 * 2**20, dtype=torch.uint8, device="cuda")
for _ in range(10): torch.matmul(a, b.t())
t_end = time.time() + 0.05
while time.time() < t_end: torch.matmul(a, b.t()); torch.cuda.synchronize()
ts = []
for _ in range(50):
    flush.fill_(1); s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
    s.record(); torch.matmul(a, b.t()); e.record(); e.synchronize(); ts.append(s.elapsed_time(e))
m = statistics.median(ts)
print(f"torch.matmul {M}x{N}x{K}: median {m:.4f} ms ({2*M*N*K/m/1e9:.0f} TFLOP/s) min {min(ts):.4f} max {max(ts):.4f}; torch {torch.__version__} cublas {torch.backends.cuda.preferred_blas_library()}")
PY
echo "== faults"
timeout -s KILL 60 $P/device_probe fault oob $CUBIN; echo "oob exit $?"
timeout -s KILL 120 compute-sanitizer --tool memcheck --print-limit 5 $P/device_probe fault oob $CUBIN > "$OUT/sanitizer.txt" 2>&1; echo "sanitizer exit $?"; head -30 "$OUT/sanitizer.txt"
t0=$(date +%s%N); setsid timeout -s KILL 3 $P/device_probe fault hang $CUBIN; echo "hang exit $? after $(( ($(date +%s%N) - t0) / 1000000 )) ms"
for i in 1 2; do timeout -s KILL 60 $P/device_probe fault health $CUBIN; echo "health exit $?"; done
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,utilization.gpu --format=csv
echo "== done"
