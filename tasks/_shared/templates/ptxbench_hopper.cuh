// PTXBench helper device functions for NVIDIA Hopper (sm_90a: H100, H200).
//
// Small inline-PTX wrappers, written for PTXBench, for the instructions a Hopper GEMM or
// attention kernel is built from: thread/warp/warpgroup indices, elect.sync, named and cluster
// barriers, mbarriers with transaction counts, TMA (cp.async.bulk.tensor) loads, multicast
// loads and stores, wgmma (warpgroup MMA) with its shared-memory descriptors and its
// fence/commit/wait protocol, setmaxnreg, ldmatrix/stmatrix and bf16 packing.
// Each wrapper is one or a few PTX instructions and makes no synchronization decision for its
// caller; the rule it depends on is written next to it. The PTX ISA (sections "mbarrier",
// "cp.async.bulk.tensor", "Asynchronous Warpgroup Level Matrix Multiply-Accumulate",
// "setmaxnreg", "ldmatrix", "stmatrix") is the authority.
//
// Every function here is exercised by a reference solution that passes on an H200
// (tasks/gemm_n7168_k5120/solutions/): sm90a_wgmma_tma.cu (warp-specialized SS wgmma, TMA loads,
// setmaxnreg, stmatrix + TMA-store epilogue), sm90a_wgmma_tma_multicast.cu (the cluster and
// multicast functions) and sm90a_wgmma_rs_ldmatrix.cu (ldmatrix, register-A wgmma).
//
// Beware (seen in the SASS of ptxas 13.0): a wgmma.commit_group whose group holds no executed
// wgmma.mma_async is implemented with a no-op 'HGMMA.64x8x16.F16 RZ, gdesc[URZ], RZ, !UPT', and a
// guard predicate on wgmma (@p wgmma...) becomes a branch around the HGMMA plus that no-op. The
// no-op does no matrix work and does not count as wgmma executed.
//
// Compiles under NVRTC with no CUDA headers (-arch=sm_90a) and under nvcc with cuda.h. Kernels
// are assumed one-dimensional (threadIdx.y == threadIdx.z == 0); a warpgroup is 4 consecutive
// warps starting at a warp index divisible by 4. Everything is in namespace ptxbench::sm90.
#ifndef PTXBENCH_TASKS_SHARED_TEMPLATES_PTXBENCH_HOPPER_CUH_
#define PTXBENCH_TASKS_SHARED_TEMPLATES_PTXBENCH_HOPPER_CUH_

// The harness passes TMA descriptors by value as `const __grid_constant__ CUtensorMap`
// parameters. NVRTC has no cuda.h, so the type is declared here with the driver's size (128 B)
// and alignment (64 B); with cuda.h included (nvcc), CUDA_VERSION is defined and the driver's
// own type is used. The guard macro is shared with ptxbench_blackwell.cuh.
#ifndef CUDA_VERSION
#ifndef PTXBENCH_CUTENSORMAP_DEFINED
#define PTXBENCH_CUTENSORMAP_DEFINED
struct alignas(64) CUtensorMap {
  unsigned long long opaque[16];
};
#endif  // PTXBENCH_CUTENSORMAP_DEFINED
#endif  // CUDA_VERSION

namespace ptxbench {
namespace sm90 {

using u16 = unsigned short;
using u32 = unsigned int;
using u64 = unsigned long long;

// ---------------------------------------------------------------------------------------------
// Threads, warps, warpgroups
// ---------------------------------------------------------------------------------------------

// Warp index within the block. Broadcast from lane 0 so the compiler knows it is warp-uniform
// and role branches (`if (warp_index() == 0)`) do not split a warp.
__device__ __forceinline__ int warp_index() {
  return __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 32, 0);
}

// Lane index (0..31) within the warp.
__device__ __forceinline__ int lane_index() { return static_cast<int>(threadIdx.x) % 32; }

// Warpgroup index within the block (128 threads per warpgroup), warp-uniform. wgmma and
// setmaxnreg act on whole warpgroups, so roles are usually assigned per warpgroup.
__device__ __forceinline__ int warpgroup_index() {
  return __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0);
}

