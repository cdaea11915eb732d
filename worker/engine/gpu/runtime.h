// The CUDA runtime layer of the evaluator: driver entry points, the device, RAII owners of
// CUDA handles, and the harness's own kernels (builtin_kernels.cu).
//
// No binary of ours links libcuda: compile-only workers and CI run where libcuda.so.1 does not
// exist. cudart_static opens the driver at first use and fails cleanly without it; every
// driver-API function (module loading, cuLaunchKernelEx, cuTensorMapEncodeTiled) comes from
// cudaGetDriverEntryPointByVersion.
#ifndef PTXBENCH_WORKER_ENGINE_GPU_RUNTIME_H_
#define PTXBENCH_WORKER_ENGINE_GPU_RUNTIME_H_

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "worker/engine/gpu/compare.h"
#include "worker/engine/gpu/philox.h"
#include "worker/engine/gpu/protocol_messages.h"

namespace ptxbench::gpu {

// The driver functions the engine uses, resolved once.
struct DriverApi {
  decltype(&::cuGetErrorName) GetErrorName = nullptr;
  decltype(&::cuGetErrorString) GetErrorString = nullptr;
  decltype(&::cuCtxGetCurrent) CtxGetCurrent = nullptr;
  decltype(&::cuCtxResetPersistingL2Cache) CtxResetPersistingL2Cache = nullptr;
  decltype(&::cuModuleLoadData) ModuleLoadData = nullptr;
  decltype(&::cuModuleUnload) ModuleUnload = nullptr;
  decltype(&::cuModuleGetFunction) ModuleGetFunction = nullptr;
  decltype(&::cuFuncSetAttribute) FuncSetAttribute = nullptr;
  decltype(&::cuFuncGetAttribute) FuncGetAttribute = nullptr;
  decltype(&::cuLaunchKernel) LaunchKernel = nullptr;
  decltype(&::cuLaunchKernelEx) LaunchKernelEx = nullptr;
  decltype(&::cuTensorMapEncodeTiled) TensorMapEncodeTiled = nullptr;
};

// Loads the entry points (initializing the runtime). Unavailable with the reason when there is
// no driver ("libcuda.so.1 not loadable: cudaErrorInsufficientDriver ...") or no device.
absl::StatusOr<const DriverApi*> Driver();

// Why the runtime stages cannot run here, or "" when a device is usable.
std::string GpuUnavailableReason(int ordinal);

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  std::string uuid;
  std::string pci_bus_id;
  int cc_major = 0;
  int cc_minor = 0;
  int sm_count = 0;
  int64_t l2_bytes = 0;
  int64_t persisting_l2_max_bytes = 0;
  int64_t shared_per_block_optin = 0;
  int64_t total_memory = 0;
  int sm_clock_max_khz = 0;
  int memory_clock_max_khz = 0;
  int memory_bus_bits = 0;
  int driver_version = 0;
  int runtime_version = 0;
  std::string Arch() const;  // "sm_90a" on cc 9.0, "sm_100a" on 10.0, else "sm_XY".
};
// As the ready, timing and health events report it.
DeviceDescription Describe(const DeviceInfo& info);

// Selects the device, creates its primary context, and sets the limits every evaluator process
// runs under: small device printf FIFO and malloc heap (a kernel cannot flood the log or take
// the card's memory through device malloc) and no persisting-L2 set-aside (so no kernel can
// pin lines in L2 across the flushes of the timing loop).
absl::StatusOr<DeviceInfo> InitDevice(int ordinal);

// Move-only owner of one cudaMalloc allocation.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  static absl::StatusOr<DeviceBuffer> Allocate(size_t bytes);
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { Reset(); }

  void* get() const { return ptr_; }
  CUdeviceptr address() const { return reinterpret_cast<CUdeviceptr>(ptr_); }
  size_t bytes() const { return bytes_; }
  void Reset();

  // Bytes held by every live DeviceBuffer of this process: what a warm reference process keeps
  // on the GPU between evaluations (its ResetEvent reports it to the pool,
  // evaluate_processes.cc ReferencePool).
  static size_t LiveBytes();

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

