// The host mirror of the input generator (worker/engine/gpu/host_generate.h): the block_scale
// distribution of the fp8 tasks' scales. The device kernel's agreement with it bit for bit is
// tests/gpu/gpu_runtime_test.cc ("block_scale scales on the device equal the host mirror").
#include "worker/engine/gpu/host_generate.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <map>
#include <vector>

#include "worker/engine/gpu/philox.h"

namespace ptxbench::gpu {
namespace {

constexpr int kFP32 = 2;  // host_generate.h's dtype code.

std::vector<float> Scales(size_t count, uint64_t seed, uint32_t tensor_index) {
  std::vector<float> out(count);
  HostGenerate(out.data(), count, kFP32, kDistBlockScale, seed, tensor_index, /*threads=*/2);
  return out;
}

TEST_CASE("block_scale draws the 56 values (1 + m/8)·2^e, e in -10..-4, uniformly") {
  constexpr size_t kCount = 1 << 18;
  const std::vector<float> scales = Scales(kCount, 5, 1);
  std::map<float, size_t> histogram;
  for (float x : scales) {
    uint32_t bits;
    std::memcpy(&bits, &x, 4);
    INFO(x);
    REQUIRE((bits & 0x000FFFFFu) == 0);  // Three mantissa bits at most: exact in any product.
    int exponent;
    const float fraction = std::frexp(x, &exponent);  // x = fraction · 2^exponent, [0.5, 1).
    REQUIRE(exponent - 1 >= kBlockScaleMinExponent);
    REQUIRE(exponent - 1 <= kBlockScaleMaxExponent);
    REQUIRE(fraction >= 0.5f);
    ++histogram[x];
  }
  CHECK(histogram.size() == 56);
  CHECK(histogram.begin()->first == std::ldexp(1.0f, -10));
  CHECK(histogram.rbegin()->first == 1.875f * std::ldexp(1.0f, -4));
  const double expected = static_cast<double>(kCount) / 56;  // ~4681 per value.
  for (const auto& [value, count] : histogram) {
    INFO(value);
    CHECK(std::abs(static_cast<double>(count) - expected) < 0.1 * expected);  // ~7 sigma.
  }
}

TEST_CASE("block_scale depends only on (seed, tensor, index) and not on the thread split") {
  const std::vector<float> a = Scales(4096, 9, 0);
  std::vector<float> single(4096);
  HostGenerate(single.data(), single.size(), kFP32, kDistBlockScale, 9, 0, /*threads=*/1);
  CHECK(std::memcmp(a.data(), single.data(), a.size() * 4) == 0);
  CHECK(Scales(4096, 9, 0) == a);
  CHECK(Scales(4096, 10, 0) != a);
  CHECK(Scales(4096, 9, 1) != a);
}

TEST_CASE("adding block_scale leaves the normal stream as it was") {
  // The normal stream of element i is a function of its Philox bits alone; block_scale uses a
  // different word of the same bits, so the two distributions of one tensor are unrelated.
  constexpr size_t kCount = 1 << 16;
  std::vector<float> normal(kCount);
  HostGenerate(normal.data(), kCount, kFP32, kDistNormal, 9, 0, 2);
  double sum = 0, sq = 0;
  for (float x : normal) {
    sum += x;
    sq += static_cast<double>(x) * x;
  }
  const double mean = sum / kCount;
  CHECK(std::abs(mean) < 0.02);
  CHECK(std::abs(sq / kCount - mean * mean - 1.0) < 0.03);
  const Philox4 r = Philox4x32_10(0, 0, 9);
  const float u1 = (static_cast<float>(r.v[0]) + 1.0f) * 2.3283064365386963e-10f;
  const float u2 = static_cast<float>(r.v[1]) * 2.3283064365386963e-10f;
  CHECK(normal[0] == std::sqrt(-2.0f * std::log(u1)) * std::cos(6.283185307179586f * u2));
}

}  // namespace
}  // namespace ptxbench::gpu
