// Emulated bodies of the ptxbench_blackwell.cuh wrappers whose real bodies are inline PTX. The
// generated header (make_header.py) is: this file, then the real header with exactly those
// wrappers removed, so every pure helper (descriptor and instruction-descriptor packing, the
// swizzle offset, tensor-memory addresses, the mbarrier wait loop) is the real one.
// Signatures must match the real header's; a wrapper the real header gains without an emulated
// body here fails the emulator's build, not silently.
#ifndef PTXBENCH_TOOLS_BLACKWELL_CHECK_EMULATOR_EMU_PRIMITIVES_H_
#define PTXBENCH_TOOLS_BLACKWELL_CHECK_EMULATOR_EMU_PRIMITIVES_H_

#include "emu_runtime.h"

namespace ptxbench {
namespace sm100 {

using u16 = unsigned short;
using u32 = unsigned int;
using u64 = unsigned long long;
namespace emu = ::ptxbench_emu;

// Tensor-map fields the emulator's launcher writes into CUtensorMap::opaque (emu_runtime.h).
using emu::EmuMapField;
using emu::kMapAddress;
using emu::kMapBox0;
using emu::kMapBox1;
using emu::kMapDim0;
using emu::kMapDim1;
using emu::kMapElementBytes;
using emu::kMapStride1Bytes;
using emu::kMapSwizzleBytes;

inline bool elect_one() {
  // Every lane calls it (full member mask); lane 0 is as good a choice as the hardware's.
  emu::WarpSync();
  return emu::lane() == 0;
}

inline void mbarrier_init(u64* bar, u32 arrival_count) { emu::MbarrierInit(bar, arrival_count); }
inline void fence_mbarrier_init() {}
inline void mbarrier_arrive(u64* bar) { emu::MbarrierArrive(bar, 0); }
inline void mbarrier_arrive_expect_tx(u64* bar, u32 tx_bytes) {
  emu::MbarrierArrive(bar, static_cast<long long>(tx_bytes));
}
inline void mbarrier_expect_tx(u64* bar, u32 tx_bytes) {
  emu::MbarrierExpectTx(bar, static_cast<long long>(tx_bytes));
}
inline bool mbarrier_try_wait_parity(u64* bar, u32 phase_parity) {
  return emu::MbarrierTryWait(bar, phase_parity);
}
inline void fence_proxy_async_shared() {}
inline void prefetch_tensormap(const CUtensorMap*) {}

inline void tma_load_2d(void* smem_dst, const CUtensorMap* map, u64* bar, int coord0, int coord1) {
  emu::TmaLoad2d(smem_dst, map, bar, coord0, coord1);
}

inline void tma_load_3d(void*, const CUtensorMap*, u64*, int, int, int) {
  emu::Fail("tma_load_3d is not emulated");
}
inline void tma_store_2d(const CUtensorMap*, const void*, int, int) {
  emu::Fail("tma_store_2d is not emulated");
}
inline void tma_store_commit() {}
template <int kPending>
inline void tma_store_wait_read() {}
template <int kPending>
inline void tma_store_wait_all() {}

inline void tmem_alloc(u32* smem_result, u32 num_columns) {
  // Warp-wide: every lane executes it; one allocation per warp.
  emu::WarpSync();
  if (emu::lane() == 0) {
    if (num_columns < 32 || num_columns > 512 || (num_columns & (num_columns - 1)) != 0) {
      emu::Fail("tcgen05.alloc column count not a power of two in 32..512", num_columns);
    }
    if (emu::state().tmem_allocated != 0) emu::Fail("second tcgen05.alloc (not emulated)");
    emu::state().tmem_allocated = num_columns;
    for (auto& lane_cells : emu::state().tmem) {
      for (u32& cell : lane_cells) cell = 0x7FC00000u;  // NaN: reading unwritten cells shows.
    }
    *smem_result = 0;
  }
  emu::WarpSync();
}
inline void tmem_relinquish_alloc_permit() {}
inline void tmem_dealloc(u32 tmem_base, u32 num_columns) {
  emu::WarpSync();
  if (emu::lane() == 0) {
    if (tmem_base != 0 || num_columns != emu::state().tmem_allocated) {
      emu::Fail("tcgen05.dealloc does not match the allocation", tmem_base, num_columns);
    }
    emu::state().tmem_allocated = 0;
  }
  emu::WarpSync();
}
inline void tcgen05_fence_before_thread_sync() {}
inline void tcgen05_fence_after_thread_sync() {}

inline void mma_f16_ss(u32 d_tmem, u64 a_desc, u64 b_desc, u32 idesc, bool accumulate) {
  const emu::PendingMma op{d_tmem, a_desc, b_desc, idesc, accumulate};
  if (emu::state().lazy_mma) {
    emu::pending_mmas.push_back(op);
  } else {
    emu::ExecuteMma(op);
  }
}

// .kind::f8f6f4 with e4m3 operands (the instruction descriptor's formats are checked at
// execution), K = 32 per instruction.
inline void mma_f8f6f4_ss(u32 d_tmem, u64 a_desc, u64 b_desc, u32 idesc, bool accumulate) {
  const emu::PendingMma op{d_tmem, a_desc, b_desc, idesc, accumulate, /*fp8=*/true};
  if (emu::state().lazy_mma) {
    emu::pending_mmas.push_back(op);
  } else {
    emu::ExecuteMma(op);
  }
}

inline void tcgen05_commit(u64* bar) {
  for (const emu::PendingMma& op : emu::pending_mmas) emu::ExecuteMma(op);
  emu::pending_mmas.clear();
  emu::MbarrierArrive(bar, 0);
}

template <int kColumns>
inline void TmemLoad(u32 taddr, u32 (&r)[kColumns]) {
  emu::CheckTmemWarpAccess(taddr, kColumns);
  const u32 lane = (taddr >> 16) + emu::lane();
  for (int i = 0; i < kColumns; ++i) r[i] = emu::state().tmem[lane][(taddr & 0xFFFFu) + i];
}
template <int kColumns>
inline void TmemStore(u32 taddr, const u32 (&r)[kColumns]) {
  emu::CheckTmemWarpAccess(taddr, kColumns);
  const u32 lane = (taddr >> 16) + emu::lane();
  for (int i = 0; i < kColumns; ++i) emu::state().tmem[lane][(taddr & 0xFFFFu) + i] = r[i];
}
inline void tmem_ld_32x32b_x8(u32 taddr, u32 (&r)[8]) { TmemLoad(taddr, r); }
inline void tmem_ld_32x32b_x16(u32 taddr, u32 (&r)[16]) { TmemLoad(taddr, r); }
inline void tmem_ld_32x32b_x32(u32 taddr, u32 (&r)[32]) { TmemLoad(taddr, r); }
inline void tmem_st_32x32b_x8(u32 taddr, const u32 (&r)[8]) { TmemStore(taddr, r); }
inline void tmem_st_32x32b_x16(u32 taddr, const u32 (&r)[16]) { TmemStore(taddr, r); }
inline void tmem_st_32x32b_x32(u32 taddr, const u32 (&r)[32]) { TmemStore(taddr, r); }
inline void tcgen05_wait_ld() {}
template <int kCount>
inline void tcgen05_wait_ld(u32 (&)[kCount]) {}
inline void tcgen05_wait_st() {}

// cvt.rn.bf16x2.f32: round to nearest even, NaN stays NaN.
inline u32 Bf16Bits(float value) {
  u32 bits = __float_as_uint(value);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0) return 0x7FC0u;
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return bits >> 16;
}
inline u32 pack_bf16x2(float lo, float hi) { return Bf16Bits(lo) | (Bf16Bits(hi) << 16); }

inline void st_global_v4(void* ptr, u32 a, u32 b, u32 c, u32 d) {
  if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0) emu::Fail("st.global.v4 not 16-byte aligned");
  const u32 v[4] = {a, b, c, d};
  std::memcpy(ptr, v, 16);
}

