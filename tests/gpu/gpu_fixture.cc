#include "tests/gpu/gpu_fixture.h"

#include <catch2/catch.hpp>
#include <cstring>

namespace ptxbench::gpu {

GpuFixture& SharedGpu() {
  static GpuFixture* const fixture = [] {
    auto* f = new GpuFixture();
    auto device = InitDevice(0);
    INFO(device.status().message());
    REQUIRE(device.ok());
    f->device = *device;
    auto builtins = Builtins::Load(f->device);
    INFO(builtins.status().message());
    REQUIRE(builtins.ok());
    f->builtins = std::move(*builtins);
    auto stream = Stream::Create();
    REQUIRE(stream.ok());
    f->stream = std::move(*stream);
    return f;
  }();
  return *fixture;
}

DeviceBuffer Upload(const void* data, size_t bytes) {
  auto buffer = DeviceBuffer::Allocate(bytes);
  REQUIRE(buffer.ok());
  if (bytes > 0) {
    REQUIRE(cudaMemcpy(buffer->get(), data, bytes, cudaMemcpyHostToDevice) == cudaSuccess);
    // From pageable memory cudaMemcpy returns once the bytes are staged, possibly before the
    // DMA lands (CUDA runtime API, "API synchronization behavior"), and the tests' kernels run
    // on a non-blocking stream that does not wait for it. Seen on an H100 (2026-12-06, run 10):
    // the GPU compare read stale data in the last 64-row block of a 480 KiB upload.
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  }
  return std::move(*buffer);
}

std::vector<uint16_t> DownloadBf16(const DeviceBuffer& buffer, size_t count) {
  std::vector<uint16_t> host(count);
  REQUIRE(cudaMemcpy(host.data(), buffer.get(), count * 2, cudaMemcpyDeviceToHost) == cudaSuccess);
  return host;
}

float Bf16ToFloat(uint16_t bits) {
  uint32_t word = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &word, 4);
  return f;
}

}  // namespace ptxbench::gpu