class Stream {
 public:
  static absl::StatusOr<Stream> Create();
  Stream() = default;
  Stream(Stream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}
  Stream& operator=(Stream&& other) noexcept;
  ~Stream();
  cudaStream_t get() const { return stream_; }
  absl::Status Synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

class Event {
 public:
  static absl::StatusOr<Event> Create();
  Event() = default;
  Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  Event& operator=(Event&& other) noexcept;
  ~Event();
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// Milliseconds between two recorded events (waits for `end`).
absl::StatusOr<double> ElapsedMs(const Event& start, const Event& end);

// A loaded module (cubin, fatbin or PTX image); unloading destroys its global state, which is
// how correctness trials keep a kernel from carrying results from one trial to the next.
class Module {
 public:
  static absl::StatusOr<Module> Load(const void* image);
  Module() = default;
  Module(Module&& other) noexcept : module_(std::exchange(other.module_, nullptr)) {}
  Module& operator=(Module&& other) noexcept;
  ~Module();
  absl::StatusOr<CUfunction> Function(const std::string& name) const;
  CUmodule get() const { return module_; }
  absl::Status Unload();

 private:
  CUmodule module_ = nullptr;
};

// CUDA IPC between the evaluator's processes: the candidate process exports its output buffers
// and the reference process maps them to compare on the GPU, so outputs never cross the host.
// Only that direction: the process running submitted code never maps anything of another.
// A handle travels as 128 hex digits. `device_pointer` must be the start of a cudaMalloc
// allocation (DeviceBuffer::get()).
absl::StatusOr<std::string> ExportIpcHandle(const void* device_pointer);

// A buffer of another process mapped into this one; unmapped on destruction.
class ImportedBuffer {
 public:
  static absl::StatusOr<ImportedBuffer> Open(const std::string& hex_handle);
  ImportedBuffer() = default;
  ImportedBuffer(ImportedBuffer&& other) noexcept : ptr_(std::exchange(other.ptr_, nullptr)) {}
  ImportedBuffer& operator=(ImportedBuffer&& other) noexcept;
  ImportedBuffer(const ImportedBuffer&) = delete;
  ImportedBuffer& operator=(const ImportedBuffer&) = delete;
  ~ImportedBuffer();
  const void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
};

// Checks that no kernel fault is pending: a sticky error returned by cudaGetLastError or a
// synchronize, mapped by cuda_check.h (kAborted for faults).
absl::Status SynchronizeDevice();

// The harness's own kernels.
enum class BuiltinDType { kBF16 = 0, kFP16 = 1, kFP32 = 2, kFP8E4M3 = 3, kInt32 = 4 };
int BuiltinDTypeBytes(BuiltinDType dtype);
// The 32-bit poison pattern written over outputs before every run (poison.h).
uint32_t PoisonPattern(BuiltinDType dtype);
// The comparison's element type of a buffer dtype (compare.h).
ElementType ElementTypeOf(BuiltinDType dtype);

class Builtins {
 public:
  static absl::StatusOr<std::unique_ptr<Builtins>> Load(const DeviceInfo& device);

