#include "worker/engine/gpu/host_generate.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "worker/engine/gpu/philox.h"

namespace ptxbench::gpu {

uint16_t FloatToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if (std::isnan(value)) return 0x7FC0;
  bits += 0x7FFF + ((bits >> 16) & 1);  // Round to nearest even.
  return static_cast<uint16_t>(bits >> 16);
}

uint16_t FloatToHalf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  if (std::isnan(value)) return 0x7E00;
  float a = std::fabs(value);
  if (a >= 65520.0f) return sign | 0x7C00;
  if (a < std::ldexp(1.0f, -24) * 0.5f) return sign;
  int exponent;
  std::frexp(a, &exponent);  // a = m * 2^exponent, m in [0.5, 1)
  int e = exponent - 1;      // a = 1.f * 2^e
  if (e < -14) {             // Subnormal: units of 2^-24.
    return sign | static_cast<uint16_t>(std::nearbyint(std::ldexp(a, 24)));
  }
  float mantissa = std::ldexp(a, -e) - 1.0f;  // [0, 1)
  uint32_t m = static_cast<uint32_t>(std::nearbyint(mantissa * 1024.0f));
  if (m == 1024) {
    m = 0;
    ++e;
  }
  if (e > 15) return sign | 0x7C00;
  return sign | static_cast<uint16_t>(((e + 15) << 10) | m);
}

uint8_t FloatToE4M3(float value) {
  if (std::isnan(value)) return 0x7F;
  uint8_t sign = value < 0 ? 0x80 : 0;
  float a = std::min(std::fabs(value), 448.0f);  // Saturate like __nv_fp8_e4m3's conversion.
  uint8_t best = 0;
  float best_error = a;
  for (int code = 0; code < 0x7F; ++code) {  // 127 finite magnitudes: exhaustive and exact.
    int e = (code >> 3) & 0xF, m = code & 7;
    float v = e == 0 ? std::ldexp(static_cast<float>(m), -9)
                     : std::ldexp(static_cast<float>(m | 8), e - 10);
    float err = std::fabs(v - a);
    if (err < best_error || (err == best_error && (code & 1) == 0)) {
      best = static_cast<uint8_t>(code);
      best_error = err;
    }
  }
  return sign | best;
}

void HostGenerate(void* out, uint64_t count, int dtype, int distribution, uint64_t seed,
                  uint32_t tensor_index, int threads, const IndexDistributionArgs& args) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  auto work = [&](uint64_t begin, uint64_t end) {
    for (uint64_t i = begin; i < end; ++i) {
      if (distribution == kDistPagePermutation || distribution == kDistLengthLadder) {
        if (dtype != 4) continue;  // Integer distributions: int32 only (task.cc checks it).
        static_cast<int32_t*>(out)[i] =
            distribution == kDistPagePermutation
                ? PagePermutationValue(i, args.pages, seed, tensor_index)
                : LengthLadderValue(i, count, args.max_length, args.jitter, seed, tensor_index);
        continue;
      }
      Philox4 r = Philox4x32_10(i, tensor_index, seed);
      if (distribution == kDistFp8Normal) {  // fp8 e4m3 only (task.cc checks it).
        if (dtype == 3) {
          static_cast<uint8_t*>(out)[i] = Fp8NormalByte(r.v[2], r.v[3], kFp8NormalThresholds);
        }
        continue;
      }
      if (distribution == kDistTensorDescale) {  // fp32 only.
        if (dtype == 2) {
          const uint32_t bits = TensorDescaleBits(r.v[2]);
          std::memcpy(&static_cast<float*>(out)[i], &bits, 4);
        }
        continue;
      }
      float u1 = (static_cast<float>(r.v[0]) + 1.0f) * 2.3283064365386963e-10f;
      float u2 = static_cast<float>(r.v[1]) * 2.3283064365386963e-10f;
      float radius = std::sqrt(-2.0f * std::log(u1));
      float angle = 6.283185307179586f * u2;
      float x = radius * std::cos(angle);
      if (distribution == kDistSpiky &&
          static_cast<float>(r.v[2]) * 2.3283064365386963e-10f < kSpikeProbability) {
        x += kSpikeStddev * radius * std::sin(angle);
      }
      if (distribution == kDistBlockScale) {
        const uint32_t bits = BlockScaleBits(r.v[2]);
        std::memcpy(&x, &bits, 4);
      }
      switch (dtype) {
        case 0:
          static_cast<uint16_t*>(out)[i] = FloatToBf16(x);
          break;
        case 1:
          static_cast<uint16_t*>(out)[i] = FloatToHalf(x);
          break;
        case 2:
          static_cast<float*>(out)[i] = x;
          break;
        case 3:
          static_cast<uint8_t*>(out)[i] = FloatToE4M3(x);
          break;
        case 4:
          static_cast<int32_t*>(out)[i] = static_cast<int32_t>(r.v[3] & 0xFF) - 128;
          break;
        default:
          break;
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) {
    pool.emplace_back(work, count * t / threads, count * (t + 1) / threads);
  }
  work(0, count / threads);
  for (std::thread& th : pool) th.join();
}

}  // namespace ptxbench::gpu
