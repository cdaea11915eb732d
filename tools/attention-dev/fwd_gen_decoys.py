#!/usr/bin/env python3
"""Writes the sm_90a decoys of mha_with_lse_d128 and mha_with_lse_d128_causal from
fwd_decoy_base.cu.in (one mma.sync FlashAttention-2 kernel; each decoy differs in one place).
Run from anywhere; rewrites the decoy files in place. A dev tool, not part of the product build.
With --check it writes nothing and exits 1 when a decoy differs from what it would write (CI runs
this: tests/tools, task_variants_in_sync).
"""
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
BASE = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "fwd_decoy_base.cu.in")).read()

MASK = """    if (kCausal && j == num_kv_blocks - 1) {
      // Diagonal block: key 64j + column is hidden from query query0 + row when greater.
#pragma unroll
      for (int n = 0; n < 8; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = j * kBlockN + 8 * n + 2 * (lane % 4) + (e & 1);
          if (key > query0 + (e >> 1) * 8) sc[n][e] = -__int_as_float(0x7f800000);
        }
      }
    }"""
NO_MASK = """    // THE DEFECT: fully masked key blocks are skipped, but the diagonal block is not masked, so
    // each query also attends to the up to 63 later keys of its own 64-key block."""
LSE_NATURAL = "    if (lane % 4 == 0) LSE[row] = (m[h] + __log2f(l[h])) * kLn2;"
LSE_LOG2 = """    // THE DEFECT: the log-sum-exp in base 2 (m and log2 l are in log2 units), not the natural
    // log the task asks for: every LSE is 1/ln(2) = 1.4427 times too large. O is correct.
    if (lane % 4 == 0) LSE[row] = m[h] + __log2f(l[h]);"""
WGMMA = """  if (S < 0) {
    // THE DEFECT: never taken (S >= 128 in every workload), so the wgmma below is in the SASS but
    // never executes; all the work is done by mma.sync. The branch condition depends on a
    // kernel argument, so the compiler cannot remove it.
    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
    sm90::mbarrier_wait_parity(q_full, 0);
    sm90::wgmma_fence();
    sm90::wgmma_m64n128k16_ss_bf16_t<0, 0>(acc, sm90::make_smem_desc_sw128(q_tile_addr),
                                           sm90::make_smem_desc_sw128(q_tile_addr), 0);
    sm90::wgmma_commit_group();
    sm90::wgmma_wait_group<0>();
    sm90::wgmma_fence_operand(acc);
#pragma unroll
    for (int i = 0; i < 64; ++i) O[threadIdx.x * 64 + i] = static_cast<unsigned short>(acc[i]);
    return;
  }"""

DECOYS = [
    # (task, file, expect, causal, what, mask, lse, wgmma)
    ("mha_with_lse_d128", "lse_log2_base.cu", "wrong_result", False,
     "The defect: LSE is written as a base-2 log-sum-exp (m2 + log2 l) instead of the natural\n"
     "// log; O is correct. This is the contract's \"wrong LSE base\" decoy.",
     MASK, LSE_LOG2, ""),
    ("mha_with_lse_d128", "wgmma_branch_never_taken.cu", "target_not_executed", False,
     "The defect: correct O and LSE via TMA + mma.sync; a wgmma sits in the SASS behind a branch\n"
     "// that is never taken (S < 0), so the wgmma target family is present but never executed.",
     MASK, LSE_NATURAL, WGMMA),
    ("mha_with_lse_d128_causal", "lse_log2_base.cu", "wrong_result", True,
     "The defect: LSE is written as a base-2 log-sum-exp (m2 + log2 l) instead of the natural\n"
     "// log; O is correct (causal mask applied). The contract's \"wrong LSE base\" decoy.",
     MASK, LSE_LOG2, ""),
    ("mha_with_lse_d128_causal", "wgmma_branch_never_taken.cu", "target_not_executed", True,
     "The defect: correct causal O and LSE via TMA + mma.sync; a wgmma sits in the SASS behind a\n"
     "// branch that is never taken (S < 0): present, never executed.",
     MASK, LSE_NATURAL, WGMMA),
    ("mha_with_lse_d128_causal", "causal_without_mask.cu", "wrong_result", True,
     "The defect: causal attention computed without the mask on the diagonal blocks (blocks\n"
     "// entirely above the diagonal are skipped, so the work and the time look causal).",
     NO_MASK, LSE_NATURAL, ""),
]

STALE = []
for task, name, expect, causal, what, mask, lse, wgmma in DECOYS:
    text = (BASE.replace("@TASK@", task).replace("@EXPECT@", expect)
            .replace("@CAUSAL@", "true" if causal else "false").replace("@WHAT@", what)
            .replace("@MASK_BLOCK@", mask).replace("@LSE_STORE@", lse)
            .replace("@WGMMA_BLOCK@\n", wgmma + "\n" if wgmma else ""))
    assert "@" not in text.replace("@TASK@", ""), name
    path = os.path.join(ROOT, "tasks", task, "decoys", name)
    if "--check" in sys.argv[1:]:
        if not os.path.exists(path) or open(path).read() != text:
            STALE.append(os.path.relpath(path, ROOT))
        continue
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as out:
        out.write(text)
    print(path)

if STALE:
    sys.exit("not what fwd_gen_decoys.py writes (edit fwd_decoy_base.cu.in, then run it): "
             + ", ".join(STALE))