inline void named_barrier_sync(u32 barrier_id, u32 thread_count) {
  emu::NamedBarrier(barrier_id, thread_count, "bar.sync id/count invalid").arrive_and_wait();
}

inline void st_shared_v4(u32 smem_address, u32 a, u32 b, u32 c, u32 d) {
  if (smem_address % 16 != 0) emu::Fail("st.shared.v4 not 16-byte aligned", smem_address);
  emu::CheckSmem(smem_address, 16);
  const u32 v[4] = {a, b, c, d};
  std::memcpy(emu::state().smem + smem_address, v, 16);
}

inline void ld_global_nc_v4(const void* ptr, u32 (&r)[4]) {
  if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0) emu::Fail("ld.global.v4 not 16-byte aligned");
  std::memcpy(r, ptr, 16);
}

inline float exp2_approx(float x) { return std::exp2(x); }
inline float log2_approx(float x) { return std::log2(x); }

inline void red_add_global_v4_f32(float* ptr, float a, float b, float c, float d) {
  if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0) emu::Fail("red.global.v4 not 16-byte aligned");
  const float v[4] = {a, b, c, d};
  for (int i = 0; i < 4; ++i) std::atomic_ref<float>(ptr[i]).fetch_add(v[i]);
}

}  // namespace sm100
}  // namespace ptxbench

#endif  // PTXBENCH_TOOLS_BLACKWELL_CHECK_EMULATOR_EMU_PRIMITIVES_H_
