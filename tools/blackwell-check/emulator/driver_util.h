// What the emulator's bf16 drivers share: bf16 conversions, the 128B-swizzled bf16 tensor map
// of a dense row-major tensor (as the plans declare them), and the fp64 reference of
// C = A * B^T.
#ifndef PTXBENCH_TOOLS_BLACKWELL_CHECK_EMULATOR_DRIVER_UTIL_H_
#define PTXBENCH_TOOLS_BLACKWELL_CHECK_EMULATOR_DRIVER_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "emu_runtime.h"

namespace ptxbench_emu_driver {

// fp32 -> bf16, round to nearest even (inputs are finite).
inline uint16_t ToBf16(float value) {
  uint32_t bits = __float_as_uint(value);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}
inline float FromBf16(uint16_t bits) { return __uint_as_float(static_cast<unsigned>(bits) << 16); }

// A 2-D map as a plan declares it: dims (dim0 innermost) and box, in elements.
struct MapArgs {
  unsigned long long dim0 = 0, dim1 = 0, box0 = 0, box1 = 0;
};

// The map of a dense row-major bf16 tensor (row stride dim0 elements), 128B swizzle.
inline CUtensorMap MakeBf16Map(const void* base, const MapArgs& m) {
  namespace emu = ::ptxbench_emu;
  CUtensorMap map{};
  map.opaque[emu::kMapAddress] = reinterpret_cast<unsigned long long>(base);
  map.opaque[emu::kMapDim0] = m.dim0;
  map.opaque[emu::kMapDim1] = m.dim1;
  map.opaque[emu::kMapStride1Bytes] = m.dim0 * 2;
  map.opaque[emu::kMapBox0] = m.box0;
  map.opaque[emu::kMapBox1] = m.box1;
  map.opaque[emu::kMapSwizzleBytes] = 128;
  map.opaque[emu::kMapElementBytes] = 2;
  return map;
}

// C[i][j] = sum_l A[i][l] B[j][l] in double, A m x k and B n x k row-major bf16.
inline std::vector<double> ReferenceGemmAbT(const std::vector<uint16_t>& a,
                                            const std::vector<uint16_t>& b, int m, int n, int k) {
  std::vector<double> c(static_cast<size_t>(m) * n, 0.0);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double sum = 0.0;
      for (int l = 0; l < k; ++l) {
        sum += static_cast<double>(FromBf16(a[static_cast<size_t>(i) * k + l])) *
               FromBf16(b[static_cast<size_t>(j) * k + l]);
      }
      c[static_cast<size_t>(i) * n + j] = sum;
    }
  }
  return c;
}

}  // namespace ptxbench_emu_driver

#endif  // PTXBENCH_TOOLS_BLACKWELL_CHECK_EMULATOR_DRIVER_UTIL_H_
