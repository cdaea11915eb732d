// Counter-based input generation shared by the GPU kernels (builtin_kernels.cu) and host code
// (tests, documentation of the stream). Element i of tensor t under seed s is a pure function
// of (s, t, i): any process, on any run, regenerates identical inputs without storing them, so
// the reference process and the sandboxed candidate process see the same bits (checked through
// a keyed hash of the inputs in both processes).
//
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11), one
// counter per element: {i_lo, i_hi, tensor_index, 0}, key {seed_lo, seed_hi}.
#ifndef PTXBENCH_WORKER_ENGINE_GPU_PHILOX_H_
#define PTXBENCH_WORKER_ENGINE_GPU_PHILOX_H_

#include <stdint.h>

#if defined(__CUDACC__)
#define PTXBENCH_HD __host__ __device__ __forceinline__
#else
#define PTXBENCH_HD inline
#endif

namespace ptxbench::gpu {

// Version of the generated stream. Part of every reference-cache key: changing the generator
// (constants, distribution formulas) must change this number.
inline constexpr int kGeneratorVersion = 1;

// Distribution codes passed to the generator kernel (mirror ptxbench::Distribution).
inline constexpr int kDistNormal = 0;
inline constexpr int kDistSpiky = 1;
inline constexpr int kDistBlockScale = 2;
inline constexpr int kDistPagePermutation = 3;
inline constexpr int kDistLengthLadder = 4;
inline constexpr int kDistFp8Normal = 5;
inline constexpr int kDistTensorDescale = 6;
// Spiky: N(0,1) + N(0,100)·Bernoulli(0.001), N(mean, variance) notation: the spike has
// standard deviation 10. The original benchmark's stress distribution for attention backward.
inline constexpr float kSpikeProbability = 0.001f;
inline constexpr float kSpikeStddev = 10.0f;

// Block scale: the positive fp32 scales of block-quantised fp8 operands (one per 1 x 128 or
// 128 x 128 block, DeepSeek-V3 style), (1 + m/8) · 2^e with m uniform in 0..7 and e uniform in
// kBlockScaleMinExponent..kBlockScaleMaxExponent: 56 values from 2^-10 to 1.875 · 2^-4 (a 120x
// spread, so one scale per tensor is a different result, not a rounding difference). Built from
// the bits, not with exp2, so the device and the host mirror agree bit for bit, and a scale times
// an e4m3 value (4 significant bits each) is exact in fp32 and double. A new code, not a change
// of the existing streams: kGeneratorVersion stays.
inline constexpr int kBlockScaleMinExponent = -10;
inline constexpr int kBlockScaleMaxExponent = -4;

// IEEE-754 binary32 bits of the block scale drawn from 32 random bits.
PTXBENCH_HD uint32_t BlockScaleBits(uint32_t random) {
  const uint32_t mantissa = random & 7u;
  const uint32_t exponent_steps =
      static_cast<uint32_t>(kBlockScaleMaxExponent - kBlockScaleMinExponent + 1);
  const int exponent = kBlockScaleMinExponent + static_cast<int>((random >> 3) % exponent_steps);
  return (static_cast<uint32_t>(exponent + 127) << 23) | (mantissa << 20);
}

// fp8_normal (fp8 e4m3 tensors of the fp8 attention task): the e4m3 rounding of N(0, 64^2)
// (standard deviation kFp8NormalStddev), saturated at 448, like per-tensor-quantized activations:
// dequantized with a descale near 1/64 they are ~N(0, 1), and the values use the format's range
// (a 64-sigma-wide normal puts 99.7 % of them between +-192, and the largest of 10^8 draws near
// 6 sigma = 384). Drawn by inverse CDF from the bits, not as the e4m3 rounding of a float normal:
// magnitude code c (0..126, the e4m3 encodings in increasing order; 126 = 448) is the smallest c
// with r < kFp8NormalThresholds[c], else 126 (the saturated tail), where threshold c is
// floor(2^32 · P(|X| < b_c)) = floor(2^32 · erf(b_c / (64 √2))) and b_c the midpoint between
// the values of codes c and c+1 (round-to-nearest's boundary); the sign is another bit. Integer
// work only, so the device and the host mirror agree bit for bit (the table's own check against
// std::erf: tests/worker/engine/gpu/host_generate_test.cc). New codes, not a change of the
// existing streams: kGeneratorVersion stays.
inline constexpr double kFp8NormalStddev = 64.0;
inline constexpr int kFp8NormalCodes = 127;  // Finite e4m3 magnitudes: 0 .. 448.
// The 126 thresholds, as a list a device table (__constant__) and a host table both spell out.
#define PTXBENCH_FP8_NORMAL_THRESHOLDS                                                           \
  0x0000CC42u, 0x000264C6u, 0x0003FD4Au, 0x000595CFu, 0x00072E53u, 0x0008C6D7u, 0x000A5F5Cu,     \
      0x000BF7E0u, 0x000D9064u, 0x000F28E9u, 0x0010C16Du, 0x001259F1u, 0x0013F276u, 0x00158AFAu, \
      0x0017237Eu, 0x0018BC02u, 0x001B20C9u, 0x001E51D2u, 0x002182DAu, 0x0024B3E3u, 0x0027E4EBu, \
      0x002B15F4u, 0x002E46FDu, 0x00317805u, 0x00364192u, 0x003CA3A3u, 0x004305B4u, 0x004967C5u, \
      0x004FC9D6u, 0x00562BE7u, 0x005C8DF7u, 0x0062F008u, 0x006C8321u, 0x00794741u, 0x00860B61u, \
      0x0092CF81u, 0x009F93A0u, 0x00AC57BEu, 0x00B91BDCu, 0x00C5DFF9u, 0x00D90623u, 0x00F28E58u, \
      0x010C1689u, 0x01259EB6u, 0x013F26DFu, 0x0158AF02u, 0x01723720u, 0x018BBF39u, 0x01B20B51u, \
      0x01E51B5Au, 0x02182B45u, 0x024B3B0Eu, 0x027E4AB3u, 0x02B15A2Fu, 0x02E46981u, 0x031778A4u, \
      0x03640EFBu, 0x03CA2C05u, 0x0430481Cu, 0x04966327u, 0x04FC7D0Du, 0x056295B4u, 0x05C8AD02u, \
      0x062EC2DEu, 0x06C7E0BAu, 0x0794028Du, 0x08601CCDu, 0x092C2EAFu, 0x09F83765u, 0x0AC43626u, \
      0x0B902A24u, 0x0C5C1296u, 0x0D8DD7DCu, 0x0F2559BAu, 0x10BC9F1Fu, 0x1253A1B8u, 0x13EA5B35u, \
      0x1580C54Au, 0x1716D9AEu, 0x18AC921Bu, 0x1B0C6CA6u, 0x1E35694Fu, 0x215C8633u, 0x2481921Cu, \
      0x27A45C37u, 0x2AC4B41Du, 0x2DE269D8u, 0x30FD4DF2u, 0x359FF47Du, 0x3BC298B3u, 0x41D6BC30u, \
      0x47DB0003u, 0x4DCE10B4u, 0x53AEA722u, 0x597B8950u, 0x5F338B27u, 0x679DFCDBu, 0x72839B68u, \
      0x7D03A296u, 0x8717AD46u, 0x90BA6B45u, 0x99E7A53Cu, 0xA29C3C26u, 0xAAD62493u, 0xB6450EDBu, \
      0xC3D50B43u, 0xCF86A937u, 0xD973DA61u, 0xE1BF9842u, 0xE892FB1Au, 0xEE1A720Bu, 0xF28348E6u, \
      0xF766DE24u, 0xFB81E978u, 0xFDC82327u, 0xFEF7376Fu, 0xFF8B7942u, 0xFFCF9FC8u, 0xFFED1008u, \
      0xFFF90322u, 0xFFFE995Au, 0xFFFFDDDFu, 0xFFFFFD72u, 0xFFFFFFD9u, 0xFFFFFFFEu, 0xFFFFFFFFu
inline constexpr uint32_t kFp8NormalThresholds[kFp8NormalCodes - 1] = {
    PTXBENCH_FP8_NORMAL_THRESHOLDS};

// The e4m3 byte of fp8_normal from two random words and a threshold table (host: the table
// above; device: its __constant__ copy in builtin_kernels.cu). Binary search, 7 steps.
PTXBENCH_HD uint8_t Fp8NormalByte(uint32_t magnitude_bits, uint32_t sign_bits,
                                  const uint32_t* thresholds) {
  int low = 0, high = kFp8NormalCodes - 1;  // The answer lies in [low, high].
  while (low < high) {
    const int mid = (low + high) / 2;
    if (magnitude_bits < thresholds[mid]) {
      high = mid;
    } else {
      low = mid + 1;
    }
  }
  // +0 for a zero magnitude: a -0 byte (0x80) would be a legal e4m3 value, but no quantizer
  // produces it from a value that rounds to zero, and it would be the only negative zero.
  return low == 0 ? uint8_t{0} : static_cast<uint8_t>(((sign_bits & 1u) << 7) | low);
}

// tensor_descale (fp32 tensors of the fp8 attention task's per-tensor descales): eight values
// from 0.75/64 to 1.375/64, (1 + m/8)·2^-6 for m = r mod 8 in 0..3 and (1 + m/8)·2^-7 for m in
// 4..7 (0.75, 0.8125, 0.875, 0.9375, 1, 1.125, 1.25, 1.375 times 1/64), uniform: fp8_normal
// values times a descale are N(0, σ²) with σ in 0.75..1.375, so the logits' spread (σ_q·σ_k,
// 0.56..1.9) stays near the bf16 task's 1 and a kernel cannot hard-code the factor (each seed
// draws its own). A wider set ((1 + m/8)·2^-6, 1..1.875) made O up to 20x larger on some draws
// (logits' spread 3.5: one key dominates), where the library's own e4m3 rounding of P and O
// fails any all-close rule an honest kernel could meet (docs/task-authoring.md, "The fp8
// attention forward task"). Built from the bits like block_scale; 4 significant bits, so a
// descale times an e4m3 value (4 bits) is exact in fp32.
PTXBENCH_HD uint32_t TensorDescaleBits(uint32_t random) {
  const uint32_t m = random & 7u;
  const uint32_t biased_exponent = m < 4 ? 127u - 6u : 127u - 7u;
  return (biased_exponent << 23) | (m << 20);
}

struct Philox4 {
  uint32_t v[4];
};

PTXBENCH_HD uint32_t MulHiLo32(uint32_t a, uint32_t b, uint32_t* hi) {
  uint64_t p = static_cast<uint64_t>(a) * static_cast<uint64_t>(b);
  *hi = static_cast<uint32_t>(p >> 32);
  return static_cast<uint32_t>(p);
}

PTXBENCH_HD Philox4 Philox4x32_10(uint64_t counter, uint32_t stream, uint64_t seed) {
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32);
  uint32_t c2 = stream, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, hi1;
    uint32_t lo0 = MulHiLo32(0xD2511F53u, c0, &hi0);
    uint32_t lo1 = MulHiLo32(0xCD9E8D57u, c2, &hi1);
    uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return Philox4{{c0, c1, c2, c3}};
}