// Thread index within its warpgroup (0..127).
__device__ __forceinline__ int thread_index_in_warpgroup() {
  return static_cast<int>(threadIdx.x) % 128;
}

// elect.sync over the full warp: true in exactly one lane. Every lane of the warp must call it
// (member mask 0xffffffff). Use it for work one thread does for the warp (issuing TMA).
__device__ __forceinline__ bool elect_one() {
  u32 elected = 0;
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "elect.sync _|p, 0xffffffff;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(elected));
  return elected != 0;
}

// The 32-bit shared-state-space address of a generic pointer into shared memory (the operand
// form of mbarrier, cp.async.bulk, ldmatrix/stmatrix and wgmma descriptors).
__device__ __forceinline__ u32 smem_u32(const void* ptr) {
  return static_cast<u32>(__cvta_generic_to_shared(ptr));
}

// bar.sync on hardware barrier `id` (1..15; 0 is __syncthreads) among `thread_count` threads
// (a multiple of 32). Lets a subset of warps, e.g. the consumer warpgroups, synchronize without
// the producer.
__device__ __forceinline__ void named_barrier_sync(u32 id, u32 thread_count) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(thread_count) : "memory");
}

// ---------------------------------------------------------------------------------------------
// Clusters (launches with cluster dimensions; a plain launch is a cluster of one CTA)
// ---------------------------------------------------------------------------------------------

// This CTA's rank within its cluster (0 .. cluster size - 1).
__device__ __forceinline__ u32 cluster_ctarank() {
  u32 rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  return rank;
}

// Barrier over every thread of every CTA in the cluster, with release/acquire semantics at
// cluster scope. All threads of each CTA must call it (.aligned: all lanes of a warp together).
// Needed after mbarrier initialization (so peers may signal this CTA's barriers) and before exit
// (so no peer signals or multicasts into the shared memory of an exited CTA).
__device__ __forceinline__ void cluster_sync() {
  asm volatile(
      "barrier.cluster.arrive.release.aligned;\n\t"
      "barrier.cluster.wait.acquire.aligned;" ::
          : "memory");
}

// ---------------------------------------------------------------------------------------------
// mbarrier: a 64-bit object in shared memory (8-byte aligned) counting arrivals and transaction
// bytes per phase; the phase completes when both reach zero, and the parity flips.
// ---------------------------------------------------------------------------------------------

// Initializes the barrier for `arrival_count` arrivals per phase; phase 0 starts incomplete.
// One thread initializes; follow with fence_mbarrier_init() and a CTA (or cluster) barrier
// before any other thread, CTA or the TMA unit uses it.
__device__ __forceinline__ void mbarrier_init(u64* bar, u32 arrival_count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(arrival_count)
               : "memory");
}

// Makes this thread's mbarrier.init writes visible to the async proxy (TMA complete_tx) and to
// the other CTAs of the cluster; without it they may see an uninitialized barrier.
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// One arrival on the current phase of a barrier in this CTA (release at CTA scope: this
// thread's earlier memory accesses are ordered before the phase completes).
__device__ __forceinline__ void mbarrier_arrive(u64* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}

// One arrival on the barrier at the same shared-memory offset in CTA `cta_rank` of the cluster
// (which may be this CTA), with release at cluster scope. `bar` is this CTA's own copy; mapa
// translates it to the peer's address. Used to free a pipeline slot in every CTA that
// multicasts into it.
__device__ __forceinline__ void mbarrier_arrive_cluster(u64* bar, u32 cta_rank) {
  asm volatile(
      "{\n\t.reg .b32 remote;\n\t"
      "mapa.shared::cluster.u32 remote, %0, %1;\n\t"
      "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote];\n\t}" ::"r"(smem_u32(bar)),
      "r"(cta_rank)
      : "memory");
}

