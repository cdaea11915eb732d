// Runs a mha_fp8_with_lse_d128 solution on the CPU emulator: the sm_90a one (ATTN_SM90, the
// default; and, with emulate.sh --fp8-attention-decoys, its decoys) with e4m3 wgmma in both forms
// (SS for S = Q K^T, RS with an 8-bit register A for O += P V), or the sm_100a one (ATTN_SM100)
// with tcgen05.mma .kind::f8f6f4 (e4m3, both operands K-major from shared memory); either way the
// V^T packing launch, TMA boxes of one-byte elements, bulk copies of the packed V^T tiles, the
// descale pointers.
//
// Two comparisons per workload:
// - against a double-precision reference of the task's definition (decoded e4m3 inputs, exact
//   softmax): O relative norm <= 0.05 and LSE allclose 1e-2 / 1e-2, the task's provisional bounds;
//   O's all-close share (atol = rtol = 1e-2) is printed.
// - against a double-precision model of the solution's own roundings (per 128-key block running
//   maximum in log2 units, 256 P rounded to e4m3 to nearest even, exact sums, O rounded to
//   bf16): O relative norm <= 1e-3 (what is left: the rare P or O whose rounding the fp32 kernel
//   and the fp64 model take to different neighbours). This is the strict check of the data paths
//   (fragment layouts, the key permutation of V^T, descriptors): P's e4m3 rounding alone puts the
//   solution ~0.02 from the exact result, enough to hide a partly wrong permutation, but not from
//   its own model.
//
// usage: attention_fp8_fwd MODE B H S DQ DK DV [model] [x64]  (MODE eager|lazy; DQ DK DV the
// descales; "model" adds the model check, which decoys that change the computation skip; "x64"
// draws Q, K, V as e4m3 of N(0, 64^2), as the task's fp8_normal kind, instead of N(0, 1)).
// The launch geometry is the plans' (two launches: the packing grid S/128 x B*H of 256 threads;
// the forward S/128 x B*H of 384 threads on sm_90a, B*H x S/128 of 192 on sm_100a); the dynamic
// shared size comes from the plan (emulate.sh passes -DFP8_FWD_SMEM_BYTES).
#include <cmath>
#include <cstring>

#include "emu_runtime.h"

// CUDA vector types the packing kernel uses.
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }

// The arch's header (emulated), then the source's own inline-PTX wrappers, emulated (make_header.py
// kernel --strip-asm removed their real bodies).
#if defined(ATTN_SM100)
#include "ptxbench_blackwell.cuh"
#else
#include "ptxbench_hopper.cuh"
#endif

namespace fp8emu {

inline float DecodeE4m3(unsigned char bits) {
  const int exponent = (bits >> 3) & 0xF, mantissa = bits & 7;
  if (exponent == 0xF && mantissa == 7) return NAN;
  const float v = exponent == 0 ? std::ldexp(static_cast<float>(mantissa), -9)
                                : std::ldexp(static_cast<float>(mantissa | 8), exponent - 10);
  return (bits & 0x80) ? -v : v;
}

// cvt.rn.satfinite.e4m3x2.f32 on one value: nearest even, |x| > 448 saturates to 448, NaN -> NaN.
inline unsigned char EncodeE4m3(float x) {
  static unsigned char table_init = 0;
  static float table[128];
  if (!table_init) {
    for (int i = 0; i < 128; ++i) table[i] = DecodeE4m3(static_cast<unsigned char>(i));
    table_init = 1;
  }
  if (std::isnan(x)) return 0x7F;
  const unsigned char sign = std::signbit(x) ? 0x80 : 0;
  const double a = std::fabs(static_cast<double>(x));
  if (a >= 448.0) return sign | 0x7E;
  const int e = a < std::ldexp(1.0, -6) ? -6 : std::ilogb(a);
  const double quantum = std::ldexp(1.0, e - 3);
  const double rounded = std::nearbyint(a / quantum) * quantum;  // ties to even
  for (int i = 0; i < 127; ++i) {
    if (static_cast<double>(table[i]) == rounded) return sign | static_cast<unsigned char>(i);
  }
  ::ptxbench_emu::Fail("e4m3 encoding not found", static_cast<long long>(rounded * 1024));
  return 0;
}

}  // namespace fp8emu

