// CPU emulation of the sm_100a primitives used by the PTXBench Blackwell solutions, so that the
// solution's own source (its indexing, descriptors, barrier protocol, tensor-memory lane rules)
// can be executed and compared with a reference on a machine without a Blackwell GPU.
//
// What this is: every CUDA thread is a std::thread; one CTA runs at a time; warp collectives
// rendezvous the 32 lanes; mbarriers keep phase / pending-arrival / transaction-byte state;
// TMA copies a box into the emulated shared memory with the 128B swizzle; tcgen05.mma decodes the
// instruction descriptor and both shared-memory descriptors (start, LBO, SBO, swizzle, version
// bits) and reads its operands through the canonical layouts of the PTX ISA ("Shared Memory
// Matrix Layout": K-major SW128 rows of 128 bytes with 8-row groups SBO apart; MN-major SW128
// spans of 64 elements LBO apart and 8-row K groups SBO apart), then applies the swizzle to the
// absolute shared address. Tensor memory is 128 lanes x 512 columns of 32-bit cells.
//
// What this is not: a model of the hardware's timing or of undocumented behaviour. The layouts
// above are our reading of the PTX ISA; if that reading is wrong, the emulator and the kernels
// are wrong together. Checks that are real: a warp touching tensor-memory lanes outside its
// quarter, columns outside the allocation, memory left allocated at exit, shared-memory accesses
// outside the plan's dynamic size, unaligned swizzled TMA destinations, deadlocks (watchdog), and
// MMAs whose operands are overwritten before the commit that covers them (lazy mode, below).
//
// PTXBENCH_EMU_LAZY_MMA=1 executes each thread's tcgen05.mma only at its next tcgen05.commit (the
// latest moment the hardware may read the operands); the default executes at issue (earliest).
// A kernel correct under the PTX rules gives the same result both ways.
#ifndef PTXBENCH_TOOLS_BLACKWELL_CHECK_EMULATOR_EMU_RUNTIME_H_
#define PTXBENCH_TOOLS_BLACKWELL_CHECK_EMULATOR_EMU_RUNTIME_H_

#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#define __device__
#define __host__
#define __forceinline__ inline
#define __global__
#define __launch_bounds__(...)
#define __grid_constant__

struct EmuDim3 {
  unsigned int x = 0, y = 0, z = 0;
};

// The CUtensorMap the kernels take by value; the emulator stores its own fields in `opaque`.
struct alignas(64) CUtensorMap {
  unsigned long long opaque[16];
};
#define PTXBENCH_CUTENSORMAP_DEFINED