// The integer distributions of the paged tasks (int32 tensors; docs/task-authoring.md, "The
// paged GQA decode task"). Each element is still a pure function of (seed, tensor, index, the
// distribution's parameters), built from integer operations only, so the device kernel and the
// host mirror agree bit for bit. New codes: kGeneratorVersion stays.
struct IndexDistributionArgs {
  int64_t pages = 0;       // page_permutation: entries are distinct values in 0 .. pages-1.
  int64_t max_length = 0;  // length_ladder: the longest length.
  int64_t jitter = 0;      // length_ladder: rung k is shortened by a draw in [0, jitter).
};

// A seeded bijection of 0 .. domain-1 (domain >= 1, < 2^62): a 4-round balanced Feistel network
// on the smallest even number of bits covering the domain, its round function a Philox word
// (counter: round and half-value, so it never meets an element's own counter), cycle-walked
// until the value falls inside the domain (the network is a permutation of a set of at most
// 4·domain values, so the walk ends, after < 4 steps on average; Black & Rogaway, "Ciphers with
// arbitrary finite domains", CT-RSA 2002).
PTXBENCH_HD uint64_t PermuteIndex(uint64_t index, uint64_t domain, uint64_t seed, uint32_t stream) {
  unsigned bits = 2;
  while (bits < 62 && (uint64_t{1} << bits) < domain) bits += 2;
  const unsigned half = bits / 2;
  const uint64_t mask = (uint64_t{1} << half) - 1;
  // An index outside the domain would never walk back into it (callers keep index < domain;
  // reduced here so a bad call cannot hang a kernel).
  uint64_t x = index < domain ? index : index % domain;
  do {
    uint64_t left = x >> half, right = x & mask;
    for (uint64_t round = 0; round < 4; ++round) {
      const Philox4 f = Philox4x32_10(((round + 1) << 40) | right, stream, seed);
      const uint64_t mixed = (static_cast<uint64_t>(f.v[1]) << 32) | f.v[0];
      const uint64_t next = left ^ (mixed & mask);
      left = right;
      right = next;
    }
    x = (left << half) | right;
  } while (x >= domain);
  return x;
}