// One arrival plus an expectation of `tx_bytes` transaction bytes for the current phase. The
// phase completes only after the pending arrivals AND that many bytes delivered by complete_tx
// (TMA). The count is the full box size of each copy, also for boxes partly or wholly out of
// bounds (TMA writes the fill value there and counts those bytes). Bytes may arrive before the
// expectation is posted: the arrival still pending keeps the phase open.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(u64* bar, u32 tx_bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)),
               "r"(tx_bytes)
               : "memory");
}

// True once the phase with parity `phase_parity` (0 or 1) has completed; may return false
// spuriously after a time limit. On a fresh barrier parity 1 reads as completed (the phase
// "before" phase 0): a producer waiting for free slots starts with parity 1, a consumer waiting
// for data with parity 0, and each flips its parity every time it wraps around the ring.
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

// Spins until the phase with parity `phase_parity` has completed. Acquire at CTA scope: data
// that TMA delivered for that phase is visible to this thread afterwards.
__device__ __forceinline__ void mbarrier_wait_parity(u64* bar, u32 phase_parity) {
  while (!mbarrier_try_wait_parity(bar, phase_parity)) {
  }
}

// ---------------------------------------------------------------------------------------------
// Proxy fence
// ---------------------------------------------------------------------------------------------

// Orders this thread's generic-proxy shared-memory writes (st.shared, stmatrix) before later
// async-proxy reads of that memory (TMA store, wgmma operands). Each writing thread issues it,
// then a barrier among the writers, then one thread issues the TMA store or the wgmma.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// ---------------------------------------------------------------------------------------------
// TMA: cp.async.bulk.tensor. Coordinates are element indices, innermost dimension first (for a
// row-major [rows][cols] tensor: {col, row}), and may lie past the end; out-of-bounds elements
// are filled on loads (zero or NaN, as the map says) and skipped on stores.
// ---------------------------------------------------------------------------------------------

// Prefetches the 128-byte tensor map (a __grid_constant__ kernel parameter) into the
// descriptor cache; issue once per CTA, by the thread that issues the copies, before the first.
__device__ __forceinline__ void prefetch_tensormap(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<u64>(map)) : "memory");
}

// Copies one box of a 2-D tensor from global to this CTA's shared memory at `smem_dst` and
// signals its byte count as complete_tx on `bar` (a barrier of this CTA). `smem_dst` must be
// 128-byte aligned, and 1024-byte aligned for the 128B swizzle so that the swizzle pattern
// (which TMA computes from address bits) matches what wgmma descriptors assume. `map` must be
// the address of the kernel parameter itself (generic address of param space).
__device__ __forceinline__ void tma_load_2d(void* smem_dst, const CUtensorMap* map, u64* bar,
                                            int coord0, int coord1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];" ::"r"(smem_u32(smem_dst)),
      "l"(reinterpret_cast<u64>(map)), "r"(smem_u32(bar)), "r"(coord0), "r"(coord1)
      : "memory");
}

// Like tma_load_2d, but the box lands at the same shared-memory offset in every CTA of the
// cluster whose bit is set in `cta_mask` (bit i = CTA rank i), and each of them gets the
// complete_tx on its barrier at `bar`'s offset. Each receiving CTA's barrier must expect these
// bytes. The issuing CTA must know that every receiver's slot is free (its empty barrier counts
// the receivers' consumers).
__device__ __forceinline__ void tma_load_2d_multicast(void* smem_dst, const CUtensorMap* map,
                                                      u64* bar, int coord0, int coord1,
                                                      u16 cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%4, %5}], [%2], %3;" ::"r"(smem_u32(smem_dst)),
      "l"(reinterpret_cast<u64>(map)), "r"(smem_u32(bar)), "h"(cta_mask), "r"(coord0), "r"(coord1)
      : "memory");
}

