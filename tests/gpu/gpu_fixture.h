// What the GPU test programs share (tests/gpu, label "gpu"): the device opened once per process
// the way the evaluator opens it (InitDevice: the evaluator's limits), the harness's own kernels
// and a stream, and host <-> device copies for checking results.
#ifndef PTXBENCH_TESTS_GPU_GPU_FIXTURE_H_
#define PTXBENCH_TESTS_GPU_GPU_FIXTURE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "worker/engine/gpu/runtime.h"

namespace ptxbench::gpu {

struct GpuFixture {
  DeviceInfo device;
  std::unique_ptr<Builtins> builtins;
  Stream stream;
};

// GPU 0, set up on first use (a failed set-up fails the test that asked, with the reason).
GpuFixture& SharedGpu();

// A device copy of `bytes` host bytes.
DeviceBuffer Upload(const void* data, size_t bytes);
// `count` bf16 elements of `buffer`, on the host.
std::vector<uint16_t> DownloadBf16(const DeviceBuffer& buffer, size_t count);
float Bf16ToFloat(uint16_t bits);

}  // namespace ptxbench::gpu

#endif  // PTXBENCH_TESTS_GPU_GPU_FIXTURE_H_
