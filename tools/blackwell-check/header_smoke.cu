// Instantiates every helper of tasks/_shared/templates/ptxbench_blackwell.cuh once so that ptxas
// validates each wrapper's PTX for sm_100a (a wrapper never called is never assembled). Not a
// meaningful kernel: it is compiled, never run.
#include "ptxbench_blackwell.cuh"

namespace bw = ptxbench::sm100;

extern "C" __global__ void blackwell_header_smoke(const __grid_constant__ CUtensorMap map,
                                                  const __grid_constant__ CUtensorMap map3,
                                                  unsigned int* out) {
  __shared__ alignas(8) bw::u64 bar;
  __shared__ bw::u32 tmem_slot;
  extern __shared__ unsigned char tile[];
  if (bw::warp_index() == 0 && bw::elect_one()) {
    bw::mbarrier_init(&bar, 1);
    bw::fence_mbarrier_init();
    bw::prefetch_tensormap(&map);
  }
  if (bw::warp_index() == 1) {
    bw::tmem_alloc(&tmem_slot, 64);
    bw::tmem_relinquish_alloc_permit();
  }
  bw::tcgen05_fence_before_thread_sync();
  __syncthreads();
  bw::tcgen05_fence_after_thread_sync();
  const bw::u32 tmem = tmem_slot;
  if (threadIdx.x == 0) {
    bw::mbarrier_expect_tx(&bar, 512);
    bw::mbarrier_arrive_expect_tx(&bar, 16384);
    bw::tma_load_2d(tile, &map, &bar, 0, 0);
    bw::tma_load_3d(tile, &map3, &bar, 0, 0, 0);
    bw::mbarrier_wait_parity(&bar, 0);
    bw::mma_f16_ss(tmem, bw::make_smem_desc_kmajor_sw128(bw::smem_u32(tile)),
                   bw::make_smem_desc(bw::smem_u32(tile), 16, 1024, bw::kSwizzle64B),
                   bw::make_idesc_f16(64, 64, false, true, true, false), true);
    bw::tcgen05_commit(&bar);
    bw::mbarrier_arrive(&bar);
    bw::fence_proxy_async_shared();
    bw::tma_store_2d(&map, tile + bw::swizzle_128b_offset(3, 40), 0, 0);
    bw::tma_store_commit();
    bw::tma_store_wait_read<0>();
    bw::tma_store_wait_all<0>();
  }
  __syncwarp();
  const bw::u32 taddr = bw::tmem_address(tmem, bw::tmem_lane_quarter() * 32, 0);
  bw::u32 r8[8];
  bw::u32 r16[16];
  bw::u32 r32[32];
  bw::tmem_ld_32x32b_x8(taddr, r8);
  bw::tmem_ld_32x32b_x16(taddr, r16);
  bw::tmem_ld_32x32b_x32(taddr, r32);
  bw::tcgen05_wait_ld(r32);
  bw::tcgen05_wait_ld();
  bw::tmem_st_32x32b_x8(taddr, r8);
  bw::tmem_st_32x32b_x16(taddr, r16);
  bw::tmem_st_32x32b_x32(taddr, r32);
  bw::tcgen05_wait_st();
  bw::st_global_v4(out + 4 * threadIdx.x, bw::pack_bf16x2(1.0f, 2.0f),
                   bw::pack_bf16x2_bits(r8[0], r16[1]), r32[2], bw::lane_index());
  // Attention additions.
  bw::named_barrier_sync(1, 64);
  bw::st_shared_v4(bw::smem_u32(tile) + 16 * threadIdx.x, r8[0], r8[1], r8[2], r8[3]);
  bw::u32 loaded[4];
  bw::ld_global_nc_v4(out + 4 * threadIdx.x, loaded);
  const float x = bw::exp2_approx(bw::bf16_lo_to_float(loaded[0])) +
                  bw::log2_approx(bw::bf16_hi_to_float(loaded[1]));
  bw::red_add_global_v4_f32(reinterpret_cast<float*>(out) + 4 * threadIdx.x, x, x, x, x);
  if (threadIdx.x == 0) {
    bw::mma_f16_ss(tmem, bw::make_smem_desc_mnmajor_sw128(bw::smem_u32(tile), 16384),
                   bw::make_smem_desc_mnmajor_sw128(bw::smem_u32(tile) + 2048, 16384),
                   bw::make_idesc_f16(128, 128, true, true, true, true), false);
  }
  bw::tcgen05_fence_before_thread_sync();
  __syncthreads();
  if (bw::warp_index() == 1) {
    bw::tcgen05_fence_after_thread_sync();
    bw::tmem_dealloc(tmem, 64);
  }
}
