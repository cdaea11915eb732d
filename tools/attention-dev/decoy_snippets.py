"""Device code that several decoy generators splice into their decoys, written once.

The generators (fwd_gen_decoys.py, fwd_gen_headdim.py, bwd_gen_variants.py,
gqa_decode_gen_decoys.py) each derive decoys from a task's solution; a helper that more than one
of them inserts is kept here, so that a fix reaches every decoy that carries it (each generator's
--check, run by CI, then shows which committed decoys must be regenerated).
"""

# P rounded to fp8 e4m3 as an fp8 P V would take it: scaled by 256 into e4m3's normal range
# (P <= 1; e4m3 normals start at 2^-6), rounded to nearest, scaled back (exact in bf16). The
# comment above it is each decoy's own: it says what that decoy does with it.
ROUND_TO_E4M3 = """__device__ __forceinline__ float RoundToE4m3(float p) {
  unsigned short pair;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(pair) : "f"(0.0f), "f"(p * 256.0f));
  u32 halves;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(halves) : "h"(pair));
  float value;
  asm("cvt.f32.f16 %0, %1;" : "=f"(value) : "h"(static_cast<unsigned short>(halves & 0xFFFFu)));
  return value * (1.0f / 256.0f);
}
"""