  // `index_args`: the parameters of the integer distributions (philox.h), ignored by the others.
  absl::Status Generate(void* out, uint64_t count, BuiltinDType dtype, int distribution,
                        uint64_t seed, uint32_t tensor_index, cudaStream_t stream,
                        const IndexDistributionArgs& index_args = {});
  absl::Status Fill32(void* out, uint64_t bytes, uint32_t pattern, cudaStream_t stream);
  // Keyed hash of a device buffer; synchronizes `stream`.
  absl::StatusOr<uint64_t> Hash(const void* data, uint64_t bytes, uint64_t key,
                                cudaStream_t stream);
  // Overwrites a buffer of 2x the L2 size with evict_last stores, invalidates its lines
  // (builtin_kernels.cu ptxbench_flush, ptxbench_discard) and resets persisting L2 lines: the
  // next launch finds nothing of anyone's in L2, whatever cache policy it was read with.
  absl::Status FlushL2(cudaStream_t stream);
  // Runs a tiny known kernel and checks its output.
  absl::Status HealthCheck();
  // compare.h's CompareOutputs on two device buffers of `count` elements, on the GPU: the same
  // counts, maxima, first mismatches (lowest indices) and verdict; the sums of squares are added
  // in another order (relative differences ~1e-15). Synchronizes `stream`. Nothing but the
  // per-block results and, on a failure, the few ranges holding the first mismatches comes to
  // the host.
  absl::StatusOr<CompareReport> Compare(const void* got, const void* expected, uint64_t count,
                                        ElementType type, const std::vector<int64_t>& shape,
                                        const ToleranceRule& rule, uint32_t poison,
                                        cudaStream_t stream);
  // sketch.h's TensorSketch of a device buffer of `count` elements (ptxbench_sketch): the
  // `projections` (<= kSketchMaxProjections) secret +-1 projections under `key`, with the
  // tolerance sums of max(atol, rtol |x|) (0, 0 on the candidate's side). One pass over the
  // buffer; synchronizes `stream`.
  absl::StatusOr<TensorSketch> Sketch(const void* data, uint64_t count, BuiltinDType dtype,
                                      uint64_t key, uint32_t tensor_index, size_t projections,
                                      double atol, double rtol, cudaStream_t stream);
  // The fp64 SDPA backward (builtin_kernels.cu, ptxbench_sdpa_bwd_fp64_*; the definition:
  // compare.h SdpaBackwardFp64Host) of device tensors [heads, S, D]: bf16 q, k, v, o, d_o, fp32
  // lse; fp64 outputs dq and, when both are given, dk and dv (nullptr: not computed). D <= 128
  // and a multiple of 8 (InvalidArgument otherwise). Asynchronous on `stream`.
  absl::Status SdpaBackwardFp64(const SdpaFp64Shape& shape, const void* q, const void* k,
                                const void* v, const void* o, const void* d_o, const void* lse,
                                double* dq, double* dk, double* dv, cudaStream_t stream);
  // compare.h Fp64ErrorSums of a device buffer of `count` elements of `type` against `count`
  // device doubles, on the GPU; synchronizes `stream`.
  absl::StatusOr<Fp64Sums> Fp64ErrorSums(const void* got, ElementType type, const double* reference,
                                         uint64_t count, cudaStream_t stream);
  // Holds `stream` for `ns` nanoseconds on the GPU (one thread spinning on %globaltimer).
  absl::Status Delay(uint64_t ns, cudaStream_t stream);
  size_t flush_bytes() const { return flush_.bytes(); }

 private:
  Builtins() = default;
  absl::Status Launch(CUfunction f, unsigned grid, unsigned block, void** args,
                      cudaStream_t stream);
  Module module_;
  CUfunction generate_ = nullptr, fill32_ = nullptr, hash_ = nullptr, flush_fn_ = nullptr,
             discard_fn_ = nullptr, health_ = nullptr, compare_ = nullptr, sketch_ = nullptr,
             delay_ = nullptr, sdpa_fp64_delta_ = nullptr, sdpa_fp64_dq_ = nullptr,
             sdpa_fp64_dkdv_ = nullptr, compare_fp64_ = nullptr;
  DeviceBuffer sdpa_fp64_delta_rows_;  // delta_i of the fp64 SDPA backward (heads x S doubles).
  DeviceBuffer compare_fp64_results_;  // Two doubles per block of ptxbench_compare_fp64.
  DeviceBuffer compare_results_;
  DeviceBuffer sketch_results_;  // kSketchStride doubles per block of the sketch kernel.  // One
                                 // 64-byte result per block of the compare kernel.
  DeviceBuffer flush_;
  DeviceBuffer hash_result_;
  int flush_value_ = 0;
  int sm_count_ = 132;
};

}  // namespace ptxbench::gpu

#endif  // PTXBENCH_WORKER_ENGINE_GPU_RUNTIME_H_
