#!/usr/bin/env python3
"""Writes the sm_90a decoys of mha_fp8_with_lse_d128: each is the task's reference solution
(solutions/sm90a_fp8_fa_wgmma_tma.cu) with exact substitutions (each must apply exactly once), so
that only the check it was written for can tell it from the solution.
Run from anywhere; rewrites the decoy files in place. A dev tool, not part of the product build.
With --check it writes nothing and exits 1 when a decoy differs from what it would write (CI runs
this: tests/tools, fp8_attention_decoys_in_sync). --list prints "file expect" per decoy.

The figures in the notes come from tools/attention-dev/fp8_fwd_margin_sim.cc (an fp64 model of
each decoy against the task's rule, with the library modelled as an fp8 P V of its own) and, where
it can run them, the CPU emulator (tools/blackwell-check/emulate.sh --fp8-attention-decoys).
"""
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
TASK = "mha_fp8_with_lse_d128"
SOLUTION = os.path.join(ROOT, "tasks", TASK, "solutions", "sm90a_fp8_fa_wgmma_tma.cu")

SL2 = "    const float sl2 = scale * (*descale_q) * (*descale_k) * kLog2e;"
OUT_SCALE = "    const float out_scale = *descale_v;"
LSE_STORE = "      if (lane % 4 == 0) LSE[row] = (m[h] + __log2f(l[h]) - kPScaleLog2) * kLn2;"

DESCALE_IGNORED = [
    (SL2, """    // THE DEFECT: the descales are not applied (the e4m3 values taken as the real ones).
    const float sl2 = scale * kLog2e;"""),
    (OUT_SCALE, "    const float out_scale = 1.0f;")]
DESCALE_V_TWICE = [(OUT_SCALE, """    // THE DEFECT: descale_v applied twice (once per operand of a product it belongs to once).
    const float out_scale = (*descale_v) * (*descale_v);""")]
DESCALE_Q_ONLY = [(SL2, """    // THE DEFECT: only descale_q scales the logits; descale_k is left out.
    const float sl2 = scale * (*descale_q) * kLog2e;""")]
DESCALE_HARDCODED = [
    (SL2, """    // THE DEFECT: the descales hard-coded to 2^-6 (a typical value) instead of read.
    const float sl2 = scale * 0.015625f * 0.015625f * kLog2e;"""),
    (OUT_SCALE, "    const float out_scale = 0.015625f;")]
LSE_LOG2 = [(LSE_STORE, """      // THE DEFECT: the log-sum-exp in base 2 (m and log2 l are in log2 units), not the natural
      // log the task asks for: every LSE is 1/ln(2) = 1.4427 times too large. O is correct.
      if (lane % 4 == 0) LSE[row] = m[h] + __log2f(l[h]) - kPScaleLog2;""")]
LOGITS_IGNORED = [(SL2, """    // THE DEFECT: the logits are never used (every probability equal): O is the mean of the
    // head's V rows times descale_v, LSE = ln(S). Both GEMMs still run on the tensor cores.
    const float sl2 = 0.0f * scale * (*descale_q) * (*descale_k);""")]
P_UNSCALED = [("constexpr float kPScaleLog2 = 8.0f;  // P is rounded to e4m3 as 256 P",
               """// THE DEFECT: P (<= 1) goes into e4m3 unscaled: e4m3 normals start at 2^-6, so the
// probabilities below 2^-6 keep 1-2 bits (subnormals, spacing 2^-9) and those below 2^-10 become 0.
constexpr float kPScaleLog2 = 0.0f;""")]
P_E5M2 = [
    ("""      "cvt.rn.satfinite.e4m3x2.f32 lo, %2, %1;\\n\\t"
      "cvt.rn.satfinite.e4m3x2.f32 hi, %4, %3;\\n\\t\"""",
     """      "cvt.rn.satfinite.e5m2x2.f32 lo, %2, %1;\\n\\t"
      "cvt.rn.satfinite.e5m2x2.f32 hi, %4, %3;\\n\\t\""""),
    ("""      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "{%64, %65, %66, %67}, %68, p, 1, 1;\\n\\t}\"""",
     """      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e5m2.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "{%64, %65, %66, %67}, %68, p, 1, 1;\\n\\t}\""""),
    ("""// Four floats rounded to e4m3 (nearest even, saturating to +-448) in one register, x0 in the
// low byte.""",
     """// THE DEFECT: P is rounded to e5m2 (2 mantissa bits), not e4m3 (3), and the P V wgmma reads A
// as e5m2 (.e5m2.e4m3): a quarter-coarser P than the task allows.
// Four floats rounded to e5m2 (nearest even, saturating) in one register, x0 in the
// low byte.""")]