namespace ptxbench_emu {

inline thread_local EmuDim3 thread_idx;
inline thread_local EmuDim3 block_idx;
inline thread_local EmuDim3 grid_dim;
inline thread_local EmuDim3 block_dim;

[[noreturn]] inline void Fail(const char* what, long long a = 0, long long b = 0) {
  std::fprintf(stderr, "EMULATION ERROR (block %u,%u thread %u): %s [%lld, %lld]\n", block_idx.x,
               block_idx.y, thread_idx.x, what, a, b);
  std::fflush(stderr);
  std::abort();
}

constexpr unsigned kSmemBytes = 256 * 1024;
// Shared address of the dynamic shared memory: as if 96 bytes of static shared memory came
// first, so the kernels' 1024-byte realignment is exercised.
constexpr unsigned kDynamicBase = 96;

struct Block {
  unsigned threads = 0;
  unsigned dynamic_bytes = 0;
  std::unique_ptr<std::barrier<>> block_barrier;
  std::vector<std::unique_ptr<std::barrier<>>> warp_barriers;
  std::mutex named_mutex;
  std::map<std::pair<unsigned, unsigned>, std::unique_ptr<std::barrier<>>> named_barriers;
  std::vector<unsigned long long> exchange;  // One slot per thread for warp collectives.
  // Hopper warpgroup collectives (emu_hopper_primitives.h): one barrier per full warpgroup of
  // 128 threads, and one slot per thread for the pointers a wgmma gathers.
  std::vector<std::unique_ptr<std::barrier<>>> warpgroup_barriers;
  std::vector<void*> wgmma_d;
  std::vector<const void*> wgmma_a;
  std::vector<unsigned long long> wgmma_key;
  // Per warpgroup: the wgmma operations of the open (not yet committed) group and of each
  // committed group not yet waited for, oldest first; each runs when its group completes.
  struct WgmmaQueue {
    std::vector<std::function<void()>> open;
    std::vector<std::vector<std::function<void()>>> committed;
  };
  std::vector<WgmmaQueue> wgmma_queues;
};

struct Mbarrier {
  unsigned expected = 0;
  unsigned pending = 0;
  long long tx = 0;
  unsigned long long completed_phases = 0;
};

struct PendingMma {
  unsigned d_tmem;
  unsigned long long a_desc, b_desc;
  unsigned idesc;
  bool accumulate;
  bool fp8 = false;  // .kind::f8f6f4 (e4m3 operands, K = 32) instead of .kind::f16
};

struct State {
  alignas(1024) unsigned char smem[kSmemBytes];
  unsigned tmem[128][512];
  unsigned tmem_allocated = 0;  // Columns; base is always column 0.
  Block* block = nullptr;
  std::mutex mbarrier_mutex;
  std::map<const void*, Mbarrier> mbarriers;
  bool lazy_mma = false;
  std::chrono::steady_clock::time_point deadline;
};

inline State& state() {
  static State* s = new State();
  return *s;
}

inline thread_local std::vector<PendingMma> pending_mmas;

inline unsigned char* dynamic_smem_base() { return state().smem + kDynamicBase; }

inline void CheckSmem(unsigned address, unsigned bytes) {
  const Block& b = *state().block;
  if (address < kDynamicBase || address + bytes > kDynamicBase + b.dynamic_bytes) {
    Fail("shared-memory access outside the dynamic shared memory", address, bytes);
  }
}

inline unsigned Swizzle128(unsigned address) { return address ^ (((address >> 7) & 7u) << 4); }

inline void CheckDeadline() {
  if (std::chrono::steady_clock::now() > state().deadline) Fail("deadline passed (deadlock?)");
}

inline unsigned warp() { return thread_idx.x / 32; }
inline unsigned lane() { return thread_idx.x % 32; }

inline void WarpSync() { state().block->warp_barriers[warp()]->arrive_and_wait(); }

// All 32 lanes contribute `value`; returns every lane's contribution.
inline unsigned long long WarpExchange(unsigned long long value, unsigned source_lane) {
  Block& b = *state().block;
  b.exchange[thread_idx.x] = value;
  WarpSync();
  const unsigned long long result = b.exchange[warp() * 32 + source_lane];
  WarpSync();
  return result;
}

// ---- mbarrier ----
inline void MbarrierCompleteIfDone(Mbarrier& m) {
  if (m.pending == 0 && m.tx == 0) {
    ++m.completed_phases;
    m.pending = m.expected;
  }
}

inline void MbarrierInit(const void* bar, unsigned count) {
  std::lock_guard<std::mutex> lock(state().mbarrier_mutex);
  if (count == 0) Fail("mbarrier.init with count 0");
  state().mbarriers[bar] = Mbarrier{count, count, 0, 0};
}

inline Mbarrier& FindMbarrier(const void* bar) {
  auto it = state().mbarriers.find(bar);
  if (it == state().mbarriers.end()) Fail("mbarrier used before init");
  return it->second;
}

inline void MbarrierArrive(const void* bar, long long tx_bytes) {
  std::lock_guard<std::mutex> lock(state().mbarrier_mutex);
  Mbarrier& m = FindMbarrier(bar);
  m.tx += tx_bytes;
  if (m.pending == 0) Fail("mbarrier arrival with no pending arrivals");
  --m.pending;
  MbarrierCompleteIfDone(m);
}

inline void MbarrierExpectTx(const void* bar, long long tx_bytes) {
  std::lock_guard<std::mutex> lock(state().mbarrier_mutex);
  FindMbarrier(bar).tx += tx_bytes;
}

inline void MbarrierCompleteTx(const void* bar, long long tx_bytes) {
  std::lock_guard<std::mutex> lock(state().mbarrier_mutex);
  Mbarrier& m = FindMbarrier(bar);
  m.tx -= tx_bytes;
  MbarrierCompleteIfDone(m);
}

// True once the phase of parity `parity` has completed: the current (incomplete) phase has the
// other parity.
inline bool MbarrierTryWait(const void* bar, unsigned parity) {
  bool done;
  {
    std::lock_guard<std::mutex> lock(state().mbarrier_mutex);
    done = (FindMbarrier(bar).completed_phases & 1u) != (parity & 1u);
  }
  if (!done) {
    CheckDeadline();
    std::this_thread::yield();
  }
  return done;
}

// ---- TMA (cp.async.bulk.tensor, 2-D tile mode) ----
// Tensor-map fields the emulator's launchers write into CUtensorMap::opaque.
enum EmuMapField : int {
  kMapAddress = 0,
  kMapDim0 = 1,
  kMapDim1 = 2,
  kMapStride1Bytes = 3,
  kMapBox0 = 4,
  kMapBox1 = 5,
  kMapSwizzleBytes = 6,
  kMapElementBytes = 7,
};

// One box into shared memory at `smem_dst`, written with the 128B swizzle of the absolute shared
// address, out-of-bounds elements zero-filled; then complete_tx of the full box on `bar`.
inline void TmaLoad2d(void* smem_dst, const CUtensorMap* map, const void* bar, int coord0,
                      int coord1);

// ---- tensor memory ----
inline void CheckTmemWarpAccess(unsigned taddr, unsigned columns) {
  const unsigned lane_field = taddr >> 16;
  const unsigned column = taddr & 0xFFFFu;
  if (lane_field != 32 * (warp() % 4)) {
    Fail("tcgen05.ld/st lane field is not this warp's quarter (PTX ISA access restriction)",
         lane_field, warp());
  }
  if (column + columns > state().tmem_allocated) {
    Fail("tcgen05.ld/st past the allocated columns", column, columns);
  }
}

// ---- tcgen05.mma ----
inline unsigned OperandAddress(unsigned long long desc, bool mn_major, unsigned row, unsigned k,
                               unsigned element_bytes = 2) {
  const unsigned start = static_cast<unsigned>(desc & 0x3FFFu) << 4;
  const unsigned lbo = static_cast<unsigned>((desc >> 16) & 0x3FFFu) << 4;
  const unsigned sbo = static_cast<unsigned>((desc >> 32) & 0x3FFFu) << 4;
  if (((desc >> 46) & 7u) != 1u) Fail("smem descriptor version bits 46..48 are not 0b001");
  if (((desc >> 49) & 7u) != 0u) Fail("smem descriptor base offset is not 0 (not emulated)");
  if (((desc >> 52) & 1u) != 0u) Fail("smem descriptor LBO mode is not 0 (not emulated)");
  if ((desc >> 61) != 2u) Fail("smem descriptor swizzle is not 128B (not emulated)", desc >> 61);
  unsigned address;
  if (mn_major) {
    if (element_bytes != 2) Fail("MN-major 8-bit tcgen05 operand (not emulated)");
    address = start + (row % 64) * 2 + (row / 64) * lbo + (k % 8) * 128 + (k / 8) * sbo;
  } else {
    address = start + (row % 8) * 128 + (row / 8) * sbo + k * element_bytes;
  }
  address = Swizzle128(address);
  CheckSmem(address, element_bytes);
  return address;
}

inline float Bf16At(unsigned address) {
  unsigned short bits;
  std::memcpy(&bits, state().smem + address, 2);
  const unsigned widened = static_cast<unsigned>(bits) << 16;
  float value;
  std::memcpy(&value, &widened, 4);
  return value;
}

// Named barrier `id` of `thread_count` threads of the running CTA (bar.sync / bar.arrive),
// created on its first use; `what` names the instruction in the failure.
inline std::barrier<>& NamedBarrier(unsigned id, unsigned thread_count, const char* what) {
  Block& b = *state().block;
  if (id == 0 || id > 15 || thread_count % 32 != 0) Fail(what, id, thread_count);
  std::lock_guard<std::mutex> lock(b.named_mutex);
  auto& slot = b.named_barriers[{id, thread_count}];
  if (!slot) slot = std::make_unique<std::barrier<>>(thread_count);
  return *slot;
}

// An e4m3 operand byte (fp8 kind): sign, 4-bit exponent (bias 7), 3-bit mantissa; 0x7F/0xFF NaN.
inline float E4m3At(unsigned address) {
  const unsigned bits = state().smem[address];
  const unsigned exponent = (bits >> 3) & 0xFu, mantissa = bits & 7u;
  if (exponent == 0xFu && mantissa == 7u) return NAN;
  const float v = exponent == 0 ? std::ldexp(static_cast<float>(mantissa), -9)
                                : std::ldexp(static_cast<float>(mantissa | 8u),
                                             static_cast<int>(exponent) - 10);
  return (bits & 0x80u) ? -v : v;
}

inline void ExecuteMma(const PendingMma& op) {
  const unsigned idesc = op.idesc;
  if ((idesc & 0xFu) != 0) Fail("idesc sparsity/saturate bits set (not emulated)");
  if (((idesc >> 4) & 3u) != 1u) Fail("idesc D format is not f32");
  // .kind::f16: A/B format 1 = bf16 (f16 not emulated); .kind::f8f6f4: 0 = e4m3 (others not).
  const unsigned format = op.fp8 ? 0u : 1u;
  if (((idesc >> 7) & 7u) != format || ((idesc >> 10) & 7u) != format) {
    Fail(op.fp8 ? "idesc A/B not e4m3" : "idesc A/B not bf16");
  }
  if (((idesc >> 13) & 3u) != 0u) Fail("idesc negate bits set");
  if (((idesc >> 23) & 1u) != 0u) Fail("idesc reserved bit 23 set");
  const bool a_mn = (idesc >> 15) & 1u;
  const bool b_mn = (idesc >> 16) & 1u;
  const unsigned n = ((idesc >> 17) & 0x3Fu) << 3;
  const unsigned m = ((idesc >> 24) & 0x1Fu) << 4;
  if (m != 128) Fail("only M = 128 (cta_group::1) is emulated", m);
  if (n < 16 || n > 256 || n % 16 != 0) Fail("invalid N for M = 128", n);
  if ((op.d_tmem >> 16) != 0) Fail("MMA accumulator address has a lane field");
  const unsigned column = op.d_tmem & 0xFFFFu;
  if (column + n > state().tmem_allocated) Fail("MMA accumulator past the allocation", column, n);
  const unsigned kk = op.fp8 ? 32 : 16;  // K per instruction: 32 bytes of a swizzled row either way
  const unsigned bytes = op.fp8 ? 1 : 2;
  auto element = [&](unsigned long long desc, bool mn, unsigned r, unsigned k) {
    const unsigned address = OperandAddress(desc, mn, r, k, bytes);
    return op.fp8 ? E4m3At(address) : Bf16At(address);
  };
  std::vector<float> a(static_cast<size_t>(m) * kk), b(static_cast<size_t>(n) * kk);
  for (unsigned r = 0; r < m; ++r)
    for (unsigned k = 0; k < kk; ++k) a[r * kk + k] = element(op.a_desc, a_mn, r, k);
  for (unsigned r = 0; r < n; ++r)
    for (unsigned k = 0; k < kk; ++k) b[r * kk + k] = element(op.b_desc, b_mn, r, k);
  for (unsigned i = 0; i < m; ++i) {
    for (unsigned j = 0; j < n; ++j) {
      float sum = 0.0f;
      for (unsigned k = 0; k < kk; ++k) sum += a[i * kk + k] * b[j * kk + k];
      unsigned& cell = state().tmem[i][column + j];
      float previous;
      std::memcpy(&previous, &cell, 4);
      const float result = op.accumulate ? previous + sum : sum;
      std::memcpy(&cell, &result, 4);
    }
  }
}

// ---- launching ----
inline void Launch(const std::function<void()>& kernel, EmuDim3 grid, unsigned threads,
                   unsigned dynamic_bytes) {
  State& s = state();
  if (kDynamicBase + dynamic_bytes > kSmemBytes) Fail("dynamic shared memory too large");
  const unsigned grid_z = grid.z == 0 ? 1 : grid.z;  // {x, y} launches leave z at 0.
  for (unsigned bz = 0; bz < grid_z; ++bz) {
  for (unsigned by = 0; by < grid.y; ++by) {
    for (unsigned bx = 0; bx < grid.x; ++bx) {
      Block block;
      block.threads = threads;
      block.dynamic_bytes = dynamic_bytes;
      block.block_barrier = std::make_unique<std::barrier<>>(threads);
      for (unsigned w = 0; w < (threads + 31) / 32; ++w) {
        block.warp_barriers.push_back(std::make_unique<std::barrier<>>(32));
      }
      block.exchange.assign(threads, 0);
      for (unsigned g = 0; g < threads / 128; ++g) {
        block.warpgroup_barriers.push_back(std::make_unique<std::barrier<>>(128));
      }
      block.wgmma_d.assign(threads, nullptr);
      block.wgmma_a.assign(threads, nullptr);
      block.wgmma_key.assign(threads, 0);
      block.wgmma_queues.resize(threads / 128);
      s.block = &block;
      s.mbarriers.clear();
      std::memset(s.smem, 0xFF, sizeof(s.smem));  // bf16 0xFFFF is NaN: unwritten data shows.
      s.tmem_allocated = 0;
      std::vector<std::thread> pool;
      pool.reserve(threads);
      for (unsigned t = 0; t < threads; ++t) {
        pool.emplace_back([&, t, bx, by, bz] {
          thread_idx = EmuDim3{t, 0, 0};
          block_idx = EmuDim3{bx, by, bz};
          grid_dim = EmuDim3{grid.x, grid.y, grid_z};
          block_dim = EmuDim3{threads, 1, 1};
          pending_mmas.clear();
          kernel();
          if (!pending_mmas.empty()) Fail("tcgen05.mma issued but never committed");
        });
      }
      for (std::thread& thread : pool) thread.join();
      if (s.tmem_allocated != 0) Fail("CTA exited with tensor memory still allocated");
      for (const Block::WgmmaQueue& q : block.wgmma_queues) {
        if (!q.open.empty() || !q.committed.empty()) {
          Fail("CTA exited with wgmma operations never waited for (wgmma.wait_group)",
               static_cast<long long>(q.open.size()), static_cast<long long>(q.committed.size()));
        }
      }
      s.block = nullptr;
    }
  }
  }
}

}  // namespace ptxbench_emu

