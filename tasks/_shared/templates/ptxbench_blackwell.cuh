// PTXBench helper device functions for NVIDIA Blackwell (sm_100a, B200).
//
// Thin inline-PTX wrappers, written for PTXBench, around the instructions a Blackwell kernel
// needs: warp helpers, mbarriers, TMA bulk tensor copies, and the 5th-generation tensor core
// (tcgen05: tensor-memory allocation, MMA, commit, tensor-memory loads and stores, fences).
// Each wrapper is one or two PTX instructions; nothing here hides a synchronization decision.
// The rules each wrapper relies on are written next to it; the PTX ISA (sections "Tensor Memory",
// "tcgen05", "cp.async.bulk.tensor", "mbarrier") is the authority.
//
// Compiles under NVRTC with no CUDA headers (-arch=sm_100a). Everything is in namespace
// ptxbench::sm100 so this header can coexist with the Hopper one.
#ifndef PTXBENCH_TASKS_SHARED_TEMPLATES_PTXBENCH_BLACKWELL_CUH_
#define PTXBENCH_TASKS_SHARED_TEMPLATES_PTXBENCH_BLACKWELL_CUH_

// The harness passes TMA descriptors by value as `const __grid_constant__ CUtensorMap`. Without
// cuda.h (NVRTC) the type must still exist with the driver's size (128 B) and alignment (64 B).
// The same guard is used by the Hopper header, so including both is harmless.
#ifndef CUDA_VERSION
#ifndef PTXBENCH_CUTENSORMAP_DEFINED
#define PTXBENCH_CUTENSORMAP_DEFINED
struct alignas(64) CUtensorMap {
  unsigned long long opaque[16];
};
#endif  // PTXBENCH_CUTENSORMAP_DEFINED
#endif  // CUDA_VERSION

namespace ptxbench {
namespace sm100 {

using u16 = unsigned short;
using u32 = unsigned int;
using u64 = unsigned long long;

// ---------------------------------------------------------------------------------------------
// Threads and warps
// ---------------------------------------------------------------------------------------------

// The warp index within the block, made warp-uniform with a shuffle so the compiler can keep
// role dispatch (`if (warp_index() == 0)`) in uniform registers and not split the warp.
__device__ __forceinline__ int warp_index() {
  return __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 32, 0);
}

__device__ __forceinline__ int lane_index() { return static_cast<int>(threadIdx.x) % 32; }

// Which 32-lane quarter of tensor memory this warp may touch with tcgen05.ld/st: the warp's rank
// inside its aligned group of four warps (PTX ISA: warp w accesses lanes 32*(w%4) .. +31).
__device__ __forceinline__ int tmem_lane_quarter() { return warp_index() % 4; }

// elect.sync: true in exactly one active lane of a fully active warp. Use it for single-thread
// work (issuing TMA or MMA) so the choice of lane is left to the hardware. Every lane of the warp
// must call it (the member mask is the full warp).
__device__ __forceinline__ bool elect_one() {
  u32 elected = 0;
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "elect.sync _|p, 0xffffffff;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(elected));
  return elected != 0;
}

// 32-bit shared-state-space address of a generic pointer into shared memory; mbarrier, TMA and
// tcgen05 operands take this form.
__device__ __forceinline__ u32 smem_u32(const void* ptr) {
  return static_cast<u32>(__cvta_generic_to_shared(ptr));
}

// ---------------------------------------------------------------------------------------------
// mbarrier (64-bit barrier object in shared memory, 8-byte aligned)
// ---------------------------------------------------------------------------------------------

// Initializes the barrier for `arrival_count` arrivals per phase; phase 0 starts incomplete.
// One thread initializes; then call fence_mbarrier_init() and __syncthreads() before any other
// thread, TMA unit or tensor core uses it.
__device__ __forceinline__ void mbarrier_init(u64* bar, u32 arrival_count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(arrival_count)
               : "memory");
}

// Makes barrier initialization visible to the async proxy (TMA complete_tx, tcgen05.commit) and
// to other CTAs of a cluster. Needed because those agents do not observe generic-proxy writes
// otherwise.
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// One arrival (count 1) on the current phase.
__device__ __forceinline__ void mbarrier_arrive(u64* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}