def skip_keys(divisor):
    return [
        ("""__device__ __forceinline__ void SoftmaxStep(float (&s)[64], float sl2, float (&m)[2], float (&l)[2],
                                            float (&correction)[2]) {""",
         f"""__device__ __forceinline__ void SoftmaxStep(float (&s)[64], float sl2, float (&m)[2], float (&l)[2],
                                            float (&correction)[2], int key0, int key_limit) {{
  // THE DEFECT: keys at or after key_limit (S - S/{divisor}) are hidden.
  const int lane = sm90::lane_index();
#pragma unroll
  for (int j = 0; j < 16; ++j) {{
#pragma unroll
    for (int e = 0; e < 4; ++e) {{
      if (key0 + 8 * j + 2 * (lane % 4) + (e & 1) >= key_limit) {{
        s[4 * j + e] = -__int_as_float(0x7f800000);
      }}
    }}
  }}"""),
        ("  const int num_kv_blocks = S / kBlockN;",
         f"""  // THE DEFECT: the last S / {divisor} keys of the head are dropped: key blocks past key_limit
  // are never loaded, and the last block is masked at key_limit.
  const int key_limit = S - S / {divisor};
  const int num_kv_blocks = (key_limit + kBlockN - 1) / kBlockN;"""),
        ("""    SoftmaxStep(s, sl2, m, l, correction);
    ConvertP(s, p);

    // Steady state""",
         """    SoftmaxStep(s, sl2, m, l, correction, 0, key_limit);
    ConvertP(s, p);

    // Steady state"""),
        ("""      SoftmaxStep(s, sl2, m, l, correction);
      sm90::wgmma_wait_group<0>();""",
         """      SoftmaxStep(s, sl2, m, l, correction, next * kBlockN, key_limit);
      sm90::wgmma_wait_group<0>();""")]