namespace {

#if defined(ATTN_SM100)
inline void bulk_load_g2s(void* smem_dst, const void* gmem_src, unsigned bytes,
                          unsigned long long* bar) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  if (bytes % 16 != 0 || dst % 16 != 0 || reinterpret_cast<uintptr_t>(gmem_src) % 16 != 0) {
    ::ptxbench_emu::Fail("cp.async.bulk size or addresses not multiples of 16", dst, bytes);
  }
  ::ptxbench_emu::CheckSmem(dst, bytes);
  std::memcpy(::ptxbench_emu::state().smem + dst, gmem_src, bytes);
  ::ptxbench_emu::MbarrierCompleteTx(bar, bytes);
}
#else
inline void wgmma_m64n128k32_rs_e4m3(float (&d)[64], const unsigned (&a)[4],
                                     unsigned long long desc_b, int scale_d) {
  ::ptxbench::sm90::IssueRs<128>(d, a, desc_b, scale_d, false, ::ptxbench::sm90::WgmmaType::kE4m3);
}

// mma.sync m16n8k32 (e4m3) and m16n8k16 (bf16), for the decoys that use the legacy tensor cores:
// every lane publishes its fragments, then computes its own accumulators from the warp's.
// Fragment layouts as the PTX ISA's mma.m16n8k32 (8-bit) and mma.m16n8k16 (16-bit) figures.
struct MmaSyncFragments {
  unsigned a[4];
  unsigned b[2];
};
inline MmaSyncFragments g_mma_sync[1024];

template <bool kFp8>
inline void MmaSync(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  namespace emu = ::ptxbench_emu;
  const unsigned t = emu::thread_idx.x, warp0 = t / 32 * 32, lane = t % 32;
  for (int i = 0; i < 4; ++i) g_mma_sync[t].a[i] = a[i];
  for (int i = 0; i < 2; ++i) g_mma_sync[t].b[i] = b[i];
  emu::WarpSync();
  const unsigned k_count = kFp8 ? 32 : 16;
  auto a_at = [&](unsigned row, unsigned k) -> float {
    if (kFp8) {
      const unsigned reg = g_mma_sync[warp0 + (row % 8) * 4 + (k % 16) / 4].a[row / 8 + 2 * (k / 16)];
      return fp8emu::DecodeE4m3(static_cast<unsigned char>(reg >> (8 * (k % 4))));
    }
    const unsigned reg = g_mma_sync[warp0 + (row % 8) * 4 + (k % 8) / 2].a[row / 8 + 2 * (k / 8)];
    return __uint_as_float(((k % 2) ? (reg >> 16) : (reg & 0xFFFFu)) << 16);
  };
  auto b_at = [&](unsigned k, unsigned n) -> float {
    if (kFp8) {
      const unsigned reg = g_mma_sync[warp0 + n * 4 + (k % 16) / 4].b[k / 16];
      return fp8emu::DecodeE4m3(static_cast<unsigned char>(reg >> (8 * (k % 4))));
    }
    const unsigned reg = g_mma_sync[warp0 + n * 4 + (k % 8) / 2].b[k / 8];
    return __uint_as_float(((k % 2) ? (reg >> 16) : (reg & 0xFFFFu)) << 16);
  };
  for (unsigned e = 0; e < 4; ++e) {
    const unsigned row = lane / 4 + 8 * (e / 2), col = 2 * (lane % 4) + e % 2;
    float sum = 0.0f;
    for (unsigned k = 0; k < k_count; ++k) sum += a_at(row, k) * b_at(k, col);
    d[e] += sum;
  }
  emu::WarpSync();
}
inline void mma_m16n8k32_e4m3(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  MmaSync<true>(d, a, b);
}
inline void mma_m16n8k16_bf16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  MmaSync<false>(d, a, b);
}
#endif

inline unsigned pack_e4m3x4(float x0, float x1, float x2, float x3) {
  return static_cast<unsigned>(fp8emu::EncodeE4m3(x0)) |
         (static_cast<unsigned>(fp8emu::EncodeE4m3(x1)) << 8) |
         (static_cast<unsigned>(fp8emu::EncodeE4m3(x2)) << 16) |
         (static_cast<unsigned>(fp8emu::EncodeE4m3(x3)) << 24);
}

}  // namespace