// One arrival plus an expectation of `tx_bytes` transaction bytes: the phase completes only when
// all arrivals happened AND that many bytes were delivered by complete_tx operations (TMA). The
// byte count must equal the full box sizes, even for boxes partly out of bounds (TMA still
// writes the zero/NaN-filled part).
__device__ __forceinline__ void mbarrier_arrive_expect_tx(u64* bar, u32 tx_bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)),
               "r"(tx_bytes)
               : "memory");
}

// Adds expected transaction bytes without arriving.
__device__ __forceinline__ void mbarrier_expect_tx(u64* bar, u32 tx_bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)),
               "r"(tx_bytes)
               : "memory");
}

// True once the phase with parity `phase_parity` (0 or 1) has completed. On a freshly initialized
// barrier, parity 1 reads as completed (it names the phase "before" phase 0), which is why a
// producer waiting for free slots starts with parity 1 and a consumer with parity 0.
__device__ __forceinline__ bool mbarrier_try_wait_parity(u64* bar, u32 phase_parity) {
  u32 done = 0;
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(done)
      : "r"(smem_u32(bar)), "r"(phase_parity)
      : "memory");
  return done != 0;
}

// Spins until the phase with parity `phase_parity` has completed (acquire semantics at CTA
// scope, so data delivered before the phase completed is visible afterwards).
__device__ __forceinline__ void mbarrier_wait_parity(u64* bar, u32 phase_parity) {
  while (!mbarrier_try_wait_parity(bar, phase_parity)) {
  }
}

// ---------------------------------------------------------------------------------------------
// Proxy fences
// ---------------------------------------------------------------------------------------------

// Orders this thread's generic-proxy shared-memory accesses with later async-proxy accesses
// (TMA store reading smem, tcgen05.mma reading smem operands written with st.shared).
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// ---------------------------------------------------------------------------------------------
// TMA (cp.async.bulk.tensor). Coordinates are element indices, innermost dimension first, and
// may be negative or past the end: out-of-bounds elements are filled (zero or NaN, per the map).
// ---------------------------------------------------------------------------------------------

// Brings the 128-byte descriptor into the constant cache before its first use.
__device__ __forceinline__ void prefetch_tensormap(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<u64>(map)) : "memory");
}

// Global -> shared copy of one box. `smem_dst` must be 128-byte aligned (1024-byte aligned for
// 128B swizzle so the swizzle pattern matches what MMA descriptors assume). Completion is
// signalled as transaction bytes on `bar` (which must have seen the matching expect_tx).
__device__ __forceinline__ void tma_load_2d(void* smem_dst, const CUtensorMap* map, u64* bar,
                                            int coord0, int coord1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];" ::"r"(smem_u32(smem_dst)),
      "l"(reinterpret_cast<u64>(map)), "r"(smem_u32(bar)), "r"(coord0), "r"(coord1)
      : "memory");
}

// 3-D variant (e.g. a (batch*heads, seq, dim) view declared through the plan's `dims`).
__device__ __forceinline__ void tma_load_3d(void* smem_dst, const CUtensorMap* map, u64* bar,
                                            int coord0, int coord1, int coord2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5}], [%2];" ::"r"(smem_u32(smem_dst)),
      "l"(reinterpret_cast<u64>(map)), "r"(smem_u32(bar)), "r"(coord0), "r"(coord1), "r"(coord2)
      : "memory");
}

// Shared -> global copy of one box; out-of-bounds parts of the box are not written. Issue
// fence_proxy_async_shared() (after the st.shared that filled the tile, and a barrier among the
// writers) before this, then tma_store_commit() and a tma_store_wait_*().
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, const void* smem_src,
                                             int coord0, int coord1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
          reinterpret_cast<u64>(map)),
      "r"(smem_u32(smem_src)), "r"(coord0), "r"(coord1)
      : "memory");
}

// Closes the group of bulk stores issued so far by this thread.
__device__ __forceinline__ void tma_store_commit() {
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

// Waits until at most `kPending` committed store groups still READ their shared source (the
// smem may then be overwritten; the global writes may still be in flight).
template <int kPending>
__device__ __forceinline__ void tma_store_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(kPending) : "memory");
}