#define threadIdx (::ptxbench_emu::thread_idx)
#define blockIdx (::ptxbench_emu::block_idx)
#define gridDim (::ptxbench_emu::grid_dim)
#define blockDim (::ptxbench_emu::block_dim)

inline float __uint_as_float(unsigned v) {
  float f;
  std::memcpy(&f, &v, 4);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned v;
  std::memcpy(&v, &f, 4);
  return v;
}
inline float __ldg(const float* p) { return *p; }
inline int min(int a, int b) { return a < b ? a : b; }
inline float __int_as_float(int v) { return __uint_as_float(static_cast<unsigned>(v)); }
inline unsigned long long __cvta_generic_to_shared(const void* ptr) {
  const unsigned char* p = static_cast<const unsigned char*>(ptr);
  const unsigned char* base = ::ptxbench_emu::state().smem;
  if (p < base || p >= base + ::ptxbench_emu::kSmemBytes) {
    ::ptxbench_emu::Fail("__cvta_generic_to_shared of a pointer outside the emulated smem");
  }
  return static_cast<unsigned long long>(p - base);
}

template <typename T>
inline T __shfl_sync(unsigned /*mask*/, T value, int source_lane) {
  static_assert(sizeof(T) <= 8);
  unsigned long long bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  bits = ::ptxbench_emu::WarpExchange(bits, static_cast<unsigned>(source_lane) % 32);
  T result;
  std::memcpy(&result, &bits, sizeof(T));
  return result;
}