// Copies one box from shared memory at `smem_src` to the 2-D tensor at (coord0, coord1); parts
// outside the tensor are not written. Before it: every thread that wrote the tile calls
// fence_proxy_async_shared(), then a barrier among them. After it: tma_store_commit() and
// tma_store_wait_read<0>() before the tile's shared memory is reused or the CTA exits.
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, const void* smem_src,
                                             int coord0, int coord1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
          reinterpret_cast<u64>(map)),
      "r"(smem_u32(smem_src)), "r"(coord0), "r"(coord1)
      : "memory");
}

// Closes the group of bulk stores this thread issued since the last commit.
__device__ __forceinline__ void tma_store_commit() {
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

// Waits until at most `kPending` of this thread's committed store groups are still reading
// shared memory (their global writes may still be in flight; kernel completion flushes them).
template <int kPending>
__device__ __forceinline__ void tma_store_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(kPending) : "memory");
}

// Byte offset of (row, byte_in_row) in a tile stored with the 128B swizzle: 128-byte rows, the
// 16-byte chunk index (address bits 4..6) XORed with the row index modulo 8 (bits 7..9). This is
// the layout TMA reads/writes with CU_TENSOR_MAP_SWIZZLE_128B and wgmma reads with layout type
// 1, for tiles starting 1024-byte aligned; use it for ldmatrix/stmatrix addresses into such tiles.
__device__ __forceinline__ u32 swizzle_128b_offset(u32 row, u32 byte_in_row) {
  return row * 128 + (((byte_in_row / 16) ^ (row % 8)) * 16) + byte_in_row % 16;
}

// ---------------------------------------------------------------------------------------------
// wgmma: warpgroup MMA (sm_90a). All 128 threads of a warpgroup execute each wgmma instruction
// together (.sync.aligned). Order of use per tile:
//   wgmma_fence(); wgmma_m64...(...) x n; wgmma_commit_group(); ... wgmma_wait_group<k>();
//   wgmma_fence_operand(acc) before ordinary code reads the accumulators.
// ---------------------------------------------------------------------------------------------

// Shared-memory matrix descriptor for a K-major bf16/fp16 operand tile stored with the 128B
// swizzle (rows of 64 elements = 128 bytes, as TMA writes with an inner box of 64 elements):
//   bits  0..13 start address >> 4
//   bits 16..29 leading byte offset >> 4: unused for swizzled K-major tiles whose K extent per
//               instruction (16 elements = 32 bytes) lies inside one 128-byte row; set to 1
//   bits 32..45 stride byte offset >> 4: 1024 bytes between consecutive groups of 8 rows
//   bits 49..51 base offset: 0, valid when the tile (each 8-row, 1024-byte atom) is 1024-aligned
//   bits 62..63 layout type: 1 = 128B swizzle
// To step K by 16 elements inside the 64-element row, add 32 bytes to `smem_address`; to select
// rows r.. (r a multiple of 8), add r * 128 bytes. The hardware applies the XOR to the absolute
// address bits, which is why the tile must start 1024-byte aligned.
__device__ __forceinline__ u64 make_smem_desc_sw128(u32 smem_address) {
  u64 desc = 0;
  desc |= static_cast<u64>((smem_address & 0x3FFFFu) >> 4);
  desc |= static_cast<u64>(1) << 16;
  desc |= static_cast<u64>(1024 >> 4) << 32;
  desc |= static_cast<u64>(1) << 62;
  return desc;
}

// wgmma.fence: orders this warpgroup's earlier register writes (accumulators initialized or
// read by ordinary code, A fragments loaded with ldmatrix) and shared-memory writes before the
// next wgmma reads them. Required before the first wgmma of a tile and after any such access;
// not required between back-to-back wgmmas accumulating into the same registers.
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}

// Closes the group of wgmma instructions issued since the last commit.
__device__ __forceinline__ void wgmma_commit_group() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

// Waits until at most `kPending` committed wgmma groups of this warpgroup are in flight. With
// kPending = 1 the previous k-step's operands are free while the current one still runs.
template <int kPending>
__device__ __forceinline__ void wgmma_wait_group() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}