// Waits until at most `kPending` committed store groups are incomplete (global writes done).
template <int kPending>
__device__ __forceinline__ void tma_store_wait_all() {
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(kPending) : "memory");
}

// Byte offset of (row, byte_in_row) inside a tile stored with the 128B swizzle: rows are 128
// bytes, and the 16-byte chunk index (bits 4..6) is XORed with the row index modulo 8 (bits
// 7..9). This is the pattern TMA writes and the MMA reads when the tile starts 1024-byte
// aligned; use it for generic st.shared / ld.shared into such a tile.
__device__ __forceinline__ u32 swizzle_128b_offset(u32 row, u32 byte_in_row) {
  return row * 128 + (((byte_in_row / 16) ^ (row % 8)) * 16) + byte_in_row % 16;
}

// ---------------------------------------------------------------------------------------------
// Tensor memory: 128 lanes x 512 columns of 32-bit cells per CTA. An address is
// (lane << 16) | column.
// ---------------------------------------------------------------------------------------------

__device__ __forceinline__ u32 tmem_address(u32 base, u32 lane, u32 column) {
  return base + (lane << 16) + column;
}

// Allocates `num_columns` columns (a power of two, 32..512) for this CTA and writes the base
// address to *smem_result. All 32 lanes of ONE warp execute it (.sync.aligned); the same warp
// should later deallocate. It blocks while the columns are in use by another CTA on the SM, so
// keep (columns per CTA) x (resident CTAs) <= 512.
__device__ __forceinline__ void tmem_alloc(u32* smem_result, u32 num_columns) {
  asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;" ::"r"(
                   smem_u32(smem_result)),
               "r"(num_columns)
               : "memory");
}

// Gives up this CTA's right to allocate again, so other CTAs waiting on the SM are not blocked
// behind it. Warp-wide, after the last tmem_alloc.
__device__ __forceinline__ void tmem_relinquish_alloc_permit() {
  asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;" ::: "memory");
}

// Frees columns from tmem_alloc; warp-wide. Every tcgen05 operation on them must have completed
// (MMA committed and waited for, loads followed by tcgen05_wait_ld) and been ordered with a
// thread barrier bracketed by the tcgen05 fences. A CTA must free everything before it exits.
__device__ __forceinline__ void tmem_dealloc(u32 tmem_base, u32 num_columns) {
  asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;" ::"r"(tmem_base),
               "r"(num_columns)
               : "memory");
}

// tcgen05 operations are asynchronous and not ordered by bar.sync / mbarrier on their own.
// Put tcgen05_fence_before_thread_sync() before a synchronization (bar.sync, mbarrier arrive) in
// the thread that issued tcgen05 work, and tcgen05_fence_after_thread_sync() after the
// synchronization (bar.sync, mbarrier wait) in the thread that then issues dependent tcgen05 work.
__device__ __forceinline__ void tcgen05_fence_before_thread_sync() {
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
}

__device__ __forceinline__ void tcgen05_fence_after_thread_sync() {
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
}

// ---------------------------------------------------------------------------------------------
// Descriptors for tcgen05.mma
// ---------------------------------------------------------------------------------------------

// Shared-memory matrix descriptor swizzle modes (3-bit field at bits 61..63). Note these codes
// differ from Hopper's wgmma descriptor (2-bit field at 62..63 with 1 = 128B).
enum SmemSwizzle : u32 {
  kSwizzleNone = 0,
  kSwizzle128BBase32B = 1,
  kSwizzle128B = 2,
  kSwizzle64B = 4,
  kSwizzle32B = 6,
};