# P V (and, for no_wgmma, S = Q K^T too) by warp-level mma.sync instead of wgmma, from the same
# shared-memory tiles and register fragments; the results land in the accumulator layout the rest
# of the solution expects (an m16n8 accumulator is one column block of the m64nN one, per warp).
MMA_SYNC_COMMON = """
// ---- mma.sync products of this decoy ----
// 4 bytes at (row, byte) of a 128B-swizzled tile of 128-byte rows starting 1024-byte aligned
// (4 consecutive bytes never cross a 16-byte chunk when byte % 4 == 0).
__device__ __forceinline__ u32 TileWord(const unsigned char* tile, int row, int byte) {
  return *reinterpret_cast<const u32*>(tile + row * 128 + (((byte / 16) ^ (row % 8)) * 16) +
                                       byte % 16);
}
"""
FP8_MMA_SYNC = """
// D[16x8] (fp32) += A[16x32] * B[32x8], e4m3 (legacy tensor cores; sm_89+). Fragments: a[0] row
// g = lane/4, k 4c..4c+3 (c = lane%4); a[1] row g+8; a[2], a[3] the same with k+16; b[0] k
// 4c..4c+3 of column g, b[1] k+16; d[0..1] row g, columns 2c, 2c+1; d[2..3] row g+8.
__device__ __forceinline__ void mma_m16n8k32_e4m3(float (&d)[4], const u32 (&a)[4],
                                                  const u32 (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// pv (accumulator layout) = P (e4m3 fragments p, keys in V^T's packed order) * V (the packed V^T
// tile): the RS wgmma's A fragments are, per warp, the m16n8k32 A fragments.
__device__ __forceinline__ void PVOnMmaSync(float (&pv)[64], const u32 (&p)[16],
                                            const unsigned char* v_tile) {
  const int lane = sm90::lane_index();
#pragma unroll
  for (int i = 0; i < 64; ++i) pv[i] = 0.0f;
#pragma unroll
  for (int t = 0; t < kBlockN / 32; ++t) {
    const u32(&a)[4] = *reinterpret_cast<const u32(*)[4]>(&p[4 * t]);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int d = 8 * j + lane / 4;
      const u32 b[2] = {TileWord(v_tile, d, 32 * t + 4 * (lane % 4)),
                        TileWord(v_tile, d, 32 * t + 16 + 4 * (lane % 4))};
      mma_m16n8k32_e4m3(*reinterpret_cast<float(*)[4]>(&pv[4 * j]), a, b);
    }
  }
}
"""
QK_MMA_SYNC = """
// s (accumulator layout) = Q (this warpgroup's 64 rows of the Q tile) * K^T (the K tile).
__device__ __forceinline__ void QKOnMmaSync(float (&s)[64], const unsigned char* q_rows,
                                            const unsigned char* k_tile) {
  const int lane = sm90::lane_index();
  const int row = (sm90::thread_index_in_warpgroup() / 32) * 16 + lane / 4;
  const int c4 = 4 * (lane % 4);
#pragma unroll
  for (int i = 0; i < 64; ++i) s[i] = 0.0f;
#pragma unroll
  for (int t = 0; t < kHeadDim / 32; ++t) {
    const u32 a[4] = {TileWord(q_rows, row, 32 * t + c4), TileWord(q_rows, row + 8, 32 * t + c4),
                      TileWord(q_rows, row, 32 * t + 16 + c4),
                      TileWord(q_rows, row + 8, 32 * t + 16 + c4)};
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int key = 8 * j + lane / 4;
      const u32 b[2] = {TileWord(k_tile, key, 32 * t + c4), TileWord(k_tile, key, 32 * t + 16 + c4)};
      mma_m16n8k32_e4m3(*reinterpret_cast<float(*)[4]>(&s[4 * j]), a, b);
    }
  }
}
"""
BF16_MMA_SYNC = """
// D[16x8] (fp32) += A[16x16] * B[16x8], bf16 (legacy tensor cores). Fragments: a[0] row g =
// lane/4, k 2c, 2c+1 (c = lane%4, low half the lower k); a[1] row g+8; a[2], a[3] the same with
// k+8; b[0] k 2c, 2c+1 of column g, b[1] k+8; d as for the fp8 form.
__device__ __forceinline__ void mma_m16n8k16_bf16(float (&d)[4], const u32 (&a)[4],
                                                  const u32 (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// e4m3 -> bf16 bits, exact (sign, 4-bit exponent of bias 7, 3-bit mantissa; no NaN in the data).
__device__ __forceinline__ u32 E4m3ToBf16Bits(u32 bits) {
  const float magnitude = (bits & 0x78u) == 0u
                              ? static_cast<float>(bits & 7u) * (1.0f / 512.0f)
                              : __uint_as_float((((bits >> 3) & 15u) + 120u) << 23 | (bits & 7u) << 20);
  return __float_as_uint((bits & 0x80u) != 0u ? -magnitude : magnitude) >> 16;
}

// The position of key k (0..31) of a 32-key group in the packed V^T rows (KeyOfPosition's inverse).
__device__ __forceinline__ int PositionOfKey(int k) {
  const int r = k % 16;
  return 16 * (k / 16) + 4 * ((r % 8) / 2) + 2 * (r / 8) + r % 2;
}

// V (e4m3, the packed V^T tile) at (key, column d), widened to bf16.
__device__ __forceinline__ u32 VBf16(const unsigned char* v_tile, int key, int d) {
  const int position = 32 * (key / 32) + PositionOfKey(key % 32);
  return E4m3ToBf16Bits(v_tile[d * 128 + (((position / 16) ^ (d % 8)) * 16) + position % 16]);
}

// pv (accumulator layout) = P (fp32 accumulator layout, rounded to bf16 here) * V widened to bf16,
// 8 k-steps of 16 keys in the natural order (the bf16 kernel's P fragments).
__device__ __forceinline__ void PVOnBf16MmaSync(float (&pv)[64], const float (&s)[64],
                                                const unsigned char* v_tile) {
  const int lane = sm90::lane_index();
  const int c2 = 2 * (lane % 4);
#pragma unroll
  for (int i = 0; i < 64; ++i) pv[i] = 0.0f;
#pragma unroll
  for (int u = 0; u < kBlockN / 16; ++u) {
    const u32 a[4] = {sm90::pack_bf16x2(s[8 * u + 0], s[8 * u + 1]),
                      sm90::pack_bf16x2(s[8 * u + 2], s[8 * u + 3]),
                      sm90::pack_bf16x2(s[8 * u + 4], s[8 * u + 5]),
                      sm90::pack_bf16x2(s[8 * u + 6], s[8 * u + 7])};
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int d = 8 * j + lane / 4;
      const int key = 16 * u + c2;
      const u32 b[2] = {VBf16(v_tile, key, d) | VBf16(v_tile, key + 1, d) << 16,
                        VBf16(v_tile, key + 8, d) | VBf16(v_tile, key + 9, d) << 16};
      mma_m16n8k16_bf16(*reinterpret_cast<float(*)[4]>(&pv[4 * j]), a, b);
    }
  }
}
"""