// Compiler-level fence on accumulator registers: the asm "modifies" each register, so the
// compiler can neither move reads of the accumulators above an earlier wgmma_wait_group() nor
// move writes below a later wgmma. Emits no instruction.
template <int kCount>
__device__ __forceinline__ void wgmma_fence_operand(float (&acc)[kCount]) {
#pragma unroll
  for (int i = 0; i < kCount; ++i) {
    asm volatile("" : "+f"(acc[i])::"memory");
  }
}

// D[64x256] (fp32, registers) = A[64x16] * B[16x256] + (scale_d ? D : 0), with A and B bf16 in
// shared memory (SS form) described by make_smem_desc_sw128, both K-major (no transpose): A rows
// are the 64 output rows, B rows are the 256 output columns (C = A * B^T). `scale_d` = 0
// overwrites D (first k-step), 1 accumulates.
// Accumulator layout (per warp w of the warpgroup, lane l, column block j of 8 columns):
//   acc[4j+0], acc[4j+1] -> row 16w + l/4,     columns 8j + 2(l%4) + {0, 1}
//   acc[4j+2], acc[4j+3] -> row 16w + l/4 + 8, same columns
__device__ __forceinline__ void wgmma_m64n256k16_ss_bf16(float (&d)[128], u64 desc_a, u64 desc_b,
                                                         int scale_d) {
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "setp.ne.b32 p, %130, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, "
      "%111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, "
      "%125, %126, %127}, "
      "%128, %129, p, 1, 1, 0, 0;\n\t}"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]),
        "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]),
        "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
        "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]),
        "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]),
        "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]),
        "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]),
        "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]),
        "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// D[64x128] (fp32, registers) = A[64x16] * B[16x128] + (scale_d ? D : 0), with A bf16 in
// REGISTERS (RS form) and B bf16 in shared memory (make_smem_desc_sw128, K-major).
// A fragment per warp w, lane l (4 registers, 2 bf16 each, low half = lower k):
//   a[0]: row 16w + l/4,     k 2(l%4) + {0,1}     a[1]: row 16w + l/4 + 8, same k
//   a[2]: row 16w + l/4,     k 8 + 2(l%4) + {0,1} a[3]: row 16w + l/4 + 8, same k
// which is what ldmatrix_x4 returns for the four 8x8 blocks (rows 0-7,k 0-7), (rows 8-15,
// k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15). Accumulator layout as for the N=256 form
// (acc[4j..4j+3] for column block j, j < 16). The A registers must not be rewritten until the
// wgmma reading them has been waited for.
__device__ __forceinline__ void wgmma_m64n128k16_rs_bf16(float (&d)[64], const u32 (&a)[4],
                                                         u64 desc_b, int scale_d) {
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "setp.ne.b32 p, %69, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "{%64, %65, %66, %67}, %68, p, 1, 1, 0;\n\t}"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
}

// ---------------------------------------------------------------------------------------------
// Register reallocation between warpgroups (sm_90a)
// ---------------------------------------------------------------------------------------------

// setmaxnreg: the executing warpgroup's per-thread register limit becomes kRegs (24..256, a
// multiple of 8). All warps of the warpgroup execute it. It only takes effect when the kernel has
// a register cap at entry (__launch_bounds__(threads, 1) or -maxrregcount) and each role is one
// branch of an if/else; otherwise ptxas ignores it with warning C7508. Typical split for one
// producer and two consumer warpgroups (384 threads, 168 registers at entry): the producer
// decreases to 40 and the consumers increase to 232 (128*40 + 256*232 = 64512 <= 65536).
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegs));
}

template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegs));
}

// ---------------------------------------------------------------------------------------------
// ldmatrix / stmatrix: four 8x8 b16 matrices between shared memory and the registers of a warp.
// Lanes 8i..8i+7 give the shared addresses of the 8 rows (16 contiguous bytes each) of matrix
// i; register r[i] of lane l holds matrix i's elements (row l/4, columns 2(l%4), 2(l%4)+1),
// lower column in the low half.
// ---------------------------------------------------------------------------------------------

