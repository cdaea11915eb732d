// The bit patterns written over every output before a run (shared by the GPU side, which
// writes them, and the comparison, which recognizes elements left unwritten). Each is a NaN in
// its float format, with a payload a real computation does not produce (canonical NaNs are
// 0x7FC0 / 0x7E00 / 0x7FC00000), so an untouched element fails as NaN and is reported as
// "never written".
#ifndef PTXBENCH_WORKER_ENGINE_GPU_POISON_H_
#define PTXBENCH_WORKER_ENGINE_GPU_POISON_H_

#include <cstdint>

namespace ptxbench::gpu {

inline constexpr uint32_t kPoisonBF16 = 0xFFAAFFAAu;  // bf16 0xFFAA: exponent 0xFF, mantissa 0x2A.
inline constexpr uint32_t kPoisonFP16 = 0xFEAAFEAAu;  // fp16 0xFEAA: exponent 0x1F, mantissa 0x2AA.
inline constexpr uint32_t kPoisonFP32 = 0xFFAAAAAAu;  // fp32: exponent 0xFF, mantissa 0x2AAAAA.
inline constexpr uint32_t kPoisonFP8E4M3 = 0xFFFFFFFFu;  // e4m3's only NaN: S.1111.111.
inline constexpr uint32_t kPoisonInt32 = 0xAAAAAAAAu;    // No NaN: recognized as the pattern only.

}  // namespace ptxbench::gpu

#endif  // PTXBENCH_WORKER_ENGINE_GPU_POISON_H_