PV_ISSUE_LOOP = ("""      sm90::mbarrier_wait_parity(&v_full[stage], (j / kStages) & 1);
      IssuePV(pv, p, v_base + stage * kTileBytes);
      sm90::wgmma_commit_group();
      // Groups complete""", """      sm90::mbarrier_wait_parity(&v_full[stage], (j / kStages) & 1);
      // THE DEFECT: P V by mma.sync (@KIND@), not wgmma.
      @CALL@
      sm90::wgmma_commit_group();
      // Groups complete""")
PV_ISSUE_LAST = ("""      sm90::mbarrier_wait_parity(&v_full[stage], (j / kStages) & 1);
      IssuePV(pv, p, v_base + stage * kTileBytes);
      sm90::wgmma_commit_group();
      sm90::wgmma_wait_group<0>();""", """      sm90::mbarrier_wait_parity(&v_full[stage], (j / kStages) & 1);
      @CALL@
      sm90::wgmma_commit_group();
      sm90::wgmma_wait_group<0>();""")
HELPERS_ANCHOR = "// e4m3 A fragments of 256 P for the RS wgmma:"


def mma_sync_pv(kind):
    """P V by fp8 (e4m3) or bf16 mma.sync; with kind "fp8+qk", S = Q K^T by fp8 mma.sync too."""
    if kind == "bf16":
        call = "PVOnBf16MmaSync(pv, s, smem + kVOffset + stage * kTileBytes);"
        label = "bf16 m16n8k16: P rounded to bf16, V widened exactly"
        helpers = MMA_SYNC_COMMON + BF16_MMA_SYNC
    else:
        call = "PVOnMmaSync(pv, p, smem + kVOffset + stage * kTileBytes);"
        label = "e4m3 m16n8k32, the same fragments and rounding as the solution's"
        helpers = MMA_SYNC_COMMON + FP8_MMA_SYNC + (QK_MMA_SYNC if kind == "fp8+qk" else "")
    subs = [(HELPERS_ANCHOR, helpers.lstrip("\n") + "\n" + HELPERS_ANCHOR),
            (PV_ISSUE_LOOP[0], PV_ISSUE_LOOP[1].replace("@KIND@", label).replace("@CALL@", call)),
            (PV_ISSUE_LAST[0], PV_ISSUE_LAST[1].replace("@CALL@", call))]
    if kind == "bf16":
        # P V of block j reads its probabilities from s, so it runs before the next S is issued
        # into s (the loop's P V slot then issues nothing: an empty wgmma group).
        subs[1] = ("""      sm90::mbarrier_wait_parity(&k_full[next % kStages], (next / kStages) & 1);
      IssueQK(s, q_base, k_base + (next % kStages) * kTileBytes);
      sm90::wgmma_commit_group();
      sm90::mbarrier_wait_parity(&v_full[stage], (j / kStages) & 1);
      IssuePV(pv, p, v_base + stage * kTileBytes);
      sm90::wgmma_commit_group();""",
                   """      sm90::mbarrier_wait_parity(&k_full[next % kStages], (next / kStages) & 1);
      sm90::mbarrier_wait_parity(&v_full[stage], (j / kStages) & 1);
      // THE DEFECT: P V by mma.sync (bf16 m16n8k16: P rounded to bf16, V widened exactly), not
      // wgmma; it reads the block's probabilities from s, so it runs before the next S.
      PVOnBf16MmaSync(pv, s, smem + kVOffset + stage * kTileBytes);
      sm90::wgmma_fence();  // s was read by ordinary code
      IssueQK(s, q_base, k_base + (next % kStages) * kTileBytes);
      sm90::wgmma_commit_group();
      sm90::wgmma_commit_group();""")
    if kind == "fp8+qk":
        subs += [
            ("""    IssueQK(s, q_base, k_base);
    sm90::wgmma_commit_group();""",
             """    // THE DEFECT: S = Q K^T by mma.sync too: no wgmma is ever issued.
    QKOnMmaSync(s, smem + kQOffset + consumer * 64 * 128, smem + kKOffset);
    sm90::wgmma_commit_group();"""),
            ("""      IssueQK(s, q_base, k_base + (next % kStages) * kTileBytes);""",
             """      QKOnMmaSync(s, smem + kQOffset + consumer * 64 * 128,
                  smem + kKOffset + (next % kStages) * kTileBytes);"""),
        ]
    return subs