// clang-format off
#include KERNEL_SOURCE
// clang-format on

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace {

namespace emu = ::ptxbench_emu;

float FromBf16(uint16_t bits) { return __uint_as_float(static_cast<unsigned>(bits) << 16); }
uint16_t ToBf16(float value) {
  uint32_t bits = __float_as_uint(value);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

CUtensorMap Map(const void* base, unsigned long long rows) {
  CUtensorMap map{};
  map.opaque[emu::kMapAddress] = reinterpret_cast<unsigned long long>(base);
  map.opaque[emu::kMapDim0] = 128;
  map.opaque[emu::kMapDim1] = rows;
  map.opaque[emu::kMapStride1Bytes] = 128;
  map.opaque[emu::kMapBox0] = 128;
  map.opaque[emu::kMapBox1] = 128;
  map.opaque[emu::kMapSwizzleBytes] = 128;
  map.opaque[emu::kMapElementBytes] = 1;
  return map;
}

double RelativeNorm(const std::vector<float>& got, const std::vector<double>& want) {
  double err2 = 0, ref2 = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = got[i] - want[i];
    err2 += std::isnan(e) ? INFINITY : e * e;
    ref2 += want[i] * want[i];
  }
  return std::sqrt(err2 / ref2);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 8 || argc > 10) {
    std::fprintf(stderr, "usage: %s eager|lazy B H S DQ DK DV [model] [x64]\n", argv[0]);
    return 2;
  }
  emu::state().lazy_mma = std::string(argv[1]) == "lazy";
  emu::state().deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1200);
  const int b = std::atoi(argv[2]), h = std::atoi(argv[3]), s = std::atoi(argv[4]);
  const float dq = std::stof(argv[5]), dk = std::stof(argv[6]), dv = std::stof(argv[7]);
  bool model_check = false;
  float input_sd = 1.0f;
  for (int i = 8; i < argc; ++i) {
    if (std::string(argv[i]) == "model") model_check = true;
    if (std::string(argv[i]) == "x64") input_sd = 64.0f;
  }
  const int d = 128, bh_count = b * h;
  std::printf("== %s B=%d H=%d S=%d descales %g %g %g, inputs N(0, %g^2), MMAs executed at %s\n",
              KERNEL_SOURCE, b, h, s, dq, dk, dv, input_sd,
              emu::state().lazy_mma ? "wait (lazy)" : "issue (eager)");

  const size_t elements = static_cast<size_t>(bh_count) * s * d;
  std::mt19937 rng(4321 + s + 7 * bh_count);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<unsigned char> q(elements), k(elements), v(elements);
  for (auto* x : {&q, &k, &v}) {
    for (unsigned char& e : *x) e = fp8emu::EncodeE4m3(input_sd * normal(rng));
  }
  std::vector<unsigned char> vt(elements, 0xAB);  // scratch (the harness zero-fills; poison here)
  std::vector<uint16_t> o(elements, 0xFFFF);       // NaN, as the harness poisons outputs
  std::vector<float> lse(static_cast<size_t>(bh_count) * s, NAN);
  const float scale = static_cast<float>(1.0 / std::sqrt(128.0));
  const CUtensorMap tm_q = Map(q.data(), static_cast<unsigned long long>(bh_count) * s);
  const CUtensorMap tm_k = Map(k.data(), static_cast<unsigned long long>(bh_count) * s);
  const EmuDim3 grid{static_cast<unsigned>(s / 128), static_cast<unsigned>(bh_count), 1};
  emu::Launch([&] { vt_pack_kernel(v.data(), vt.data(), s); }, grid, 256, 0);
#if defined(ATTN_SM100)
  emu::Launch(
      [&] {
        mha_fp8_fwd_tcgen05(tm_q, tm_k, vt.data(), &dq, &dk, &dv, o.data(), lse.data(), s, scale);
      },
      EmuDim3{static_cast<unsigned>(bh_count), static_cast<unsigned>(s / 128), 1}, 192,
      FP8_FWD_SMEM_BYTES);
#else
  emu::Launch(
      [&] {
        attn_fwd_fp8_kernel(tm_q, tm_k, vt.data(), &dq, &dk, &dv, o.data(), lse.data(), scale, s);
      },
      grid, 384, FP8_FWD_SMEM_BYTES);