// Loads four 8x8 b16 matrices; `row_ptr` is this lane's row address (16-byte aligned).
__device__ __forceinline__ void ldmatrix_x4(u32 (&r)[4], const void* row_ptr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(row_ptr))
               : "memory");
}

// Stores four 8x8 b16 matrices; `row_ptr` is this lane's row address (16-byte aligned). The
// register layout is that of a wgmma/mma accumulator pair packed with pack_bf16x2, so a warp's
// 16x16 accumulator block goes out in one instruction.
__device__ __forceinline__ void stmatrix_x4(void* row_ptr, u32 r0, u32 r1, u32 r2, u32 r3) {
  asm volatile(
      "stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(smem_u32(row_ptr)),
      "r"(r0), "r"(r1), "r"(r2), "r"(r3)
      : "memory");
}

// ---------------------------------------------------------------------------------------------
// bf16 conversion (no cuda_bf16.h: NVRTC 13.0 does not ship it as a built-in header)
// ---------------------------------------------------------------------------------------------

// Two fp32 -> packed bf16x2, round to nearest even; `lo` goes to the low 16 bits (the lower
// address once stored). cvt's first source operand fills the UPPER half.
__device__ __forceinline__ u32 pack_bf16x2(float lo, float hi) {
  u32 packed;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
  return packed;
}

// ---------------------------------------------------------------------------------------------
// Attention backward helpers (added for tasks/mha_bwd_d128*; used by their sm90a solutions).
// Transposed (MN-major) wgmma operands, the 64-column shapes, vector reductions to global fp32
// and the fast exp2.
// ---------------------------------------------------------------------------------------------

// Shared-memory matrix descriptor for an MN-major ("transposed") bf16 operand stored with the
// 128B swizzle: each 128-byte row holds 64 consecutive M (or N) elements of ONE k, rows are
// consecutive k, and 8 rows (1024 bytes) form a swizzle atom. This is exactly what TMA writes
// for a row-major [k][mn] tensor with an inner box of 64 elements, so a tile loaded for the
// K-major use (rows = M/N) serves unchanged as the transposed operand of another product.
//   leading byte offset = `mn_atom_stride_bytes`: from MN elements 0..63 to 64..127 (the next
//                         64-element box); unused when the instruction's M or N is 64
//   stride byte offset  = 1024: from k rows 0..7 to k rows 8..15
// To step K by 16 rows, add 16 * 128 = 2048 bytes to `smem_address`. The tile must start
// 1024-byte aligned (base offset 0), as for make_smem_desc_sw128. Pass the transpose flag 1 for
// this operand to the wgmma below (only bf16/fp16 operands in shared memory can be transposed).
__device__ __forceinline__ u64 make_smem_desc_sw128_mn(u32 smem_address, u32 mn_atom_stride_bytes) {
  u64 desc = 0;
  desc |= static_cast<u64>((smem_address & 0x3FFFFu) >> 4);
  desc |= static_cast<u64>((mn_atom_stride_bytes & 0x3FFFFu) >> 4) << 16;
  desc |= static_cast<u64>(1024 >> 4) << 32;
  desc |= static_cast<u64>(1) << 62;
  return desc;
}

// D[64x64] (fp32, registers) = A[64x16] * B[16x64] + (scale_d ? D : 0), A and B bf16 in shared
// memory. kTransA / kTransB = 0: the operand is K-major (make_smem_desc_sw128); 1: MN-major
// (make_smem_desc_sw128_mn). Accumulator layout as for the N=256 form, j < 8.
template <int kTransA, int kTransB>
__device__ __forceinline__ void wgmma_m64n64k16_ss_bf16_t(float (&d)[32], u64 desc_a, u64 desc_b,
                                                          int scale_d) {
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "setp.ne.b32 p, %34, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "%32, %33, p, 1, 1, %35, %36;\n\t}"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(kTransA), "n"(kTransB));
}