# (file, expect, what, why, substitutions). The notes in task.json say the same in a line.
DECOYS = [
    ("descale_ignored.cu", "wrong_result",
     ["the descales are ignored: logits scale * Q.K and O = softmax V of the raw e4m3",
      "values."],
     ["O is off by the factor 1/descale_v (8.5-1024 for the task's descales) and the logits",
      "by 1/(descale_q descale_k): relative norm ~10-1000."],
     DESCALE_IGNORED),
    ("descale_v_twice.cu", "wrong_result",
     ["O multiplied by descale_v twice."],
     ["O is descale_v (2^-10..0.117) times too small: O relative norm 0.88-1."],
     DESCALE_V_TWICE),
    ("descale_q_only.cu", "wrong_result",
     ["the logits scaled by descale_q alone (descale_k left out)."],
     ["the logits are 1/descale_k times too large (34-64 with the tensor_descale kind): every",
      "simulated trial fails (fp8_fwd_margin_sim.cc: O relative norm 1.1-28 against the",
      "library, LSE off by ~500x its allowance)."],
     DESCALE_Q_ONLY),
    ("descale_hardcoded.cu", "wrong_result",
     ["the three descales hard-coded to 2^-6 instead of read from their tensors."],
     ["the descales are drawn per trial ((1 + m/8) 2^-6 with the tensor_descale kind); the",
      "result is right only in the trials where all three are exactly 2^-6 (1 in 512):",
      "simulated, every evaluation fails (O relative norm 0.14-0.98)."],
     DESCALE_HARDCODED),
    ("lse_log2_base.cu", "wrong_result",
     ["O correct; LSE written as m + log2(l) (base 2) instead of the natural log."],
     ["every LSE is 1.4427 times the natural-log value (ln S = 4.85-8.3 here), far outside",
      "rtol 1e-2."],
     LSE_LOG2),
    ("logits_ignored.cu", "wrong_result",
     ["a null softmax: every probability equal (O = descale_v * the mean of the head's V",
      "rows, LSE = ln S); both products still run on e4m3 wgmma."],
     ["it ignores Q and K. With the task's fp8_normal / tensor_descale inputs (logits of",
      "O(1)) every simulated trial fails (O relative norm 0.81-1.0). With the block_scale",
      "descales the task first declared (2^-10..0.117 each) the logits were ~0.01 and uniform",
      "attention within 3 % of O: that rule passed it (20 of 20 simulated evaluations)."],
     LOGITS_IGNORED),
    ("skip_keys_1pct.cu", "wrong_result",
     ["drops the last S/100 keys of every head (key blocks past S - S/100 never loaded,",
      "the last one masked)."],
     ["simulated with the task's inputs and rule: O relative norm 0.032-0.18 against the",
      "library (0.06-0.18 on odd_blocks and medium; bound 0.07), the worst 128-row block",
      "0.20-0.28 (bound 0.1), LSE up to 1.6x its all-close allowance: every evaluation fails."],
     skip_keys(100)),
    ("p_unscaled.cu", "pass",
     ["P (<= 1) rounded to e4m3 without a scale, so small probabilities fall into e4m3's",
      "subnormals or to zero."],
     ["the definition allows P in e4m3 with any scale, and the probabilities that lose",
      "bits carry little of O: simulated, within 5 % of the solution's figures (O relative norm",
      "0.003-0.037 against the library, the solution 0.000-0.036; every evaluation passes). A",
      "control: it must get the solution's verdict."],
     P_UNSCALED),
    ("p_e5m2.cu", "target_work_insufficient",
     ["P rounded to e5m2 (2 mantissa bits) and the P V wgmma reading A as e5m2."],
     ["the definition allows P in e4m3 only, and the tolerance cannot tell: on the H100",
      "(2026-12-06, against the bf16-exact reference) its O was 0.052 from the reference, worst",
      "128-row block 0.058 (the solution's 0.026 and 0.030; bounds 0.07 and 0.1), so it passes",
      "correctness. The work share tells: GH100's one fp8 FLOP counter counts both products,",
      "the SASS side credits QGMMA on e4m3 operands only, so the e5m2 P V (half the task's",
      "FLOPs) is other work: wgmma did 0.5 of the task (work_share.cc CreditTaskPrecisionOnly)."],
     P_E5M2),
    ("pv_bf16_mma_sync.cu", "target_work_insufficient",
     ["S = Q K^T on e4m3 wgmma, P V by bf16 mma.sync (legacy tensor cores: P rounded to",
      "bf16, V widened exactly): the right output, more precise than the solution's."],
     ["the fp8 wgmma does half of the task's FLOPs (share of the task ~0.5 < 0.9); the bf16",
      "HMMA work (~0.5 of the task) is other-unit work above the 0.111 bound."],
     mma_sync_pv("bf16")),
    ("pv_fp8_mma_sync.cu", "target_work_insufficient",
     ["S = Q K^T on e4m3 wgmma, P V by e4m3 mma.sync (m16n8k32, the legacy tensor cores'",
      "fp8 form) from the same P fragments and V^T tile: the solution's output, bit for bit",
      "up to accumulation order."],
     ["QGMMA does half of the task's FLOPs (share ~0.5). GH100's fp8 FLOP counter",
      "(sm__ops_path_tensor_src_fp8) also counts fp8 mma.sync, so the timed path counts ~1.0 of",
      "the task while the SASS-side run credits QGMMA sites only (~0.5): TODAY'S CHECKER is",
      "predicted to report that disagreement as profiled_path_differs (judged before the share),",
      "not pass; the sound verdict is target_work_insufficient."],
     mma_sync_pv("fp8")),
    ("no_wgmma.cu", "target_not_executed",
     ["both products by e4m3 mma.sync (m16n8k32) from the TMA-loaded tiles: the right",
      "output, TMA but no wgmma at all (fp8 mma.sync is QMMA-class, not the wgmma family)."],
     ["the wgmma family never executes (TMA does)."],
     mma_sync_pv("fp8+qk")),
]


