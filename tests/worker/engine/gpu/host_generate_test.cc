// The host mirror of the input generator (worker/engine/gpu/host_generate.h): the block_scale
// distribution of the fp8 tasks' scales, and the paged tasks' page_permutation and
// length_ladder. The device kernel's agreement with it bit for bit is tests/gpu/
// gpu_runtime_test.cc ("block_scale scales on the device equal the host mirror", "the integer
// distributions on the device equal the host mirror").
#include "worker/engine/gpu/host_generate.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <numeric>
#include <set>
#include <vector>

#include "worker/engine/gpu/philox.h"

namespace ptxbench::gpu {
namespace {

constexpr int kFP32 = 2;  // host_generate.h's dtype codes.
constexpr int kInt32 = 4;

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

std::vector<int32_t> PageTable(size_t entries, int64_t pages, uint64_t seed, int threads = 2) {
  std::vector<int32_t> out(entries, -1);
  IndexDistributionArgs args;
  args.pages = pages;
  HostGenerate(out.data(), entries, kInt32, kDistPagePermutation, seed, 3, threads, args);
  return out;
}

std::vector<int32_t> Lengths(size_t count, int64_t max_length, int64_t jitter, uint64_t seed,
                             int threads = 2) {
  std::vector<int32_t> out(count, -1);
  IndexDistributionArgs args;
  args.max_length = max_length;
  args.jitter = jitter;
  HostGenerate(out.data(), count, kInt32, kDistLengthLadder, seed, 4, threads, args);
  return out;
}

TEST_CASE("page_permutation: distinct pages of the pool, scattered, a function of the seed") {
  // The timed workload's table: 64 x 128 entries from a pool of exactly 8192 pages, so the whole
  // table is one permutation of the pool; and the small workloads' pools twice the entries.
  for (const auto& [entries, pages] : std::vector<std::pair<size_t, int64_t>>{
           {8192, 8192}, {4, 8}, {45, 64}, {99, 128}, {1, 1}, {3, 1000003}}) {
    INFO(entries << " entries of " << pages << " pages");
    const std::vector<int32_t> table = PageTable(entries, pages, 17);
    const std::set<int32_t> distinct(table.begin(), table.end());
    CHECK(distinct.size() == entries);
    CHECK(*distinct.begin() >= 0);
    CHECK(*distinct.rbegin() < pages);
    // The table is the prefix of the permutation of the pool: a larger table extends it.
    if (static_cast<int64_t>(entries) < pages) {
      const std::vector<int32_t> longer = PageTable(entries + 1, pages, 17);
      CHECK(std::equal(table.begin(), table.end(), longer.begin()));
    }
  }
  const std::vector<int32_t> full = PageTable(8192, 8192, 17);
  // Scattered: consecutive entries (the pages of one sequence) are rarely neighbours, and about
  // half the steps go down (an identity or sorted table would give 8191 / 0).
  size_t neighbours = 0, descending = 0;
  for (size_t i = 1; i < full.size(); ++i) {
    if (std::abs(full[i] - full[i - 1]) == 1) ++neighbours;
    if (full[i] < full[i - 1]) ++descending;
  }
  CHECK(neighbours < 20);  // ~2 expected for a random permutation.
  CHECK(descending > 3800);
  CHECK(descending < 4400);
  // Fixed points of a random permutation: ~1.
  size_t fixed = 0;
  for (size_t i = 0; i < full.size(); ++i) fixed += full[i] == static_cast<int32_t>(i);
  CHECK(fixed < 10);
  CHECK(PageTable(8192, 8192, 17, /*threads=*/1) == full);
  CHECK(PageTable(8192, 8192, 18) != full);
}

TEST_CASE("length_ladder: lengths from short to max, rungs dealt in a seeded order, jittered") {
  constexpr int64_t kMax = int64_t{128} * 64, kJitter = 64;
  constexpr size_t kCount = 64;
  const std::vector<int32_t> lengths = Lengths(kCount, kMax, kJitter, 5);
  const int64_t step = (kMax + kCount - 1) / kCount;  // 128 tokens a rung.
  std::vector<int32_t> sorted = lengths;
  std::sort(sorted.begin(), sorted.end());
  size_t mid_page = 0;
  for (size_t k = 0; k < kCount; ++k) {
    INFO("rung " << k << ": " << sorted[k]);
    // Sorted, rung k lies in ((k+1)·step - jitter, (k+1)·step]: monotone up to the jitter.
    CHECK(sorted[k] <= static_cast<int64_t>(k + 1) * step);
    CHECK(sorted[k] > static_cast<int64_t>(k + 1) * step - kJitter);
    CHECK(sorted[k] >= 1);
    CHECK(sorted[k] <= kMax);
    if (sorted[k] % 64 != 0) ++mid_page;
  }
  CHECK(mid_page > 50);      // A draw of 0 (1 in 64) leaves a rung on the page boundary.
  CHECK(lengths != sorted);  // Dealt in a seeded order, not sorted by sequence.
  // The sum is fixed up to the jitter: the roofline formula's expected sum within 1 %.
  const double sum = std::accumulate(lengths.begin(), lengths.end(), 0.0);
  const double expected = kMax * (kCount + 1) / 2.0 - kCount * (std::min(64.0, 128.0) - 1) / 2;
  CHECK(std::abs(sum - expected) < 0.01 * expected);
  CHECK(Lengths(kCount, kMax, kJitter, 5, /*threads=*/1) == lengths);
  CHECK(Lengths(kCount, kMax, kJitter, 6) != lengths);
  // No jitter: exactly the rungs step, 2·step, .., max.
  std::vector<int32_t> exact = Lengths(kCount, kMax, 0, 5);
  std::sort(exact.begin(), exact.end());
  for (size_t k = 0; k < kCount; ++k) CHECK(exact[k] == static_cast<int32_t>((k + 1) * step));
  // More sequences than tokens: step 1, the jitter cannot exceed the step, lengths stay >= 1.
  const std::vector<int32_t> tiny = Lengths(10, 3, 64, 5);
  for (int32_t x : tiny) {
    CHECK(x >= 1);
    CHECK(x <= 3);
  }
  // The small workloads: max 128 (B 2), 576 (B 5), 2112 (B 3); the longest rung is max - r.
  for (const auto& [count, max_length] :
       std::vector<std::pair<size_t, int64_t>>{{2, 128}, {5, 576}, {3, 2112}}) {
    const std::vector<int32_t> l = Lengths(count, max_length, 64, 9);
    CHECK(*std::max_element(l.begin(), l.end()) > max_length - 64);
    CHECK(*std::max_element(l.begin(), l.end()) <= max_length);
    CHECK(*std::min_element(l.begin(), l.end()) >= 1);
  }
}

TEST_CASE("PermuteIndex is a bijection of every domain size, also odd and tiny ones") {
  for (uint64_t domain : {1ull, 2ull, 3ull, 5ull, 63ull, 64ull, 65ull, 1000ull, 4097ull}) {
    std::set<uint64_t> seen;
    for (uint64_t i = 0; i < domain; ++i) seen.insert(PermuteIndex(i, domain, 77, 1));
    INFO(domain);
    CHECK(seen.size() == domain);
    CHECK(*seen.rbegin() == domain - 1);
  }
  // An index outside the domain is reduced, not walked forever.
  CHECK(PermuteIndex(70, 64, 77, 1) == PermuteIndex(6, 64, 77, 1));
}

// ---------------------------------------------------------------------------------------------
// fp8_normal and tensor_descale: the fp8 attention task's inputs (philox.h). The device kernel's
// agreement with the host mirror bit for bit is tests/gpu/gpu_runtime_test.cc ("fp8_normal and
// tensor_descale on the device equal the host mirror").

// The value of an e4m3 byte (no NaN among the codes drawn here).
double E4m3Value(uint8_t byte) {
  const int e = (byte >> 3) & 0xF, m = byte & 7;
  const double magnitude = e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10);
  return (byte & 0x80) != 0 ? -magnitude : magnitude;
}

TEST_CASE("fp8_normal's thresholds are floor(2^32 · erf(b_c / (64 √2))) at the e4m3 midpoints") {
  for (int c = 0; c + 1 < kFp8NormalCodes; ++c) {
    INFO("code " << c);
    const double boundary =
        (E4m3Value(static_cast<uint8_t>(c)) + E4m3Value(static_cast<uint8_t>(c + 1))) / 2;
    const double p = std::erf(boundary / (kFp8NormalStddev * std::sqrt(2.0)));
    const double expected = std::min(std::floor(std::ldexp(p, 32)), 4294967295.0);
    // One unit of slack: libm's erf may differ from the generator's in the last bit.
    CHECK(std::abs(static_cast<double>(kFp8NormalThresholds[c]) - expected) <= 1.0);
    if (c > 0) CHECK(kFp8NormalThresholds[c] >= kFp8NormalThresholds[c - 1]);
  }
  // The inverse CDF's ends: the smallest word is +0 (code 0), the largest saturates at 448.
  CHECK(Fp8NormalByte(0, 1, kFp8NormalThresholds) == 0);
  CHECK(Fp8NormalByte(0xFFFFFFFFu, 0, kFp8NormalThresholds) == 0x7E);
  CHECK(Fp8NormalByte(0xFFFFFFFFu, 1, kFp8NormalThresholds) == 0xFE);
  CHECK(Fp8NormalByte(kFp8NormalThresholds[40], 0, kFp8NormalThresholds) == 41);
  CHECK(Fp8NormalByte(kFp8NormalThresholds[40] - 1, 0, kFp8NormalThresholds) == 40);
}

TEST_CASE("fp8_normal draws e4m3 bytes of N(0, 64^2): moments, tails, codes, no -0 or NaN") {
  constexpr size_t kCount = 1 << 20;
  std::vector<uint8_t> bytes(kCount);
  HostGenerate(bytes.data(), kCount, /*dtype=*/3, kDistFp8Normal, 21, 0, /*threads=*/2);
  double sum = 0, square_sum = 0, largest = 0;
  size_t beyond_two_sigma = 0;
  std::map<uint8_t, size_t> histogram;
  for (uint8_t b : bytes) {
    REQUIRE(b != 0x80);           // No negative zero.
    REQUIRE((b & 0x7F) <= 0x7E);  // No NaN: the largest magnitude is 448.
    const double x = E4m3Value(b);
    sum += x;
    square_sum += x * x;
    largest = std::max(largest, std::abs(x));
    if (std::abs(x) > 2 * kFp8NormalStddev) ++beyond_two_sigma;
    ++histogram[b];
  }
  const double mean = sum / kCount;
  const double stddev = std::sqrt(square_sum / kCount - mean * mean);
  CHECK(std::abs(mean) < 0.5);  // The mean's own sigma: 64 / 1024 = 0.0625.
  // e4m3 rounding adds ~relative 2^-5 noise (variance + ~0.1 %); the sample's own spread 0.07 %.
  CHECK(stddev > 63.5);
  CHECK(stddev < 64.5);
  CHECK(largest <= 448.0);
  CHECK(largest >= 256.0);  // 2^20 draws reach ~5 sigma = 320.
  // |x| > 128 (2 sigma, an e4m3 value; the next one is 144, so the values above 128 are those
  // of |X| >= 136, the midpoint): P = erfc(136 / (64 √2)) = 3.4 %.
  const double tail = static_cast<double>(beyond_two_sigma) / kCount;
  const double tail_expected = std::erfc(136.0 / (kFp8NormalStddev * std::sqrt(2.0)));
  CHECK(std::abs(tail - tail_expected) < 5 * std::sqrt(tail_expected / kCount));
  // One code's frequency against its probability mass in the table: 64.0 (1 sigma).
  uint8_t code = 0;
  while (E4m3Value(code) != 64.0) ++code;
  const double mass = (static_cast<double>(kFp8NormalThresholds[code]) -
                       static_cast<double>(kFp8NormalThresholds[code - 1])) /
                      4294967296.0 / 2;  // One sign.
  const double seen = static_cast<double>(histogram[code]) / kCount;
  CHECK(std::abs(seen - mass) < 5 * std::sqrt(mass / kCount));
  // Both signs alike.
  size_t negative = 0;
  for (uint8_t b : bytes) negative += (b & 0x80) != 0;
  CHECK(std::abs(static_cast<double>(negative) / kCount - 0.5) < 0.005);
}

TEST_CASE("tensor_descale draws the 8 values 0.75/64 .. 1.375/64 uniformly") {
  constexpr size_t kCount = 1 << 16;
  std::vector<float> out(kCount);
  HostGenerate(out.data(), kCount, kFP32, kDistTensorDescale, 3, 4, /*threads=*/2);
  std::map<float, size_t> histogram;
  for (float x : out) {
    uint32_t bits;
    std::memcpy(&bits, &x, 4);
    REQUIRE((bits & 0x000FFFFFu) == 0);  // Three mantissa bits at most.
    ++histogram[x];
  }
  REQUIRE(histogram.size() == 8);
  const float kValues[] = {0.75f, 0.8125f, 0.875f, 0.9375f, 1.0f, 1.125f, 1.25f, 1.375f};
  const float* expected = kValues;
  for (const auto& [value, count] : histogram) {
    CHECK(value == *expected++ / 64);
    INFO(value);
    CHECK(std::abs(static_cast<double>(count) - kCount / 8.0) < 0.05 * kCount / 8);  // ~7 sigma.
  }
}

TEST_CASE("fp8_normal and tensor_descale depend only on (seed, tensor, index)") {
  auto draw = [](uint64_t seed, uint32_t tensor, int threads) {
    std::vector<uint8_t> bytes(5000);
    HostGenerate(bytes.data(), bytes.size(), 3, kDistFp8Normal, seed, tensor, threads);
    return bytes;
  };
  CHECK(draw(1, 0, 1) == draw(1, 0, 3));
  CHECK(draw(1, 0, 1) != draw(2, 0, 1));
  CHECK(draw(1, 0, 1) != draw(1, 1, 1));
  // A one-element descale tensor still changes with the seed (8 values: some seeds agree).
  std::set<float> seen;
  for (uint64_t seed = 0; seed < 64; ++seed) {
    float x = 0;
    HostGenerate(&x, 1, kFP32, kDistTensorDescale, seed, 3, 1);
    seen.insert(x);
  }
  CHECK(seen.size() == 8);
}

}  // namespace
}  // namespace ptxbench::gpu