// 64-bit shared-memory matrix descriptor for tcgen05.mma (sm_100 layout):
//   bits  0..13  start address >> 4
//   bits 16..29  leading-dimension byte offset >> 4
//   bits 32..45  stride-dimension byte offset >> 4
//   bits 46..48  fixed value 0b001 (descriptor version for sm_100; Hopper has none)
//   bits 49..51  base offset (0 when every swizzle atom starts at its natural alignment)
//   bit  52      leading-dimension stride mode (0: relative byte offset)
//   bits 61..63  swizzle mode (SmemSwizzle)
// For a K-major operand in the 128B swizzle (rows of 64 bf16 = 128 bytes, the layout TMA
// writes with a 64-element inner box): SBO = 1024 (distance between groups of 8 rows), and the
// LBO is not used by the hardware (conventionally 16). Advance along K inside the 128-byte row
// by adding the byte offset (k * 2 bytes) to the start address; the hardware applies the XOR on
// the absolute address bits, which is why the tile must be 1024-byte aligned.
__device__ __forceinline__ u64 make_smem_desc(u32 smem_address, u32 leading_byte_offset,
                                              u32 stride_byte_offset, SmemSwizzle swizzle) {
  u64 desc = 0;
  desc |= static_cast<u64>((smem_address >> 4) & 0x3FFFu);
  desc |= static_cast<u64>((leading_byte_offset >> 4) & 0x3FFFu) << 16;
  desc |= static_cast<u64>((stride_byte_offset >> 4) & 0x3FFFu) << 32;
  desc |= static_cast<u64>(1) << 46;
  desc |= static_cast<u64>(swizzle & 0x7u) << 61;
  return desc;
}

// The common case: a K-major bf16/fp16 tile written by TMA with the 128B swizzle, 128-byte rows,
// consecutive 8-row groups 1024 bytes apart.
__device__ __forceinline__ u64 make_smem_desc_kmajor_sw128(u32 smem_address) {
  return make_smem_desc(smem_address, 16, 1024, kSwizzle128B);
}

// 32-bit instruction descriptor for tcgen05.mma .kind::f16 (dense, no negation, no saturation):
//   bits  4..5   D format: 0 = f16, 1 = f32
//   bits  7..9   A format: 0 = f16, 1 = bf16
//   bits 10..12  B format: 0 = f16, 1 = bf16
//   bit  13/14   negate A / B
//   bit  15/16   A / B major-ness: 0 = K-major, 1 = M/N-major ("transposed")
//   bits 17..22  N >> 3
//   bits 24..28  M >> 4       (bit 23 is reserved)
// Valid shapes for cta_group::1: M = 64 (N multiple of 8, 8..256) or M = 128 (N multiple of 16,
// 16..256); K is fixed at 16 per instruction for 16-bit inputs.
__host__ __device__ constexpr u32 make_idesc_f16(u32 m, u32 n, bool inputs_bf16, bool accum_f32,
                                                 bool a_mn_major, bool b_mn_major) {
  return (static_cast<u32>(accum_f32) << 4) | (static_cast<u32>(inputs_bf16) << 7) |
         (static_cast<u32>(inputs_bf16) << 10) | (static_cast<u32>(a_mn_major) << 15) |
         (static_cast<u32>(b_mn_major) << 16) | ((n >> 3) << 17) | ((m >> 4) << 24);
}

// bf16 x bf16 -> fp32, both operands K-major: the descriptor for C = A * B^T with A (M x K) and
// B (N x K) stored with K contiguous.
__host__ __device__ constexpr u32 make_idesc_bf16_f32_kmajor(u32 m, u32 n) {
  return make_idesc_f16(m, n, /*inputs_bf16=*/true, /*accum_f32=*/true, false, false);
}

// 32-bit instruction descriptor for tcgen05.mma .kind::f8f6f4 with e4m3 A and B, fp32 D, both
// K-major: the .kind::f16 layout above with format code 0 (E4M3; E5M2 is 1) in bits 7..9 and
// 10..12 and D format 1 (f32) in bits 4..5. K is 32 per instruction for 8-bit inputs: 32 bytes of
// a 128-byte swizzled row, the same byte step as bf16's K = 16, so the smem descriptors are the
// bf16 ones (a TMA box of 128 one-byte elements fills one 128B-swizzle row).
__host__ __device__ constexpr u32 make_idesc_e4m3_f32_kmajor(u32 m, u32 n) {
  return (1u << 4) | ((n >> 3) << 17) | ((m >> 4) << 24);
}