def decoy_text(name, expect, what, why, subs):
    text = open(SOLUTION).read()
    for old, new in subs:
        count = text.count(old)
        if count != 1:
            sys.exit(f"fp8_fwd_gen_decoys.py: {name}: '{old[:70]}' found {count} times, expected once")
        text = text.replace(old, new)
    anchor = f"// Reference solution for {TASK} on sm_90a"
    if text.count(anchor) != 1:
        sys.exit("fp8_fwd_gen_decoys.py: the solution's first comment line moved")
    header = ([f"// DECOY for {TASK} (sm_90a), written for PTXBench.",
               f"// Expected verdict: {expect}.",
               "// Generated by tools/attention-dev/fp8_fwd_gen_decoys.py from this task's",
               "// solutions/sm90a_fp8_fa_wgmma_tma.cu; do not edit.", "//",
               f"// What it does: {what[0]}"] + ["// " + line for line in what[1:]] +
              ["//", f"// Why that verdict: {why[0]}"] + ["// " + line for line in why[1:]] +
              ["//", "// Everything else is the reference solution, whose description follows.", "//"])
    return text.replace(anchor, "\n".join(header) + "\n" + anchor)


def main():
    if "--list" in sys.argv[1:]:
        for name, expect, _, _, _ in DECOYS:
            print(name, expect)
        return
    stale = []
    for name, expect, what, why, subs in DECOYS:
        path = os.path.join(ROOT, "tasks", TASK, "decoys", name)
        text = decoy_text(name, expect, what, why, subs)
        if "--check" in sys.argv[1:]:
            if not os.path.exists(path) or open(path).read() != text:
                stale.append(os.path.relpath(path, ROOT))
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as out:
            out.write(text)
        print(os.path.relpath(path, ROOT))
    if stale:
        sys.exit("not what fp8_fwd_gen_decoys.py writes (edit the solution or the generator, then "
                 "run it): " + ", ".join(stale))


if __name__ == "__main__":
    main()