// D[64x128] (fp32, registers) = A[64x16] * B[16x128] + (scale_d ? D : 0), A and B bf16 in shared
// memory, each K-major (0) or MN-major (1) as the template says. Accumulator layout as for the
// N=256 form, j < 16.
template <int kTransA, int kTransB>
__device__ __forceinline__ void wgmma_m64n128k16_ss_bf16_t(float (&d)[64], u64 desc_a, u64 desc_b,
                                                           int scale_d) {
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "setp.ne.b32 p, %66, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1, %67, %68;\n\t}"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(kTransA), "n"(kTransB));
}

// The RS form of wgmma_m64n128k16_rs_bf16 with B K-major (kTransB = 0) or MN-major (1). With A
// in registers, a product whose A is a transposed accumulator (P^T, dS^T in attention backward)
// is best computed so that A is an accumulator of this warpgroup: an m64nNk16 fp32 accumulator
// of 64 rows converts to A fragments of the next product with no data movement. For k-step t
// (A columns 16t..16t+15) the fragment is
//   a[0] = pack_bf16x2(acc[8t+0], acc[8t+1])   a[1] = pack_bf16x2(acc[8t+2], acc[8t+3])
//   a[2] = pack_bf16x2(acc[8t+4], acc[8t+5])   a[3] = pack_bf16x2(acc[8t+6], acc[8t+7])
template <int kTransB>
__device__ __forceinline__ void wgmma_m64n128k16_rs_bf16_t(float (&d)[64], const u32 (&a)[4],
                                                           u64 desc_b, int scale_d) {
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "setp.ne.b32 p, %69, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "{%64, %65, %66, %67}, %68, p, 1, 1, %70;\n\t}"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(kTransB));
}

// Copies `bytes` (a multiple of 16) from global memory at `gmem_src` (16-byte aligned) to this
// CTA's shared memory at `smem_dst` (16-byte aligned) with the bulk copy engine (the non-tensor
// form of cp.async.bulk, no tensor map) and signals the byte count as complete_tx on `bar`, like
// tma_load_2d. For small per-tile vectors (row statistics) that ride on a tile's barrier.
__device__ __forceinline__ void bulk_load_g2s(void* smem_dst, const void* gmem_src, u32 bytes,
                                              u64* bar) {
  asm volatile(
      "{\n\t.reg .u64 g;\n\t"
      "cvta.to.global.u64 g, %1;\n\t"
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [g], %2, "
      "[%3];\n\t}" ::"r"(smem_u32(smem_dst)),
      "l"(reinterpret_cast<u64>(gmem_src)), "r"(bytes), "r"(smem_u32(bar))
      : "memory");
}

// Two fp32 atomic additions to consecutive global words (one 8-byte vector reduction, sm_90):
// addr[0] += x, addr[1] += y. `addr` must be 8-byte aligned and point to global memory. The
// result is not returned, so no round trip to L2 is waited for.
__device__ __forceinline__ void red_add_v2_f32(float* addr, float x, float y) {
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};" ::"l"(addr), "f"(x), "f"(y) : "memory");
}

// 2^x with the special-function unit (ex2.approx.ftz: relative error about 2^-22; -inf gives
// +0). exp(z) = exp2(z * log2(e)).
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// ---------------------------------------------------------------------------------------------
// Attention forward at head dims 64 and 256 (added for tasks/mha_with_lse_d64* and
// mha_with_lse_d256*; used by their sm90a solutions). O += P V with O of 64 or 256 columns: the
// RS forms of m64n64k16 and m64n256k16, B K-major (kTransB = 0) or MN-major (1).
// ---------------------------------------------------------------------------------------------

// D[64x64] (fp32) = A[64x16] (bf16, REGISTERS) * B[16x64] (bf16, shared memory) + (scale_d ? D :
// 0). A fragment as for wgmma_m64n128k16_rs_bf16; accumulator layout as for the N=256 form,
// j < 8. With B MN-major and N = 64 the descriptor's leading byte offset is unused.
template <int kTransB>
__device__ __forceinline__ void wgmma_m64n64k16_rs_bf16_t(float (&d)[32], const u32 (&a)[4],
                                                          u64 desc_b, int scale_d) {
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "setp.ne.b32 p, %37, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1, %38;\n\t}"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(kTransB));
}