#endif

  auto dec = [](unsigned char x) { return static_cast<double>(fp8emu::DecodeE4m3(x)); };
  std::vector<double> o_ref(elements), lse_ref(static_cast<size_t>(bh_count) * s);
  std::vector<double> o_model(elements);
  std::vector<double> logits(s);
  const double sl = static_cast<double>(scale) * dq * dk;
  for (int bh = 0; bh < bh_count; ++bh) {
    const size_t base = static_cast<size_t>(bh) * s * d;
    for (int i = 0; i < s; ++i) {
      double mx = -1e300;
      for (int j = 0; j < s; ++j) {
        double dot = 0;
        for (int c = 0; c < d; ++c) {
          dot += dec(q[base + static_cast<size_t>(i) * d + c]) * dec(k[base + static_cast<size_t>(j) * d + c]);
        }
        logits[j] = sl * dot;
        mx = std::max(mx, logits[j]);
      }
      double sum = 0;
      for (int j = 0; j < s; ++j) sum += std::exp(logits[j] - mx);
      for (int c = 0; c < d; ++c) {
        double acc = 0;
        for (int j = 0; j < s; ++j) acc += std::exp(logits[j] - mx) * dec(v[base + static_cast<size_t>(j) * d + c]);
        o_ref[base + static_cast<size_t>(i) * d + c] = dv * acc / sum;
      }
      lse_ref[static_cast<size_t>(bh) * s + i] = mx + std::log(sum);
      // The solution's roundings: logits in log2 units, running maximum per 128-key block, 256 P
      // rounded to e4m3, row sums of the unrounded 256 P.
      double m = -INFINITY, l = 0;
      std::vector<double> acc(d, 0.0);
      for (int j0 = 0; j0 < s; j0 += 128) {
        double block_max = -INFINITY;
        for (int j = j0; j < j0 + 128; ++j) block_max = std::max(block_max, logits[j] / std::log(2.0));
        const double m_new = std::max(m, block_max);
        const double correction = std::exp2(m - m_new);
        l *= correction;
        for (double& a : acc) a *= correction;
        for (int j = j0; j < j0 + 128; ++j) {
          const double p = std::exp2(logits[j] / std::log(2.0) - m_new + 8);
          l += p;
          const double pq = fp8emu::DecodeE4m3(fp8emu::EncodeE4m3(static_cast<float>(p)));
          for (int c = 0; c < d; ++c) acc[c] += pq * dec(v[base + static_cast<size_t>(j) * d + c]);
        }
        m = m_new;
      }
      for (int c = 0; c < d; ++c) {
        o_model[base + static_cast<size_t>(i) * d + c] =
            FromBf16(ToBf16(static_cast<float>(dv * acc[c] / l)));  // O is stored as bf16
      }
    }
  }
  std::vector<float> o_got(elements);
  for (size_t i = 0; i < elements; ++i) o_got[i] = FromBf16(o[i]);
  size_t outside = 0;
  for (size_t i = 0; i < elements; ++i) {
    const double err = std::fabs(o_got[i] - o_ref[i]);
    if (!(err <= 1e-2 || err <= 1e-2 * std::fabs(o_ref[i]))) ++outside;
  }
  double worst_lse = 0;
  bool lse_ok = true;
  for (size_t i = 0; i < lse.size(); ++i) {
    const double err = std::fabs(lse[i] - lse_ref[i]);
    const double allowed = 1e-2 + 1e-2 * std::fabs(lse_ref[i]);
    worst_lse = std::max(worst_lse, std::isnan(err) ? INFINITY : err / allowed);
    if (!(err <= allowed)) lse_ok = false;
  }
  const double rn = RelativeNorm(o_got, o_ref);
  // O: the task's provisional relative-norm bound 0.05 (here against fp64 rather than the
  // library). Its all-close 1e-2 / 1e-2 share is printed, not judged: with the fp8_normal inputs
  // (|O| ~ 1) P's e4m3 rounding alone puts a few % of an honest kernel's elements outside it
  // (tools/attention-dev/FP8_NOTES.md), and the model check below is the strict one.
  const bool o_ok = rn <= 0.05;
  std::printf("  %s O vs fp64 definition: relative norm %.4f (bound 0.05); outside allclose 1e-2: "
              "%zu of %zu (%.2f %%, not judged)\n",
              o_ok ? "ok  " : "FAIL", rn, outside, elements, 100.0 * outside / elements);
  std::printf("  %s LSE vs fp64 definition: allclose 1e-2 (worst err/allowed %.4f)\n",
              lse_ok ? "ok  " : "FAIL", worst_lse);
  std::printf("  summary S=%d descales %g/%g/%g x%g: O %.4f %s, LSE %s\n", s, dq, dk, dv, input_sd, rn,
              o_ok ? "ok" : "FAIL", lse_ok ? "ok" : "FAIL");
  bool model_ok = true;
  if (model_check) {
    const double rm = RelativeNorm(o_got, o_model);
    model_ok = rm <= 1e-3;
    std::printf("  %s O vs the solution's rounding model: relative norm %.2e (bound 1e-3)\n",
                model_ok ? "ok  " : "FAIL", rm);
  }
  return o_ok && lse_ok && model_ok ? 0 : 1;
}
