/* PTXBENCH_PLAN
{"launches":[{"kernel":"gemm_kernel",
  "grid":["min(132, ceil_div(N,176)*ceil_div(M,128))"],"block":["384"],"cluster":[],
  "dynamic_shared_bytes":"195664",
  "args":[{"tensor_map":"tmA"},{"tensor_map":"tmB"},{"tensor":"C"},
          {"scalar":"M"},{"scalar":"N"},{"scalar":"K"}]}],
 "scratch":[],
 "tensor_maps":[
  {"name":"tmA","tensor":"A","box":["64","128"],"element_strides":[],"swizzle":"128B",
   "interleave":"none","l2_promotion":"256B","oob_fill":"zero","dims":[]},
  {"name":"tmB","tensor":"B","box":["64","176"],"element_strides":[],"swizzle":"128B",
   "interleave":"none","l2_promotion":"256B","oob_fill":"zero","dims":[]}]}
*/
// Candidate reference solution for gemm_n7168_k5120 on sm_90a, NOT YET MEASURED on a GPU
// (written 2026-12-06; compiles with NVRTC 13.0: 168 registers, no spills).
//
// The persistent kernel of gemm_sm90a_wgmma_tma_persistent.cu with 128x176 output tiles, for
// the wave quantization of the timed workload: 128x256 tiles make 1,792 tiles, 13.58 waves of
// 132 SMs (the last wave 58 % full: 97.0 % of the SM time does work); 128x176 tiles make
// 64 x 41 = 2,624 tiles, 19.88 waves (98.7 %, the 41st column of tiles 128 of 176 wide).
// - wgmma.m64n176k16 (88 accumulators per thread; its wrapper is below, the template header
//   has N = 256 and N = 128 only); B boxes of 176 rows (22 KiB a stage, 1024-aligned), five
//   stages (190 KiB).
// - Epilogue: direct bf16x2 stores from the accumulator layout, bounds-checked, no staging: a
//   176-column tile is not a whole number of 64-column TMA boxes, and the stores go out while
//   the warpgroup starts its next tile.
#include "ptxbench_hopper.cuh"
namespace {

namespace sm90 = ptxbench::sm90;
using u32 = sm90::u32;
using u64 = sm90::u64;

constexpr int kBlockM = 128;
constexpr int kBlockN = 176;
constexpr int kBlockK = 64;  // 64 bf16 = 128 bytes: the widest inner box for the 128B swizzle.
constexpr int kStages = 5;
constexpr int kGroupM = 16;  // M tiles per raster group.
constexpr int kConsumerWarpgroups = 2;
constexpr int kConsumerWarps = 4 * kConsumerWarpgroups;

constexpr u32 kATileBytes = kBlockM * kBlockK * 2;  // 16 KiB
constexpr u32 kBTileBytes = kBlockN * kBlockK * 2;  // 32 KiB
constexpr u32 kStageBytes = kATileBytes + kBTileBytes;
constexpr u32 kTileSmemBytes = kStages * kStageBytes;  // 196608
constexpr u32 kSmemBytes = 1024 + kTileSmemBytes + 2 * kStages * 8;
static_assert(kSmemBytes == 195664, "keep the launch plan's dynamic_shared_bytes in sync");

struct Tile {
  int m0;
  int n0;
};

// Grouped raster: consecutive tile indices walk down kGroupM M-tiles before moving to the next
// N-tile, so the ~132 tiles in flight at once share A and B strips in L2.
__device__ __forceinline__ Tile TileAt(int linear, int num_m_tiles, int num_n_tiles) {
  const int group = linear / (kGroupM * num_n_tiles);
  const int first_m_tile = group * kGroupM;
  const int m_tiles_in_group = min(num_m_tiles - first_m_tile, kGroupM);
  const int in_group = linear - group * kGroupM * num_n_tiles;
  return {(first_m_tile + in_group % m_tiles_in_group) * kBlockM,
          (in_group / m_tiles_in_group) * kBlockN};
}

// Frees ring slot `stage` for the producer: one arrival per consumer warp (each warp has passed
// its own wgmma_wait_group, so its reads of the slot are done).
__device__ __forceinline__ void ReleaseStage(u64* empty, int stage) {
  if (sm90::lane_index() == 0) sm90::mbarrier_arrive(&empty[stage]);
}

// D[64x176] (fp32) = A[64x16] * B[16x176] + (scale_d ? D : 0), A and B bf16 in shared memory
// (SS form, make_smem_desc_sw128, both K-major); accumulator layout as for N = 256 (acc[4j..4j+3]
// for column block j of 8 columns, j < 22).
__device__ __forceinline__ void wgmma_m64n176k16_ss_bf16(float (&d)[88], u64 desc_a, u64 desc_b,
                                                         int scale_d) {
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "setp.ne.b32 p, %90, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n176k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87}, "
      "%88, %89, p, 1, 1, 0, 0;\n\t}"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

}  // namespace

extern "C" __global__ void __launch_bounds__(128 * (1 + kConsumerWarpgroups), 1)
    gemm_kernel(const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB,
                unsigned short* C, int M, int N, int K) {
  extern __shared__ unsigned char smem_raw[];
  // 128B-swizzled tiles must start 1024-byte aligned (the swizzle is a function of address
  // bits 4..9).
  unsigned char* smem = smem_raw + ((1024u - (sm90::smem_u32(smem_raw) & 1023u)) & 1023u);
  unsigned char* a_tiles = smem;
  unsigned char* b_tiles = smem + kStages * kATileBytes;
  u64* full = reinterpret_cast<u64*>(smem + kTileSmemBytes);
  u64* empty = full + kStages;

  const int warpgroup = sm90::warpgroup_index();
  const int num_k_steps = (K + kBlockK - 1) / kBlockK;
  const int num_m_tiles = (M + kBlockM - 1) / kBlockM;
  const int num_n_tiles = (N + kBlockN - 1) / kBlockN;
  const int num_tiles = num_m_tiles * num_n_tiles;
  const int first_tile = static_cast<int>(blockIdx.x);
  const int tile_stride = static_cast<int>(gridDim.x);

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      sm90::mbarrier_init(&full[s], 1);
      sm90::mbarrier_init(&empty[s], kConsumerWarps);
    }
    sm90::fence_mbarrier_init();
  }
  __syncthreads();

  if (warpgroup == 0) {
    // Producer warpgroup. Only one thread issues copies; the other warps just hold no registers.
    sm90::setmaxnreg_dec<40>();
    if (sm90::warp_index() == 0 && sm90::elect_one()) {
      sm90::prefetch_tensormap(&tmA);
      sm90::prefetch_tensormap(&tmB);
      int step = 0;  // k-steps issued by this CTA over all its tiles: the ring position.
      for (int t = first_tile; t < num_tiles; t += tile_stride) {
        const Tile tile = TileAt(t, num_m_tiles, num_n_tiles);
        for (int k = 0; k < num_k_steps; ++k, ++step) {
          const int s = step % kStages;
          // Round r of slot s needs the consumers' release of round r-1 (parity 1 on a fresh
          // barrier passes at once).
          sm90::mbarrier_wait_parity(&empty[s], ((step / kStages) & 1) ^ 1);
          sm90::mbarrier_arrive_expect_tx(&full[s], kStageBytes);
          sm90::tma_load_2d(a_tiles + s * kATileBytes, &tmA, &full[s], k * kBlockK, tile.m0);
          sm90::tma_load_2d(b_tiles + s * kBTileBytes, &tmB, &full[s], k * kBlockK, tile.n0);
        }
      }
    }
    __syncwarp();
  } else {
    // Consumer warpgroups: rows [64*c, 64*c+64) of each tile.
    sm90::setmaxnreg_inc<232>();
    const int consumer = warpgroup - 1;
    const int warp_in_group = sm90::thread_index_in_warpgroup() / 32;
    const int lane = sm90::lane_index();
    float acc[88];
    int step = 0;  // must follow the producer's ring position exactly

    for (int t = first_tile; t < num_tiles; t += tile_stride) {
      const Tile tile = TileAt(t, num_m_tiles, num_n_tiles);
#pragma unroll
      for (int i = 0; i < 88; ++i) acc[i] = 0.0f;

      for (int k = 0; k < num_k_steps; ++k, ++step) {
        const int s = step % kStages;
        sm90::mbarrier_wait_parity(&full[s], (step / kStages) & 1);
        const u32 a_base = sm90::smem_u32(a_tiles + s * kATileBytes) + consumer * 64 * 128;
        const u32 b_base = sm90::smem_u32(b_tiles + s * kBTileBytes);
        sm90::wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < kBlockK / 16; ++kk) {
          wgmma_m64n176k16_ss_bf16(acc, sm90::make_smem_desc_sw128(a_base + kk * 32),
                                         sm90::make_smem_desc_sw128(b_base + kk * 32), 1);
        }
        sm90::wgmma_commit_group();
        // Keep this k-step in flight; the previous one is now complete and its slot free.
        sm90::wgmma_wait_group<1>();
        if (k > 0) ReleaseStage(empty, (step - 1) % kStages);
      }
      sm90::wgmma_wait_group<0>();
      sm90::wgmma_fence_operand(acc);
      // The tile's last slot is free now: the producer is already filling the ring with the
      // next tile while this warpgroup writes its output.
      ReleaseStage(empty, (step - 1) % kStages);

      // Direct bf16x2 stores from the accumulator layout: column block j holds columns
      // 8j + 2(lane%4) + {0,1} of rows lane/4 and lane/4 + 8 of this warp's 16-row slab.
      const int row0 = tile.m0 + consumer * 64 + warp_in_group * 16 + lane / 4;
#pragma unroll
      for (int j = 0; j < kBlockN / 8; ++j) {
        const int col = tile.n0 + 8 * j + 2 * (lane % 4);
        if (col >= N) continue;
        if (row0 < M) {
          *reinterpret_cast<u32*>(C + static_cast<long long>(row0) * N + col) =
              sm90::pack_bf16x2(acc[4 * j + 0], acc[4 * j + 1]);
        }
        if (row0 + 8 < M) {
          *reinterpret_cast<u32*>(C + static_cast<long long>(row0 + 8) * N + col) =
              sm90::pack_bf16x2(acc[4 * j + 2], acc[4 * j + 3]);
        }
      }
    }
  }
}