// D[64x256] (fp32) = A[64x16] (bf16, REGISTERS) * B[16x256] (bf16, shared memory) + (scale_d ?
// D : 0). A fragment as for wgmma_m64n128k16_rs_bf16; accumulator layout as for
// wgmma_m64n256k16_ss_bf16 (j < 32). With B MN-major, N = 256 spans four 64-element boxes, each
// the descriptor's leading byte offset after the previous one (make_smem_desc_sw128_mn).
template <int kTransB>
__device__ __forceinline__ void wgmma_m64n256k16_rs_bf16_t(float (&d)[128], const u32 (&a)[4],
                                                           u64 desc_b, int scale_d) {
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "setp.ne.b32 p, %133, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, "
      "%127}, "
      "{%128, %129, %130, %131}, %132, p, 1, 1, %134;\n\t}"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]),
        "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]),
        "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
        "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]),
        "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]),
        "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]),
        "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]),
        "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]),
        "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(kTransB));
}

// ---------------------------------------------------------------------------------------------
// fp8 (e4m3) wgmma, for the block-scaled fp8 GEMM (SASS QGMMA)
// ---------------------------------------------------------------------------------------------

// D[64x128] (fp32, registers) = A[64x32] * B[32x128] + (scale_d ? D : 0), A and B fp8 e4m3 in
// shared memory (SS form), both K-major. fp8 wgmma has no transpose option: both operands must be
// K-major. A row of 128 e4m3 values is 128 bytes, so a TMA box of 128 one-byte elements with the
// 128B swizzle fills exactly one swizzle row and make_smem_desc_sw128 describes the tile as it
// describes a bf16 one; a k-step of 32 elements is 32 bytes of the row, so step K by adding 32
// bytes to the address (bf16 steps 16 elements = the same 32 bytes). Accumulator layout as for
// the bf16 forms (acc[4j..4j+3] for column block j, j < 16).
// The tensor core's fp8 accumulation keeps fewer bits than fp32 (DeepSeek-V3 technical report,
// section 3.3.2: about 14): accumulate a bounded run of k-steps (one 128-wide scale block:
// scale_d = 0 on its first k-step) and add that partial sum into fp32 registers yourself.
__device__ __forceinline__ void wgmma_m64n128k32_ss_e4m3(float (&d)[64], u64 desc_a, u64 desc_b,
                                                         int scale_d) {
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "setp.ne.b32 p, %66, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1;\n\t}"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// ---------------------------------------------------------------------------------------------
// N = 8 (added for tasks/gqa_paged_decode_hq64_hk8_d128; used by its sm90a solution): decode's
// transposed products, keys or head dims as M = 64 and the 8 query heads of a GQA group as N.
// ---------------------------------------------------------------------------------------------

// D[64x8] (fp32, registers) = A[64x16] * B[16x8] + (scale_d ? D : 0), A and B bf16 in shared
// memory; kTransA / kTransB = 0: K-major (make_smem_desc_sw128), 1: MN-major
// (make_smem_desc_sw128_mn). A K-major B of 8 rows of 64 elements is one 1024-byte swizzle atom.
// Accumulator layout as for the N=256 form with j = 0: d[0], d[1] -> row 16w + l/4, columns
// 2(l%4) + {0, 1}; d[2], d[3] -> row 16w + l/4 + 8, same columns.
template <int kTransA, int kTransB>
__device__ __forceinline__ void wgmma_m64n8k16_ss_bf16_t(float (&d)[4], u64 desc_a, u64 desc_b,
                                                         int scale_d) {
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "setp.ne.b32 p, %6, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3}, %4, %5, p, 1, 1, %7, %8;\n\t}"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(kTransA), "n"(kTransB));
}

}  // namespace sm90
}  // namespace ptxbench

#endif  // PTXBENCH_TASKS_SHARED_TEMPLATES_PTXBENCH_HOPPER_CUH_
