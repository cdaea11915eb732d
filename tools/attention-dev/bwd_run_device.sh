#!/usr/bin/env bash
# One device call's worth of checks for the mha_bwd_d128(_causal) sm_90a solutions and decoys.
# Run on the H200 machine from the repository root with .dev-bwd/ carried (cubins, bwd_dev and
# bwd_probe from tools/attention-dev/bwd_build.sh). Writes log.txt and sass.txt under $OUT.
# usage: bash tools/attention-dev/bwd_run_device.sh [quick]   (quick: solutions only)
set -u
OUT=${OUT:-/tmp/bwd-dev-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1
BD=.dev-bwd
SMALL=1x2x128,1x3x384,2x4x1024
TIMED=4x48x4096
run() { echo "\$ bwd_dev $*"; timeout "${TMO:-120}" $BD/bwd_dev "$@"; echo "rc=$?"; }

echo "== machine"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv
echo "== wgmma operand-form probe"
timeout 30 $BD/bwd_probe; echo "rc=$?"

echo "== SASS census"
for c in $BD/*.cubin; do
  n=$(basename "$c" .cubin)
  cuobjdump -sass "$c" > "$OUT/sass_$n.txt" 2>&1 || true
  printf '%-56s HGMMA=%-3s UTMALDG=%-3s UBLKCP=%-3s REDG=%-3s\n' "$n" \
    "$(grep -c 'HGMMA' "$OUT/sass_$n.txt")" "$(grep -c 'UTMALDG' "$OUT/sass_$n.txt")" \
    "$(grep -c 'UBLKCP' "$OUT/sass_$n.txt")" "$(grep -c 'RED' "$OUT/sass_$n.txt")"
done
grep -h -B2 'HGMMA' "$OUT"/sass_mha_bwd_d128__decoys__wgmma_never_executed.txt | head -8
grep -h 'HGMMA' "$OUT"/sass_mha_bwd_d128__solutions__sm90a_wgmma_tma.txt | head -3
cat "$OUT"/sass_*.txt > "$OUT/sass.txt" && rm -f "$OUT"/sass_*.txt

echo "== solutions: every task workload (timed: 3 sampled heads checked), timing on the timed one"
for t in mha_bwd_d128:0 mha_bwd_d128_causal:1; do
  task=${t%%:*}; causal=${t##*:}
  run label=$task cubin=$BD/${task}__solutions__sm90a_wgmma_tma.cubin causal=$causal shapes=$SMALL
  run label=$task cubin=$BD/${task}__solutions__sm90a_wgmma_tma.cubin causal=$causal shapes=$TIMED iters=5
done
[ "${1:-}" = quick ] && exit 0

echo "== decoys"
for t in mha_bwd_d128:0 mha_bwd_d128_causal:1; do
  task=${t%%:*}; causal=${t##*:}
  for d in wrong_no_delta wrong_dk_unscaled wrong_no_causal_mask; do
    [ -e $BD/${task}__decoys__$d.cubin ] || continue
    run label=$task/$d cubin=$BD/${task}__decoys__$d.cubin causal=$causal shapes=$SMALL
  done
  run label=$task/wgmma_never_executed cubin=$BD/${task}__decoys__wgmma_never_executed.cubin \
    causal=$causal swizzle=none block=256 smem=199696 shapes=$SMALL
  run label=$task/wgmma_never_executed cubin=$BD/${task}__decoys__wgmma_never_executed.cubin \
    causal=$causal swizzle=none block=256 smem=199696 shapes=$TIMED iters=1
done

echo "== memcheck (small shapes)"
for t in mha_bwd_d128:0 mha_bwd_d128_causal:1; do
  task=${t%%:*}; causal=${t##*:}
  timeout 120 compute-sanitizer --tool memcheck $BD/bwd_dev label=$task \
    cubin=$BD/${task}__solutions__sm90a_wgmma_tma.cubin causal=$causal shapes=1x2x128,1x3x384 2>&1 | tail -4
done
echo "== done"
