// Emulated bodies of the ptxbench_hopper.cuh wrappers whose real bodies are inline PTX (the
// Hopper counterpart of emu_primitives.h). make_header.py writes the emulator's header as: this
// file, then the real header with exactly those wrappers removed, so every pure helper (the
// smem descriptor builders, the swizzle offset, the mbarrier wait loop, thread indices) is the
// real one. A wrapper the real header gains without a body here fails the emulator's build.
//
// wgmma (warpgroup MMA) is a collective of the 128 threads of a warpgroup: each thread hands over
// the address of its accumulator registers (and, in the RS form, of its A fragment); after a
// rendezvous, thread 0 of the warpgroup checks that every thread issued the same instruction
// (shape, descriptors, scale-d, transposes) and runs it over the whole 64 x N tile, reading the
// shared-memory operands through the descriptors (start, LBO, SBO, layout type, base offset) and
// the register operands through the fragment layouts of the PTX ISA ("Register Fragments and
// Shared Memory Matrix Layouts" for wgmma .m64nNk16 / .m64nNk32). Operations run when their group
// completes: at issue (eager, the default: the earliest the hardware may read the operands) or
// at the wgmma.wait_group that retires their group (lazy, PTXBENCH lazy mode: the latest). A
// kernel correct under the PTX rules gives the same result both ways; one that reads accumulators
// before waiting, rewrites an A fragment or frees a shared-memory stage too early does not.
#ifndef PTXBENCH_TOOLS_BLACKWELL_CHECK_EMULATOR_EMU_HOPPER_PRIMITIVES_H_
#define PTXBENCH_TOOLS_BLACKWELL_CHECK_EMULATOR_EMU_HOPPER_PRIMITIVES_H_

#include <array>
#include <atomic>

#include "emu_runtime.h"