// ---------------------------------------------------------------------------------------------
// tcgen05.mma and commit
// ---------------------------------------------------------------------------------------------

// D[tmem] (+)= A[smem] * B[smem]^T for one M x N x 16 step, issued by ONE thread. With
// `accumulate` false, D is overwritten (use it for the first K step of a tile). The result lands
// asynchronously: only tcgen05_commit tells when it (and everything before it) is done.
// Accumulator layout for M = 128: row i in lane i, column j in column (d_tmem's column + j),
// one fp32 per cell.
__device__ __forceinline__ void mma_f16_ss(u32 d_tmem, u64 a_desc, u64 b_desc, u32 idesc,
                                           bool accumulate) {
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "setp.ne.u32 p, %4, 0;\n\t"
      "tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p;\n\t}" ::"r"(d_tmem),
      "l"(a_desc), "l"(b_desc), "r"(idesc), "r"(static_cast<u32>(accumulate))
      : "memory");
}

// D[tmem] (+)= A[smem] * B[smem]^T for one M x N x 32 step of fp8 operands (.kind::f8f6f4;
// the formats come from `idesc`, make_idesc_e4m3_f32_kmajor), issued by ONE thread; otherwise as
// mma_f16_ss. The accumulation inside tensor memory is the hardware's: for long K, keep one
// 128-wide scale block per accumulator (accumulate = false on its first step) and add the scaled
// partial sums in registers.
__device__ __forceinline__ void mma_f8f6f4_ss(u32 d_tmem, u64 a_desc, u64 b_desc, u32 idesc,
                                              bool accumulate) {
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "setp.ne.u32 p, %4, 0;\n\t"
      "tcgen05.mma.cta_group::1.kind::f8f6f4 [%0], %1, %2, %3, p;\n\t}" ::"r"(d_tmem),
      "l"(a_desc), "l"(b_desc), "r"(idesc), "r"(static_cast<u32>(accumulate))
      : "memory");
}

// Arranges one arrival on `bar` once all tcgen05.mma (and tcgen05.cp) previously issued BY THIS
// THREAD have completed; their smem operands may then be overwritten and their tmem results read
// (after an mbarrier wait and tcgen05_fence_after_thread_sync). Issue from the MMA thread.
__device__ __forceinline__ void tcgen05_commit(u64* bar) {
  asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" ::"r"(
                   smem_u32(bar))
               : "memory");
}

// ---------------------------------------------------------------------------------------------
// Tensor memory <-> registers (warp-wide, .sync.aligned: all 32 lanes, converged)
// Shape 32x32b: lane t of the warp reads/writes tensor-memory lane (quarter*32 + t); register r
// holds column (address column + r). The address's lane field must be the warp's own quarter
// (tmem_lane_quarter() * 32). After divergent code (a per-lane spin on an mbarrier, a lane-
// dependent branch) call __syncwarp() first: .aligned instructions assume a converged warp.
// ---------------------------------------------------------------------------------------------

__device__ __forceinline__ void tmem_ld_32x32b_x8(u32 taddr, u32 (&r)[8]) {
  asm volatile("tcgen05.ld.sync.aligned.32x32b.x8.b32 {%0,%1,%2,%3,%4,%5,%6,%7}, [%8];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]),
                 "=r"(r[7])
               : "r"(taddr)
               : "memory");
}

__device__ __forceinline__ void tmem_ld_32x32b_x16(u32 taddr, u32 (&r)[16]) {
  asm volatile(
      "tcgen05.ld.sync.aligned.32x32b.x16.b32 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,"
      "%14,%15}, [%16];"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]),
        "=r"(r[7]), "=r"(r[8]), "=r"(r[9]), "=r"(r[10]), "=r"(r[11]), "=r"(r[12]), "=r"(r[13]),
        "=r"(r[14]), "=r"(r[15])
      : "r"(taddr)
      : "memory");
}