// page_permutation: element i of the tensor is position i of one seeded permutation of
// 0 .. pages-1 (requires pages >= the element count, checked at task load): every entry names a
// distinct page, rows are disjoint, and the order is scattered.
PTXBENCH_HD int32_t PagePermutationValue(uint64_t index, int64_t pages, uint64_t seed,
                                         uint32_t stream) {
  return static_cast<int32_t>(PermuteIndex(index, static_cast<uint64_t>(pages), seed, stream));
}

// length_ladder over `count` elements: element i takes rung k = PermuteIndex(i, count) (the
// rungs are dealt in a seeded order, so a kernel cannot assume sorted lengths), rung k has the
// length min(max, (k+1)·step) - r with step = ceil(max / count) and r uniform in
// [0, min(jitter, step)) from the element's own Philox word, clamped to 1 .. max. The lengths
// spread evenly from ~step to max, most of them ending inside a page.
PTXBENCH_HD int32_t LengthLadderValue(uint64_t index, uint64_t count, int64_t max_length,
                                      int64_t jitter, uint64_t seed, uint32_t stream) {
  const int64_t rung = static_cast<int64_t>(PermuteIndex(index, count, seed, stream));
  const int64_t step = (max_length + static_cast<int64_t>(count) - 1) / static_cast<int64_t>(count);
  int64_t length = (rung + 1) * step < max_length ? (rung + 1) * step : max_length;
  const int64_t span = jitter < step ? jitter : step;
  if (span > 0) {
    const Philox4 r = Philox4x32_10(index, stream, seed);
    length -= static_cast<int64_t>(r.v[3] % static_cast<uint64_t>(span));
  }
  return static_cast<int32_t>(length < 1 ? 1 : length);
}

