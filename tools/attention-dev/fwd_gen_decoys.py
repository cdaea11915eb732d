#!/usr/bin/env python3
"""Writes the sm_90a decoys of mha_with_lse_d128 and mha_with_lse_d128_causal: those of
fwd_decoy_base.cu.in (one mma.sync FlashAttention-2 kernel; each decoy differs in one place) and
the tolerance-margin decoys, each its task's own wgmma reference solution
(solutions/sm90a_fa_wgmma_tma.cu) with exact substitutions (each must apply exactly once), so that
only the correctness check can tell them from the solution.
Run from anywhere; rewrites the decoy files in place. A dev tool, not part of the product build.
With --check it writes nothing and exits 1 when a decoy differs from what it would write (CI runs
this: tests/tools, task_variants_in_sync).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from decoy_snippets import ROUND_TO_E4M3  # noqa: E402  (one copy of the spliced helper)

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

# ---- Decoys derived from the wgmma reference solution (tolerance margins, issue 11) ----
# The sm_90a solution of each forward task, with substitutions (old, new); each must occur exactly
# once. The simulated figures in the notes: docs/task-authoring.md, "Attack and margin decoys".

SIGNATURE = ("""__device__ __forceinline__ void SoftmaxStep(float (&s)[64], float sl2, float (&m)[2], float (&l)[2],
                                            float (&correction)[2], int query0, int key0) {""",
             """__device__ __forceinline__ void SoftmaxStep(float (&s)[64], float sl2, float (&m)[2], float (&l)[2],
                                            float (&correction)[2], int query0, int key0,
                                            int key_limit) {""")
MASK_TEST = ("""        if (key > query) s[4 * j + e] = -__int_as_float(0x7f800000);""",
             """        // THE DEFECT: keys at or after key_limit are hidden too.
        if ((kCausal && key > query) || key >= key_limit) {
          s[4 * j + e] = -__int_as_float(0x7f800000);
        }""")


def skip_keys(divisor):
    return [SIGNATURE, MASK_TEST,
            ("  const int num_kv_blocks = kCausal ? q_tile + 1 : S / kBlockN;",
             f"""  // THE DEFECT: the last S / {divisor} keys of the head are dropped: key blocks past key_limit
  // are never loaded, and the last block is masked at key_limit.
  const int key_limit = S - S / {divisor};
  const int num_kv_blocks =
      min(kCausal ? q_tile + 1 : S / kBlockN, (key_limit + kBlockN - 1) / kBlockN);"""),
            ("    if (kCausal && num_kv_blocks == 1) {", "    if (num_kv_blocks == 1) {"),
            ("      SoftmaxStep<true>(s, sl2, m, l, correction, query0, 0);",
             "      SoftmaxStep<true>(s, sl2, m, l, correction, query0, 0, key_limit);"),
            ("      SoftmaxStep<false>(s, sl2, m, l, correction, query0, 0);",
             "      SoftmaxStep<false>(s, sl2, m, l, correction, query0, 0, key_limit);"),
            ("      if (kCausal && next == num_kv_blocks - 1) {", "      if (next == num_kv_blocks - 1) {"),
            ("        SoftmaxStep<true>(s, sl2, m, l, correction, query0, next * kBlockN);",
             "        SoftmaxStep<true>(s, sl2, m, l, correction, query0, next * kBlockN, key_limit);"),
            ("        SoftmaxStep<false>(s, sl2, m, l, correction, query0, next * kBlockN);",
             "        SoftmaxStep<false>(s, sl2, m, l, correction, query0, next * kBlockN, key_limit);")]


NULL_O = [("      const float inv = 1.0f / l[h];\n", ""),
          ("""        *reinterpret_cast<u32*>(o_row + 8 * j + 2 * (lane % 4)) =
            sm90::pack_bf16x2(o[4 * j + 2 * h] * inv, o[4 * j + 2 * h + 1] * inv);""",
           """        // THE DEFECT: O is written as zeros (P V is computed and thrown away; LSE is right).
        *reinterpret_cast<u32*>(o_row + 8 * j + 2 * (lane % 4)) = 0u;""")]
LSE_CONSTANT = [("constexpr float kLn2 = 0.6931471805599453f;\n", ""),
                ("      if (lane % 4 == 0) LSE[row] = (m[h] + __log2f(l[h])) * kLn2;",
                 """      // THE DEFECT: LSE is not computed but guessed from the shape alone: ln(visible keys) + 1/2,
      // its expectation for N(0, 1) inputs (E exp(s) = e^(1/2) for s ~ N(0, 1)). O is right.
      const int visible = kCausal ? query0 + 8 * h + 1 : S;
      if (lane % 4 == 0) LSE[row] = logf(static_cast<float>(visible)) + 0.5f;""")]
P_FP8 = [("""// bf16 A fragments of P for the RS wgmma:""",
          """// THE DEFECT: P is rounded to fp8 e4m3 before P V, as an fp8 P V (QGMMA) would use it: scaled by
// 256 into e4m3's normal range (P <= 1; e4m3 normals start at 2^-6), rounded to nearest (3
// mantissa bits), scaled back (exact in bf16). The row sums l keep the unrounded P.
""" + ROUND_TO_E4M3 + """
// bf16 A fragments of P for the RS wgmma:"""),
         ("  for (int i = 0; i < 32; ++i) p[i] = sm90::pack_bf16x2(s[2 * i], s[2 * i + 1]);",
          """  for (int i = 0; i < 32; ++i) {
    p[i] = sm90::pack_bf16x2(RoundToE4m3(s[2 * i]), RoundToE4m3(s[2 * i + 1]));
  }""")]