__device__ __forceinline__ void tmem_ld_32x32b_x32(u32 taddr, u32 (&r)[32]) {
  asm volatile(
      "tcgen05.ld.sync.aligned.32x32b.x32.b32 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,"
      "%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, [%32];"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]),
        "=r"(r[7]), "=r"(r[8]), "=r"(r[9]), "=r"(r[10]), "=r"(r[11]), "=r"(r[12]), "=r"(r[13]),
        "=r"(r[14]), "=r"(r[15]), "=r"(r[16]), "=r"(r[17]), "=r"(r[18]), "=r"(r[19]), "=r"(r[20]),
        "=r"(r[21]), "=r"(r[22]), "=r"(r[23]), "=r"(r[24]), "=r"(r[25]), "=r"(r[26]), "=r"(r[27]),
        "=r"(r[28]), "=r"(r[29]), "=r"(r[30]), "=r"(r[31])
      : "r"(taddr)
      : "memory");
}

// Waits for this thread's outstanding tcgen05.ld. The registers a load wrote are undefined until
// then. Because the compiler does not know that, pass them through tcgen05_wait_ld(r) (below)
// rather than the plain form so no use of them can be scheduled before the wait.
__device__ __forceinline__ void tcgen05_wait_ld() {
  asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
}

// tcgen05.wait::ld that also ties the loaded registers to the wait ("+r"), so the compiler
// cannot move any read of them above it.
template <int kCount>
__device__ __forceinline__ void tcgen05_wait_ld(u32 (&r)[kCount]) {
  asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
#pragma unroll
  for (int i = 0; i < kCount; ++i) {
    asm volatile("" : "+r"(r[i])::"memory");
  }
}

__device__ __forceinline__ void tmem_st_32x32b_x8(u32 taddr, const u32 (&r)[8]) {
  asm volatile(
      "tcgen05.st.sync.aligned.32x32b.x8.b32 [%0], {%1,%2,%3,%4,%5,%6,%7,%8};" ::"r"(taddr),
      "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]), "r"(r[4]), "r"(r[5]), "r"(r[6]), "r"(r[7])
      : "memory");
}

__device__ __forceinline__ void tmem_st_32x32b_x16(u32 taddr, const u32 (&r)[16]) {
  asm volatile(
      "tcgen05.st.sync.aligned.32x32b.x16.b32 [%0], {%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,"
      "%14,%15,%16};" ::"r"(taddr),
      "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]), "r"(r[4]), "r"(r[5]), "r"(r[6]), "r"(r[7]),
      "r"(r[8]), "r"(r[9]), "r"(r[10]), "r"(r[11]), "r"(r[12]), "r"(r[13]), "r"(r[14]), "r"(r[15])
      : "memory");
}

__device__ __forceinline__ void tmem_st_32x32b_x32(u32 taddr, const u32 (&r)[32]) {
  asm volatile(
      "tcgen05.st.sync.aligned.32x32b.x32.b32 [%0], {%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,"
      "%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32};" ::"r"(taddr),
      "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]), "r"(r[4]), "r"(r[5]), "r"(r[6]), "r"(r[7]),
      "r"(r[8]), "r"(r[9]), "r"(r[10]), "r"(r[11]), "r"(r[12]), "r"(r[13]), "r"(r[14]), "r"(r[15]),
      "r"(r[16]), "r"(r[17]), "r"(r[18]), "r"(r[19]), "r"(r[20]), "r"(r[21]), "r"(r[22]),
      "r"(r[23]), "r"(r[24]), "r"(r[25]), "r"(r[26]), "r"(r[27]), "r"(r[28]), "r"(r[29]),
      "r"(r[30]), "r"(r[31])
      : "memory");
}

// Waits for this thread's outstanding tcgen05.st; needed before an MMA (or another warp, after a
// fenced barrier) reads the stored cells.
__device__ __forceinline__ void tcgen05_wait_st() {
  asm volatile("tcgen05.wait::st.sync.aligned;" ::: "memory");
}

// ---------------------------------------------------------------------------------------------
// Conversions and stores
// ---------------------------------------------------------------------------------------------

// Two fp32 (as raw bits) -> packed bf16x2 with round-to-nearest-even; `lo` lands in the low 16
// bits (the lower address in memory). cvt's first source goes to the UPPER half.
__device__ __forceinline__ u32 pack_bf16x2(float lo, float hi) {
  u32 packed;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
  return packed;
}