namespace ptxbench {
namespace sm90 {

using u16 = unsigned short;
using u32 = unsigned int;
using u64 = unsigned long long;
namespace emu = ::ptxbench_emu;

using emu::kMapAddress;
using emu::kMapBox0;
using emu::kMapBox1;
using emu::kMapDim0;
using emu::kMapDim1;
using emu::kMapElementBytes;
using emu::kMapStride1Bytes;
using emu::kMapSwizzleBytes;

inline bool elect_one() {
  emu::WarpSync();
  return emu::lane() == 0;
}

inline void named_barrier_sync(u32 id, u32 thread_count) {
  emu::NamedBarrier(id, thread_count, "bar.sync id/count invalid").arrive_and_wait();
}

// bar.arrive: counts this thread toward the named barrier's `thread_count` and goes on (the
// producer side of a producer/consumer barrier; bar.sync on the same id waits for the whole
// count). Not a wrapper of the real header: sources that write bar.arrive in their own inline
// PTX (the attention forward's ping-pong turns) get it through their driver.
inline void named_barrier_arrive(u32 id, u32 thread_count) {
  (void)emu::NamedBarrier(id, thread_count, "bar.arrive id/count invalid").arrive();
}

// Clusters are not emulated beyond the cluster of one CTA (a plain launch).
inline u32 cluster_ctarank() { return 0; }
inline void cluster_sync() { __syncthreads(); }

inline void mbarrier_init(u64* bar, u32 arrival_count) { emu::MbarrierInit(bar, arrival_count); }
inline void fence_mbarrier_init() {}
inline void mbarrier_arrive(u64* bar) { emu::MbarrierArrive(bar, 0); }
inline void mbarrier_arrive_cluster(u64* bar, u32 cta_rank) {
  if (cta_rank != 0) emu::Fail("mbarrier arrival on another CTA of a cluster (not emulated)");
  emu::MbarrierArrive(bar, 0);
}
inline void mbarrier_arrive_expect_tx(u64* bar, u32 tx_bytes) {
  emu::MbarrierArrive(bar, static_cast<long long>(tx_bytes));
}
inline bool mbarrier_try_wait_parity(u64* bar, u32 phase_parity) {
  return emu::MbarrierTryWait(bar, phase_parity);
}
inline void fence_proxy_async_shared() {}
inline void prefetch_tensormap(const CUtensorMap*) {}

inline void tma_load_2d(void* smem_dst, const CUtensorMap* map, u64* bar, int coord0, int coord1) {
  emu::TmaLoad2d(smem_dst, map, bar, coord0, coord1);
}
inline void tma_load_2d_multicast(void* smem_dst, const CUtensorMap* map, u64* bar, int coord0,
                                  int coord1, u16 cta_mask) {
  if (cta_mask != 1) emu::Fail("TMA multicast to other CTAs (not emulated)", cta_mask);
  emu::TmaLoad2d(smem_dst, map, bar, coord0, coord1);
}

// The box at (coord0, coord1) from 128B-swizzled shared memory to global; elements outside the
// tensor are skipped. Executed at issue (the commit / wait_read below are then no-ops).
inline void tma_store_2d(const CUtensorMap* map, const void* smem_src, int coord0, int coord1) {
  const u64* f = map->opaque;
  const u32 src = static_cast<u32>(__cvta_generic_to_shared(smem_src));
  const u32 element_bytes = static_cast<u32>(f[kMapElementBytes]);
  const u32 box0 = static_cast<u32>(f[kMapBox0]);
  const u32 box1 = static_cast<u32>(f[kMapBox1]);
  const u32 row_bytes = box0 * element_bytes;
  if (f[kMapSwizzleBytes] != 128) emu::Fail("emulated TMA supports the 128B swizzle only");
  if (row_bytes != 128) emu::Fail("128B swizzle needs a 128-byte inner box here", row_bytes);
  if (src % 1024 != 0) emu::Fail("128B-swizzled TMA store source not 1024-byte aligned", src);
  emu::CheckSmem(src, row_bytes * box1);
  unsigned char* global = reinterpret_cast<unsigned char*>(f[kMapAddress]);
  for (u32 r = 0; r < box1; ++r) {
    for (u32 e = 0; e < box0; ++e) {
      const long long g0 = static_cast<long long>(coord0) + e;
      const long long g1 = static_cast<long long>(coord1) + r;
      if (g0 < 0 || g1 < 0 || g0 >= static_cast<long long>(f[kMapDim0]) ||
          g1 >= static_cast<long long>(f[kMapDim1])) {
        continue;
      }
      const u32 address = emu::Swizzle128(src + r * row_bytes + e * element_bytes);
      std::memcpy(global + g1 * static_cast<long long>(f[kMapStride1Bytes]) + g0 * element_bytes,
                  emu::state().smem + address, element_bytes);
    }
  }
}
inline void tma_store_commit() {}
template <int kPending>
inline void tma_store_wait_read() {}

// ---- wgmma ----

enum class WgmmaType { kBf16, kE4m3 };

inline unsigned WarpgroupIndex() { return ::ptxbench_emu::thread_idx.x / 128; }
inline unsigned ThreadInWarpgroup() { return ::ptxbench_emu::thread_idx.x % 128; }

inline void WarpgroupSync() {
  emu::Block& b = *emu::state().block;
  const unsigned group = WarpgroupIndex();
  if (group >= b.warpgroup_barriers.size()) emu::Fail("wgmma outside a full warpgroup");
  b.warpgroup_barriers[group]->arrive_and_wait();
}

// Byte address of element (row, k) of a wgmma operand in shared memory: row is M (A) or N (B),
// k the reduction index; `mn_major` = the instruction's transpose flag for that operand.
inline u32 WgmmaOperandAddress(u64 desc, bool mn_major, u32 element_bytes, u32 row, u32 k) {
  const u32 start = static_cast<u32>(desc & 0x3FFFu) << 4;
  const u32 lbo = static_cast<u32>((desc >> 16) & 0x3FFFu) << 4;
  const u32 sbo = static_cast<u32>((desc >> 32) & 0x3FFFu) << 4;
  if (((desc >> 49) & 7u) != 0u) emu::Fail("wgmma descriptor base offset is not 0 (not emulated)");
  if ((desc >> 62) != 1u) emu::Fail("wgmma descriptor layout is not the 128B swizzle", desc >> 62);
  if (((desc >> 14) & 3u) != 0u || ((desc >> 30) & 3u) != 0u || ((desc >> 46) & 7u) != 0u ||
      ((desc >> 52) & 0x3FFu) != 0u) {
    emu::Fail("wgmma descriptor reserved bits set", static_cast<long long>(desc >> 32));
  }
  const u32 per_row = 128 / element_bytes;  // Elements in one 128-byte swizzle row.
  u32 address;
  if (mn_major) {
    // Rows of 128 bytes hold consecutive M/N elements of one k; 8 k-rows form a 1024-byte atom
    // (SBO apart along k); the next span of M/N elements is LBO away.
    address = start + (row % per_row) * element_bytes + (row / per_row) * lbo + (k % 8) * 128 +
              (k / 8) * sbo;
  } else {
    // Rows of 128 bytes are consecutive M/N indices; 8 of them form an atom, SBO apart. The
    // instruction's k extent (32 bytes) lies inside the row; the start address selects it.
    address = start + (row % 8) * 128 + (row / 8) * sbo + k * element_bytes;
  }
  address = emu::Swizzle128(address);
  emu::CheckSmem(address, element_bytes);
  return address;
}

inline float DecodeE4m3(unsigned char bits) {
  const int sign = bits >> 7, exponent = (bits >> 3) & 0xF, mantissa = bits & 7;
  if (exponent == 0xF && mantissa == 7) return NAN;
  const float v = exponent == 0 ? std::ldexp(static_cast<float>(mantissa), -9)
                                : std::ldexp(static_cast<float>(mantissa | 8), exponent - 10);
  return sign ? -v : v;
}

inline float SmemElement(WgmmaType type, u32 address) {
  if (type == WgmmaType::kE4m3) return DecodeE4m3(emu::state().smem[address]);
  u16 bits;
  std::memcpy(&bits, emu::state().smem + address, 2);
  return __uint_as_float(static_cast<u32>(bits) << 16);
}

struct WgmmaOp {
  u32 n = 0;
  u32 k = 16;  // 16 (bf16) or 32 (e4m3) per instruction.
  WgmmaType a_type = WgmmaType::kBf16, b_type = WgmmaType::kBf16;
  bool a_in_registers = false;
  u64 desc_a = 0, desc_b = 0;
  bool trans_a = false, trans_b = false;
  bool accumulate = false;
  std::array<float*, 128> d{};
  std::array<const u32*, 128> a{};