template <typename T>
inline T __shfl_xor_sync(unsigned mask, T value, int lane_mask) {
  return __shfl_sync(mask, value, static_cast<int>(::ptxbench_emu::lane() ^ lane_mask));
}

inline bool __all_sync(unsigned /*mask*/, bool predicate) {
  ::ptxbench_emu::Block& b = *::ptxbench_emu::state().block;
  b.exchange[threadIdx.x] = predicate ? 1 : 0;
  ::ptxbench_emu::WarpSync();
  bool all = true;
  for (unsigned l = 0; l < 32; ++l) all = all && b.exchange[::ptxbench_emu::warp() * 32 + l] != 0;
  ::ptxbench_emu::WarpSync();
  return all;
}

inline void __syncwarp(unsigned /*mask*/ = 0xffffffffu) { ::ptxbench_emu::WarpSync(); }
inline void __syncthreads() { ::ptxbench_emu::state().block->block_barrier->arrive_and_wait(); }

inline void ptxbench_emu::TmaLoad2d(void* smem_dst, const CUtensorMap* map, const void* bar,
                                    int coord0, int coord1) {
  const unsigned long long* f = map->opaque;
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  const unsigned element_bytes = static_cast<unsigned>(f[kMapElementBytes]);
  const unsigned box0 = static_cast<unsigned>(f[kMapBox0]);
  const unsigned box1 = static_cast<unsigned>(f[kMapBox1]);
  const unsigned row_bytes = box0 * element_bytes;
  const bool swizzled = f[kMapSwizzleBytes] == 128;
  if (!swizzled && f[kMapSwizzleBytes] != 0) Fail("emulated TMA: 128B swizzle or none");
  if (swizzled && row_bytes != 128) Fail("128B swizzle needs a 128-byte inner box here", row_bytes);
  if (swizzled && dst % 1024 != 0) Fail("128B-swizzled TMA destination not 1024-byte aligned", dst);
  if (!swizzled && dst % 16 != 0) Fail("TMA destination not 16-byte aligned", dst);
  CheckSmem(dst, row_bytes * box1);
  const unsigned char* global = reinterpret_cast<const unsigned char*>(f[kMapAddress]);
  for (unsigned r = 0; r < box1; ++r) {
    for (unsigned e = 0; e < box0; ++e) {
      const long long g0 = static_cast<long long>(coord0) + e;
      const long long g1 = static_cast<long long>(coord1) + r;
      const unsigned address = swizzled ? Swizzle128(dst + r * row_bytes + e * element_bytes)
                                        : dst + r * row_bytes + e * element_bytes;
      if (g0 >= 0 && g1 >= 0 && g0 < static_cast<long long>(f[kMapDim0]) &&
          g1 < static_cast<long long>(f[kMapDim1])) {
        std::memcpy(state().smem + address,
                    global + g1 * static_cast<long long>(f[kMapStride1Bytes]) + g0 * element_bytes,
                    element_bytes);
      } else {
        std::memset(state().smem + address, 0, element_bytes);
      }
    }
  }
  MbarrierCompleteTx(bar, static_cast<long long>(row_bytes) * box1);
}

#endif  // PTXBENCH_TOOLS_BLACKWELL_CHECK_EMULATOR_EMU_RUNTIME_H_