__device__ __forceinline__ u32 pack_bf16x2_bits(u32 lo_bits, u32 hi_bits) {
  return pack_bf16x2(__uint_as_float(lo_bits), __uint_as_float(hi_bits));
}

// 16-byte global store; `ptr` must be 16-byte aligned.
__device__ __forceinline__ void st_global_v4(void* ptr, u32 a, u32 b, u32 c, u32 d) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(ptr), "r"(a), "r"(b), "r"(c), "r"(d)
               : "memory");
}

// =============================================================================================
// Additions for the attention tasks (mha_with_lse_d128*, mha_bwd_d128*). Added after the GEMM
// helpers above and changing none of them.
// =============================================================================================

// Shared-memory descriptor for an MN-major operand (M or N contiguous in memory) stored with the
// 128B swizzle, as TMA writes a [K rows][64 MN elements] box of a row-major tensor whose
// contiguous dimension is the MMA's M or N (e.g. V in O = P * V, where N = head dim).
// Canonical MN-major SW128 layout (PTX ISA, "Shared Memory Matrix Layout"; the same form as
// Hopper's wgmma): one 128-byte row holds 64 consecutive MN elements of one K index, 8 K rows make
// a 1024-byte swizzle atom. The two offsets swap roles relative to the K-major case:
//   LBO = byte distance between consecutive 64-element MN spans (here: the next TMA box),
//   SBO = byte distance between consecutive groups of 8 K rows (1024 for dense 128-byte rows).
// Advance along K by whole 8-row groups (16 K = 2048 bytes for dense rows), which keeps every
// start address 1024-byte aligned, so the base offset stays 0.
__device__ __forceinline__ u64 make_smem_desc_mnmajor_sw128(u32 smem_address,
                                                            u32 mn_span_byte_offset) {
  return make_smem_desc(smem_address, mn_span_byte_offset, 1024, kSwizzle128B);
}

// Barrier for a subset of the block's warps (bar.sync with an id other than 0, which
// __syncthreads uses). `thread_count` is a multiple of 32 and every participating warp executes
// it with all lanes.
__device__ __forceinline__ void named_barrier_sync(u32 id, u32 thread_count) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(thread_count) : "memory");
}

// 16-byte shared-memory store at a shared-state-space address (16-byte aligned).
__device__ __forceinline__ void st_shared_v4(u32 smem_address, u32 a, u32 b, u32 c, u32 d) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(smem_address), "r"(a), "r"(b),
               "r"(c), "r"(d)
               : "memory");
}

// 16-byte global load through the non-coherent path; only for data no kernel of the launch
// writes (inputs).
__device__ __forceinline__ void ld_global_nc_v4(const void* ptr, u32 (&r)[4]) {
  asm volatile("ld.global.nc.v4.b32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "l"(ptr));
}

// 2^x and log2(x) on the special-function unit (ex2/lg2.approx: about 2 ulp, 2^-inf = +0).
// Softmax kernels work in base 2 with the logits pre-multiplied by log2(e).
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float log2_approx(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Low / high bf16 of a packed pair (as written by pack_bf16x2) widened to fp32: bf16 is the upper
// half of an fp32, so widening is a shift.
__device__ __forceinline__ float bf16_lo_to_float(u32 packed) {
  return __uint_as_float(packed << 16);
}

__device__ __forceinline__ float bf16_hi_to_float(u32 packed) {
  return __uint_as_float(packed & 0xFFFF0000u);
}

// Four fp32 atomic additions to 16 consecutive bytes in one instruction (red.global.add.v4.f32,
// PTX ISA 8.1+, sm_90+); `ptr` must be 16-byte aligned. No return value, relaxed, GPU scope.
__device__ __forceinline__ void red_add_global_v4_f32(float* ptr, float a, float b, float c,
                                                      float d) {
  asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(ptr), "f"(a), "f"(b), "f"(c),
               "f"(d)
               : "memory");
}

}  // namespace sm100
}  // namespace ptxbench

#endif  // PTXBENCH_TASKS_SHARED_TEMPLATES_PTXBENCH_BLACKWELL_CUH_