# (file, expect, {task: (what, why)} or one (what, why) for both, substitutions)
SOLUTION_DECOYS = [
    ("skip_keys_10pct.cu", "wrong_result",
     ["drops the last S/10 keys of every head (key blocks past S - S/10 never loaded,",
      "the last one masked): 10 % of the keys."],
     {"mha_with_lse_d128": ["simulated on the timed shape: 23 % of the O elements and 79 % of the",
                            "LSE rows fail all-close 1e-2 / 1e-2 (O relative norm 0.35)."],
      "mha_with_lse_d128_causal": ["only queries past S - S/10 lose keys; simulated, 11 % of their O",
                                   "elements fail all-close (about a million on the timed workload)."]},
     skip_keys(10)),
    ("skip_keys_1pct.cu", "wrong_result",
     ["drops the last S/100 keys of every head (the last key block masked at",
      "S - S/100), 1 % of the keys."],
     {"mha_with_lse_d128": ["O's typical magnitude is ~0.025, so all-close's atol 1e-2 is 40 % of it;",
                            "still, simulated on the timed shape, 0.4 % of the O elements fail (O relative",
                            "norm 0.10: the dropped keys carry 10 % of O's norm); LSE moves by ~0.01,",
                            "inside rtol 1e-2 of ~8.8, so LSE alone would pass."],
      "mha_with_lse_d128_causal": ["only queries past S - S/100 lose keys, each at most 1 %: simulated,",
                                   "no O element of the timed workload fails all-close; the small",
                                   "workloads catch it (odd_blocks ~39, medium ~72 failing elements per",
                                   "trial). A rule that only sampled the timed shape would pass it."]},
     skip_keys(100)),
    ("null_o_zeros.cu", "wrong_result",
     ["a null O: every element of O is written as 0 (P V still runs and is thrown",
      "away); LSE is the correct log-sum-exp."],
     {"mha_with_lse_d128": ["|O| is about 0.02 (sqrt(e / S)) but above atol 1e-2 for most elements:",
                            "simulated, 67 % of the O elements fail all-close."],
      "mha_with_lse_d128_causal": ["|O| is about 0.02-0.05, above atol 1e-2 for most elements: simulated,",
                                   "79 % of the O elements fail all-close."]},
     NULL_O),
    ("lse_constant.cu", "wrong_result",
     ["O correct, LSE a data-independent guess: ln(number of visible keys) + 1/2,",
      "its expected value for N(0, 1) inputs (the strongest constant)."],
     {"mha_with_lse_d128": ["a row's LSE depends on |q|^2 (spread ~0.06) and on the keys; rtol 1e-2",
                            "of ~8.8 allows 0.088: simulated, 12.5 % of the rows fail."],
      "mha_with_lse_d128_causal": ["rows with few visible keys vary more: simulated, 28 % of the rows",
                                   "fail all-close."]},
     LSE_CONSTANT),
    ("p_fp8.cu", "wrong_result",
     ["lower precision: P rounded to fp8 e4m3 (scaled by 256) before the P V",
      "wgmma, as a kernel using fp8 for P V would; everything else bf16 / fp32."],
     {"mha_with_lse_d128": ["it is not the task's computation (cuDNN keeps P in bf16), and its O",
                            "relative norm error is 0.027 against cuDNN's own 0.0017-0.0022. But the",
                            "absolute error (~1e-3) is far inside atol 1e-2: simulated, no element",
                            "fails all-close, so TODAY'S RULE PASSES IT; a relative-norm bound on O",
                            "(e.g. 0.01) would fail it. The expectation states what a sound checker",
                            "must give."],
      "mha_with_lse_d128_causal": ["it is not the task's computation; O relative norm 0.023 against",
                                   "cuDNN's ~0.002, but ~1e-3 absolute: no element fails all-close, so",
                                   "TODAY'S RULE PASSES IT; a relative-norm bound on O (e.g. 0.01)",
                                   "would fail it. The expectation states what a sound checker must",
                                   "give."]},
     P_FP8),
]


