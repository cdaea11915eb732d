#!/usr/bin/env bash
# One device call's worth of checks for the mha_with_lse_d128(_causal) sm_90a solutions and
# decoys. Run on the H200 from the repository root with .dev-fwd/ carried (built by
# tools/attention-dev/fwd_build.sh). Writes its log under $OUT.
# usage: fwd_run_device.sh          SASS census, correctness against the fp32 reference on every
#                                   task workload, timing, memcheck, cuDNN timing through torch
#        fwd_run_device.sh cudnn    correctness against cuDNN's own O and LSE (the engine's
#                                   reference) on every workload, timing again
set -u
OUT=${OUT:-/tmp/attn-fwd-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/fwd_log.txt") 2>&1
D=.dev-fwd
DEV=$D/attn_fwd_dev
echo "== machine"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv
echo "== SASS census"
for c in $D/*.cubin; do
  n=$(basename "$c" .cubin)
  cuobjdump -sass "$c" > "$OUT/sass_$n.txt" 2>&1
  printf '%-52s HGMMA=%-3s HMMA=%-4s UTMALDG=%-3s LDSM=%-3s MUFU.EX2=%-4s\n' "$n" \
    "$(grep -c HGMMA "$OUT/sass_$n.txt")" "$(grep -c ' HMMA' "$OUT/sass_$n.txt")" \
    "$(grep -c UTMALDG "$OUT/sass_$n.txt")" "$(grep -c LDSM "$OUT/sass_$n.txt")" \
    "$(grep -c 'MUFU.EX2' "$OUT/sass_$n.txt")"
done
tar czf "$OUT/sass.tgz" -C "$OUT" $(cd "$OUT" && ls sass_*.txt) && rm -f "$OUT"/sass_*.txt
SOL="128:384:230480:128"
DEC="64:128:82968:64"
SHAPES=1x2x128,1x3x384,2x4x1024,4x48x4096
run() { echo "\$ attn_fwd_dev $*"; timeout "${TMO:-60}" $DEV "$@"; echo "rc=$?"; }
if [ "${1:-}" = cudnn ]; then
  # Second call: the engine compares with cuDNN's output, not with an fp32 reference; check the
  # solutions (and the decoy that must pass the comparison) against cuDNN's O and LSE.
  echo "== cuDNN outputs as the reference (torch's cuDNN SDPA with its LSE output)"
  timeout 90 python3 tools/attention-dev/fwd_cudnn_ref.py /tmp/cudnn_ref $SHAPES 0,1
  for m in 0 1; do
    t=$([ $m = 0 ] && echo fwd || echo causal)
    run causal=$m shapes=$SHAPES trials=1 time_iters=20 cudnn_dir=/tmp/cudnn_ref \
      cand=solution:$D/${t}_solutions_sm90a_fa_wgmma_tma.cubin:$SOL \
      cand=decoy_wgmma_branch_never_taken:$D/${t}_decoys_wgmma_branch_never_taken.cubin:$DEC
  done
  nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader
  echo "== done"
  exit 0
fi
echo "== non-causal"
run causal=0 shapes=$SHAPES trials=2 time_iters=20 \
  cand=solution:$D/fwd_solutions_sm90a_fa_wgmma_tma.cubin:$SOL \
  cand=decoy_lse_log2_base:$D/fwd_decoys_lse_log2_base.cubin:$DEC \
  cand=decoy_wgmma_branch_never_taken:$D/fwd_decoys_wgmma_branch_never_taken.cubin:$DEC
echo "== causal"
run causal=1 shapes=$SHAPES trials=2 time_iters=20 \
  cand=solution:$D/causal_solutions_sm90a_fa_wgmma_tma.cubin:$SOL \
  cand=decoy_lse_log2_base:$D/causal_decoys_lse_log2_base.cubin:$DEC \
  cand=decoy_wgmma_branch_never_taken:$D/causal_decoys_wgmma_branch_never_taken.cubin:$DEC \
  cand=decoy_causal_without_mask:$D/causal_decoys_causal_without_mask.cubin:$DEC
echo "== compute-sanitizer memcheck (solutions, small shapes)"
for m in 0 1; do
  f=$([ $m = 0 ] && echo fwd || echo causal)_solutions_sm90a_fa_wgmma_tma.cubin
  timeout 60 compute-sanitizer --tool memcheck $DEV causal=$m shapes=1x2x128,1x3x384 trials=1 \
    cand=solution:$D/$f:$SOL 2>&1 | tail -4
done
echo "== cuDNN through torch"
PY=python3  # the image's python3 holds torch (KINDS.md)
timeout 60 $PY tools/attention-dev/fwd_cudnn_time.py 20
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv,noheader
echo "== done"