  void Execute() const {
    const u32 m = 64;
    std::vector<float> av(static_cast<size_t>(m) * k), bv(static_cast<size_t>(n) * k);
    for (u32 i = 0; i < m; ++i) {
      for (u32 kk = 0; kk < k; ++kk) {
        float value;
        if (a_in_registers && a_type == WgmmaType::kE4m3) {
          // A fragment (m64k32, 8-bit): warp i/16; lane (row%8)*4 + (k%16)/4; register
          // (row%16)/8 + 2*(k/16); byte k%4 (the lowest byte = the lowest k).
          const u32 r = i % 16;
          const u32 thread = (i / 16) * 32 + (r % 8) * 4 + (kk % 16) / 4;
          const u32 reg = a[thread][r / 8 + 2 * (kk / 16)];
          value = DecodeE4m3(static_cast<unsigned char>((reg >> (8 * (kk % 4))) & 0xFFu));
        } else if (a_in_registers) {
          // A fragment (m64k16, 16-bit): warp i/16; lane (row%8)*4 + (k%8)/2; register
          // (row%16)/8 + 2*(k/8); low half = even k.
          const u32 r = i % 16;
          const u32 thread = (i / 16) * 32 + (r % 8) * 4 + (kk % 8) / 2;
          const u32 reg = a[thread][r / 8 + 2 * (kk / 8)];
          value = __uint_as_float(((kk % 2) ? (reg >> 16) : (reg & 0xFFFFu)) << 16);
        } else {
          value = SmemElement(
              a_type,
              WgmmaOperandAddress(desc_a, trans_a, a_type == WgmmaType::kE4m3 ? 1 : 2, i, kk));
        }
        av[static_cast<size_t>(i) * k + kk] = value;
      }
    }
    for (u32 j = 0; j < n; ++j) {
      for (u32 kk = 0; kk < k; ++kk) {
        bv[static_cast<size_t>(j) * k + kk] = SmemElement(
            b_type,
            WgmmaOperandAddress(desc_b, trans_b, b_type == WgmmaType::kE4m3 ? 1 : 2, j, kk));
      }
    }
    for (u32 i = 0; i < m; ++i) {
      for (u32 j = 0; j < n; ++j) {
        float sum = 0.0f;
        for (u32 kk = 0; kk < k; ++kk) {
          sum += av[static_cast<size_t>(i) * k + kk] * bv[static_cast<size_t>(j) * k + kk];
        }
        // Accumulator (m64nN, fp32): warp i/16, lane (row%8)*4 + (col%8)/2, register
        // 4*(col/8) + 2*((row%16)/8) + col%2.
        const u32 r = i % 16;
        const u32 thread = (i / 16) * 32 + (r % 8) * 4 + (j % 8) / 2;
        float& cell = d[thread][4 * (j / 8) + 2 * (r / 8) + j % 2];
        cell = accumulate ? cell + sum : sum;
      }
    }
  }
};

// The collective issue: every thread of the warpgroup passes the same instruction and its own
// register operands; thread 0 queues (lazy) or runs (eager) the operation.
inline void WgmmaIssue(WgmmaOp op, float* d, const u32* a, int scale_d) {
  emu::Block& b = *emu::state().block;
  const unsigned t = emu::thread_idx.x;
  op.accumulate = scale_d != 0;
  b.wgmma_d[t] = d;
  b.wgmma_a[t] = a;
  b.wgmma_key[t] = op.desc_a * 0x9E3779B97F4A7C15ull ^ op.desc_b ^ (static_cast<u64>(op.n) << 1) ^
                   (static_cast<u64>(op.k) << 12) ^ (static_cast<u64>(op.trans_a) << 20) ^
                   (static_cast<u64>(op.trans_b) << 21) ^ (static_cast<u64>(op.accumulate) << 22) ^
                   (static_cast<u64>(op.a_in_registers) << 23) ^
                   (static_cast<u64>(op.a_type) << 24) ^ (static_cast<u64>(op.b_type) << 26);
  WarpgroupSync();
  if (ThreadInWarpgroup() == 0) {
    const unsigned first = WarpgroupIndex() * 128;
    for (unsigned i = 0; i < 128; ++i) {
      if (b.wgmma_key[first + i] != b.wgmma_key[t]) {
        emu::Fail("threads of a warpgroup issued different wgmma instructions (.aligned)", i);
      }
      op.d[i] = static_cast<float*>(b.wgmma_d[first + i]);
      op.a[i] = static_cast<const u32*>(b.wgmma_a[first + i]);
    }
    if (emu::state().lazy_mma) {
      b.wgmma_queues[WarpgroupIndex()].open.push_back([op] { op.Execute(); });
    } else {
      op.Execute();
      b.wgmma_queues[WarpgroupIndex()].open.push_back([] {});
    }
  }
  WarpgroupSync();
}

inline void wgmma_fence() {}

inline void wgmma_commit_group() {
  WarpgroupSync();
  if (ThreadInWarpgroup() == 0) {
    emu::Block::WgmmaQueue& q = emu::state().block->wgmma_queues[WarpgroupIndex()];
    q.committed.push_back(std::move(q.open));
    q.open.clear();
  }
  WarpgroupSync();
}

template <int kPending>
inline void wgmma_wait_group() {
  WarpgroupSync();
  if (ThreadInWarpgroup() == 0) {
    emu::Block::WgmmaQueue& q = emu::state().block->wgmma_queues[WarpgroupIndex()];
    while (q.committed.size() > static_cast<size_t>(kPending)) {
      for (const std::function<void()>& run : q.committed.front()) run();
      q.committed.erase(q.committed.begin());
    }
  }
  WarpgroupSync();
}

template <int kCount>
inline void wgmma_fence_operand(float (&)[kCount]) {}

template <u32 kN, int kAccumulators>
inline void IssueSs(float (&d)[kAccumulators], u64 desc_a, u64 desc_b, int scale_d, bool trans_a,
                    bool trans_b, WgmmaType type = WgmmaType::kBf16) {
  static_assert(kAccumulators * 2 == static_cast<int>(kN), "m64nN has N/2 fp32 per thread");
  WgmmaOp op;
  op.n = kN;
  op.k = type == WgmmaType::kE4m3 ? 32 : 16;
  op.a_type = op.b_type = type;
  op.desc_a = desc_a;
  op.desc_b = desc_b;
  op.trans_a = trans_a;
  op.trans_b = trans_b;
  WgmmaIssue(op, d, nullptr, scale_d);
}

template <u32 kN, int kAccumulators>
inline void IssueRs(float (&d)[kAccumulators], const u32 (&a)[4], u64 desc_b, int scale_d,
                    bool trans_b, WgmmaType type = WgmmaType::kBf16) {
  static_assert(kAccumulators * 2 == static_cast<int>(kN), "m64nN has N/2 fp32 per thread");
  WgmmaOp op;
  op.n = kN;
  op.k = type == WgmmaType::kE4m3 ? 32 : 16;
  op.a_type = op.b_type = type;
  op.a_in_registers = true;
  op.desc_b = desc_b;
  op.trans_b = trans_b;
  WgmmaIssue(op, d, a, scale_d);
}

inline void wgmma_m64n256k16_ss_bf16(float (&d)[128], u64 desc_a, u64 desc_b, int scale_d) {
  IssueSs<256>(d, desc_a, desc_b, scale_d, false, false);
}
inline void wgmma_m64n128k32_ss_e4m3(float (&d)[64], u64 desc_a, u64 desc_b, int scale_d) {
  IssueSs<128>(d, desc_a, desc_b, scale_d, false, false, WgmmaType::kE4m3);
}
inline void wgmma_m64n128k16_rs_bf16(float (&d)[64], const u32 (&a)[4], u64 desc_b, int scale_d) {
  IssueRs<128>(d, a, desc_b, scale_d, false);
}
template <int kTransA, int kTransB>
inline void wgmma_m64n8k16_ss_bf16_t(float (&d)[4], u64 desc_a, u64 desc_b, int scale_d) {
  IssueSs<8>(d, desc_a, desc_b, scale_d, kTransA != 0, kTransB != 0);
}
template <int kTransA, int kTransB>
inline void wgmma_m64n64k16_ss_bf16_t(float (&d)[32], u64 desc_a, u64 desc_b, int scale_d) {
  IssueSs<64>(d, desc_a, desc_b, scale_d, kTransA != 0, kTransB != 0);
}
template <int kTransA, int kTransB>
inline void wgmma_m64n128k16_ss_bf16_t(float (&d)[64], u64 desc_a, u64 desc_b, int scale_d) {
  IssueSs<128>(d, desc_a, desc_b, scale_d, kTransA != 0, kTransB != 0);
}
template <int kTransB>
inline void wgmma_m64n128k16_rs_bf16_t(float (&d)[64], const u32 (&a)[4], u64 desc_b, int scale_d) {
  IssueRs<128>(d, a, desc_b, scale_d, kTransB != 0);
}

template <int kTransB>
inline void wgmma_m64n64k16_rs_bf16_t(float (&d)[32], const u32 (&a)[4], u64 desc_b, int scale_d) {
  IssueRs<64>(d, a, desc_b, scale_d, kTransB != 0);
}
template <int kTransB>
inline void wgmma_m64n256k16_rs_bf16_t(float (&d)[128], const u32 (&a)[4], u64 desc_b,
                                       int scale_d) {
  IssueRs<256>(d, a, desc_b, scale_d, kTransB != 0);
}

// setmaxnreg only moves registers between warpgroups; nothing to emulate.
template <int kRegs>
inline void setmaxnreg_inc() {
  static_assert(kRegs >= 24 && kRegs <= 256 && kRegs % 8 == 0, "setmaxnreg range");
}
template <int kRegs>
inline void setmaxnreg_dec() {
  static_assert(kRegs >= 24 && kRegs <= 256 && kRegs % 8 == 0, "setmaxnreg range");
}

// ---- ldmatrix / stmatrix (x4): lane 8i + r gives the address of row r of matrix i ----
inline void ldmatrix_x4(u32 (&r)[4], const void* row_ptr) {
  const u32 mine = static_cast<u32>(__cvta_generic_to_shared(row_ptr));
  const u32 lane = emu::lane();
  for (u32 i = 0; i < 4; ++i) {
    const u32 row_address = static_cast<u32>(emu::WarpExchange(mine, 8 * i + lane / 4));
    const u32 address = row_address + (lane % 4) * 4;
    emu::CheckSmem(address, 4);
    std::memcpy(&r[i], emu::state().smem + address, 4);
  }
}

inline void stmatrix_x4(void* row_ptr, u32 r0, u32 r1, u32 r2, u32 r3) {
  const u32 mine = static_cast<u32>(__cvta_generic_to_shared(row_ptr));
  const u32 lane = emu::lane();
  const u32 values[4] = {r0, r1, r2, r3};
  u32 addresses[4];
  for (u32 i = 0; i < 4; ++i) {
    addresses[i] = static_cast<u32>(emu::WarpExchange(mine, 8 * i + lane / 4)) + (lane % 4) * 4;
  }
  for (u32 i = 0; i < 4; ++i) {
    emu::CheckSmem(addresses[i], 4);
    std::memcpy(emu::state().smem + addresses[i], &values[i], 4);
  }
  emu::WarpSync();
}

// cvt.rn.bf16x2.f32: round to nearest even, NaN stays NaN.
inline u32 Bf16Bits(float value) {
  u32 bits = __float_as_uint(value);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0) return 0x7FC0u;
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return bits >> 16;
}
inline u32 pack_bf16x2(float lo, float hi) { return Bf16Bits(lo) | (Bf16Bits(hi) << 16); }

inline void bulk_load_g2s(void* smem_dst, const void* gmem_src, u32 bytes, u64* bar) {
  const u32 dst = static_cast<u32>(__cvta_generic_to_shared(smem_dst));
  if (bytes % 16 != 0 || dst % 16 != 0 || reinterpret_cast<uintptr_t>(gmem_src) % 16 != 0) {
    emu::Fail("cp.async.bulk size or addresses not multiples of 16", dst, bytes);
  }
  emu::CheckSmem(dst, bytes);
  std::memcpy(emu::state().smem + dst, gmem_src, bytes);
  emu::MbarrierCompleteTx(bar, bytes);
}

inline void red_add_v2_f32(float* addr, float x, float y) {
  if (reinterpret_cast<uintptr_t>(addr) % 8 != 0) emu::Fail("red.global.v2 not 8-byte aligned");
  std::atomic_ref<float>(addr[0]).fetch_add(x);
  std::atomic_ref<float>(addr[1]).fetch_add(y);
}

inline float exp2_approx(float x) { return std::exp2(x); }

}  // namespace sm90
}  // namespace ptxbench

// Device math intrinsics the Hopper solutions call directly.
inline float __log2f(float x) { return std::log2(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __fdividef(float x, float y) { return x / y; }

#endif  // PTXBENCH_TOOLS_BLACKWELL_CHECK_EMULATOR_EMU_HOPPER_PRIMITIVES_H_
