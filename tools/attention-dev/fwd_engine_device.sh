#!/usr/bin/env bash
# Runs the engine (ptxbench-gpu-report: every solution and decoy through Evaluate() against
# task.json's expectations) on the two forward attention tasks, on the H200, from the repository root with .dev-fwd/engine carried.
# The bundle is made on the CPU machine by: fwd_engine_device.sh --bundle BUILD_DIR
# (BUILD_DIR: a configured build folder; builds ptxbench-evaluator and ptxbench-gpu-report).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
source "$root/scripts/lib/bundle-libs.sh"
bundle="$root/.dev-fwd/engine"
if [[ "${1:-}" == "--bundle" ]]; then
  set -e
  build=$2
  ninja -C "$build" ptxbench-evaluator ptxbench-gpu-report
  rm -rf "$bundle"
  mkdir -p "$bundle/bin" "$bundle/lib"
  for f in "$build/bin/ptxbench-evaluator" "$build/bin/ptxbench-gpu-report"; do
    strip --strip-debug -o "$bundle/bin/$(basename "$f")" "$f"
  done
  bundle_copy_libs "$bundle/lib" "$bundle"/bin/*
  du -sh "$bundle"
  exit 0
fi
OUT=${OUT:-/tmp/attn-engine-out}
mkdir -p "$OUT"
# Sandboxed steps run as nobody: a world-readable stage, as scripts/gpu-test makes it.
stage=/tmp/ptxbench-attn-fwd
rm -rf "$stage" && mkdir -p "$stage"
cp -r "$bundle/bin" "$bundle/lib" "$stage/"
cp -r "$root/tasks" "$stage/tasks"
chmod -R a+rX "$stage"
export LD_LIBRARY_PATH="$stage/lib:$(device_cuda_library_path):${LD_LIBRARY_PATH:-}"
export PTXBENCH_EVALUATOR="$stage/bin/ptxbench-evaluator"
export PTXBENCH_SOURCE_DIR="$stage"
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv,noheader
(cd "$stage" && timeout "${TASK_TIMEOUT:-240}" "$stage/bin/ptxbench-gpu-report" \
   --tasks-dir "$stage/tasks" --task mha_with_lse_d128 --task mha_with_lse_d128_causal \
   --extras-task none --out "$OUT/engine_fwd.json") 2>&1 | tee "$OUT/engine_fwd.log"