// 64-bit finalizer (splitmix64), used by the keyed input/output hash.
PTXBENCH_HD uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

// Contribution of the 8-byte word at `word_index` to the keyed hash: the hash of a buffer is
// the wrapping sum of these, so GPU threads may add them in any order and still agree.
PTXBENCH_HD uint64_t HashTerm(uint64_t word, uint64_t word_index, uint64_t key) {
  return Mix64(word ^ Mix64(key + word_index * 0x9E3779B97F4A7C15ull));
}

// The seed of timed sample `index` (timing.cc), also computed by the supervisor to queue the
// references of checked samples before the timing loop runs.
PTXBENCH_HD uint64_t SampleSeed(uint64_t base, uint64_t index) {
  return Mix64(base + 0x9E3779B97F4A7C15ull * (index + 1));
}

// The secret position of the checked candidate sample in block `block` of `every` samples.
PTXBENCH_HD uint64_t CheckedSampleOfBlock(uint64_t position_seed, uint64_t block, uint64_t every) {
  return block * every + Mix64(position_seed + block) % every;
}

// Whether weight j (< 128) of an element in an output sketch (sketch.h) is -1 (else +1): bit j
// of the element's Philox4x32-10 block (counter: element index, stream: kSketchStream + tensor,
// key: the sample's sketch key).
PTXBENCH_HD bool SketchWeightNegative(const Philox4& r, unsigned j) {
  return ((r.v[(j >> 5) & 3] >> (j & 31)) & 1u) != 0;
}

}  // namespace ptxbench::gpu

#endif  // PTXBENCH_WORKER_ENGINE_GPU_PHILOX_H_