def solution_decoy(task, name, expect, what, why, subs):
    solution = open(os.path.join(ROOT, "tasks", task, "solutions", "sm90a_fa_wgmma_tma.cu")).read()
    for old, new in subs:
        count = solution.count(old)
        if count != 1:
            sys.exit(f"fwd_gen_decoys.py: {task} {name}: '{old[:60]}' found {count} times, expected once")
        solution = solution.replace(old, new)
    anchor = f"// Reference solution for {task} on sm_90a"
    if solution.count(anchor) != 1:
        sys.exit(f"fwd_gen_decoys.py: {task}: the solution's first comment line moved")
    header = ([f"// DECOY for {task} (sm_90a), written for PTXBench.",
               f"// Expected verdict: {expect}.",
               "// Generated by tools/attention-dev/fwd_gen_decoys.py from this task's",
               "// solutions/sm90a_fa_wgmma_tma.cu; do not edit.", "//",
               f"// What it does: {what[0]}"] + ["// " + line for line in what[1:]] +
              ["//", f"// Why that verdict: {why[0]}"] + ["// " + line for line in why[1:]] +
              ["//", "// Everything else is the reference solution, whose description follows.", "//"])
    return solution.replace(anchor, "\n".join(header) + "\n" + anchor)


STALE = []
OUTPUTS = []
for name, expect, what, whys, subs in SOLUTION_DECOYS:
    for task in ("mha_with_lse_d128", "mha_with_lse_d128_causal"):
        OUTPUTS.append((os.path.join(ROOT, "tasks", task, "decoys", name),
                        solution_decoy(task, name, expect, what, whys[task], subs)))
for task, name, expect, causal, what, mask, lse, wgmma in DECOYS:
    text = (BASE.replace("@TASK@", task).replace("@EXPECT@", expect)
            .replace("@CAUSAL@", "true" if causal else "false").replace("@WHAT@", what)
            .replace("@MASK_BLOCK@", mask).replace("@LSE_STORE@", lse)
            .replace("@WGMMA_BLOCK@\n", wgmma + "\n" if wgmma else ""))
    assert "@" not in text.replace("@TASK@", ""), name
    OUTPUTS.append((os.path.join(ROOT, "tasks", task, "decoys", name), text))

for path, text in OUTPUTS:
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
