#include "worker/engine/gpu/runtime.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "worker/engine/gpu/cuda_check.h"
#include "worker/engine/gpu/poison.h"
#include "worker/engine/gpu/sketch.h"

// The embedded fatbin of builtin_kernels.cu (generated at build time, builtin_fatbin.cc).
extern "C" const unsigned char ptxbench_builtin_fatbin[];
extern "C" const size_t ptxbench_builtin_fatbin_size;

namespace ptxbench::gpu {
namespace {

// Entry points are requested at the CUDA 12.8 ABI: every function used exists there, and the
// CUDA 13 driver of the H200 machines serves them (checked on the device, 2026-11-30).
constexpr unsigned kDriverAbiVersion = 12080;

template <typename Fn>
absl::Status Resolve(const char* symbol, Fn* fn) {
  void* ptr = nullptr;
  cudaDriverEntryPointQueryResult query = cudaDriverEntryPointSymbolNotFound;
  PTXBENCH_CUDA_TRY(
      cudaGetDriverEntryPointByVersion(symbol, &ptr, kDriverAbiVersion, cudaEnableDefault, &query));
  if (query != cudaDriverEntryPointSuccess || ptr == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "driver entry point ", symbol, " not found (query result ", static_cast<int>(query), ")"));
  }
  *fn = reinterpret_cast<Fn>(ptr);
  return absl::OkStatus();
}

absl::Status LoadDriverApi(DriverApi* api) {
  // cudaFree(0) initializes the runtime, which opens libcuda.so.1.
  PTXBENCH_CUDA_TRY(cudaFree(nullptr));
  RETURN_IF_ERROR(Resolve("cuGetErrorName", &api->GetErrorName));
  RETURN_IF_ERROR(Resolve("cuGetErrorString", &api->GetErrorString));
  RETURN_IF_ERROR(Resolve("cuCtxGetCurrent", &api->CtxGetCurrent));
  RETURN_IF_ERROR(Resolve("cuCtxResetPersistingL2Cache", &api->CtxResetPersistingL2Cache));
  RETURN_IF_ERROR(Resolve("cuModuleLoadData", &api->ModuleLoadData));
  RETURN_IF_ERROR(Resolve("cuModuleUnload", &api->ModuleUnload));
  RETURN_IF_ERROR(Resolve("cuModuleGetFunction", &api->ModuleGetFunction));
  RETURN_IF_ERROR(Resolve("cuFuncSetAttribute", &api->FuncSetAttribute));
  RETURN_IF_ERROR(Resolve("cuFuncGetAttribute", &api->FuncGetAttribute));
  RETURN_IF_ERROR(Resolve("cuLaunchKernel", &api->LaunchKernel));
  RETURN_IF_ERROR(Resolve("cuLaunchKernelEx", &api->LaunchKernelEx));
  RETURN_IF_ERROR(Resolve("cuTensorMapEncodeTiled", &api->TensorMapEncodeTiled));
  return absl::OkStatus();
}

// Dynamic shared memory of the fp64 SDPA kernels (builtin_kernels.cu): 4 tiles of 32 x 129
// doubles, one (dQ) or two (dK, dV) of 32 x 33, and 2 x 32 row statistics.
constexpr int kSdpaFp64DqSharedBytes = (4 * 32 * 129 + 32 * 33 + 2 * 32) * 8;
constexpr int kSdpaFp64DkdvSharedBytes = (4 * 32 * 129 + 2 * 32 * 33 + 2 * 32) * 8;

}  // namespace

bool IsKernelFault(int code) {
  switch (code) {
    case 700:  // illegal address
    case 702:  // launch timeout
    case 710:  // assert (trap in device code)
    case 714:  // hardware stack error
    case 715:  // illegal instruction
    case 716:  // misaligned address
    case 717:  // invalid address space
    case 718:  // invalid PC
    case 719:  // launch failure (unspecified; trap, cluster/barrier misuse)
    case 720:  // cooperative launch too large
    case 721:  // tensor memory leak (Blackwell: TMEM not deallocated)
      return true;
    default:
      return false;
  }
}

absl::Status CudaRuntimeStatus(cudaError_t error, const char* expression, const char* file,
                               int line) {
  std::string message = absl::StrFormat("%s at %s:%d: %s (%s)", expression, file, line,
                                        cudaGetErrorName(error), cudaGetErrorString(error));
  if (IsKernelFault(static_cast<int>(error))) return absl::AbortedError(message);
  if (error == cudaErrorInsufficientDriver || error == cudaErrorNoDevice ||
      error == cudaErrorDevicesUnavailable) {
    return absl::UnavailableError(message);
  }
  return absl::InternalError(message);
}

absl::Status CudaDriverStatus(CUresult error, const char* expression, const char* file, int line) {
  const char* name = "CUDA_ERROR_UNKNOWN";
  const char* text = "unknown driver error";
  auto api = Driver();
  if (api.ok()) {
    (*api)->GetErrorName(error, &name);
    (*api)->GetErrorString(error, &text);
  }
  std::string message = absl::StrFormat("%s at %s:%d: %s (%s)", expression, file, line,
                                        name ? name : "?", text ? text : "?");
  if (IsKernelFault(static_cast<int>(error))) return absl::AbortedError(message);
  return absl::InternalError(message);
}

absl::StatusOr<const DriverApi*> Driver() {
  static DriverApi api;
  static absl::Status status = absl::InternalError("driver API not loaded");
  static std::once_flag once;
  std::call_once(once, [] { status = LoadDriverApi(&api); });
  if (!status.ok()) return status;
  return &api;
}

std::string GpuUnavailableReason(int ordinal) {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error == cudaErrorInsufficientDriver) {
    return absl::StrCat("no usable NVIDIA driver (libcuda.so.1 could not be loaded: ",
                        cudaGetErrorString(error), ")");
  }
  if (error != cudaSuccess) {
    return absl::StrCat("cudaGetDeviceCount failed: ", cudaGetErrorName(error), " (",
                        cudaGetErrorString(error), ")");
  }
  if (count == 0) return "the driver reports no CUDA device";
  if (ordinal < 0 || ordinal >= count) {
    return absl::StrCat("GPU ", ordinal, " requested, ", count, " present");
  }
  return "";
}

std::string DeviceInfo::Arch() const {
  if (cc_major == 9 && cc_minor == 0) return "sm_90a";
  if (cc_major == 10 && cc_minor == 0) return "sm_100a";
  return absl::StrCat("sm_", cc_major, cc_minor);
}

DeviceDescription Describe(const DeviceInfo& info) {
  DeviceDescription d;
  d.ordinal = info.ordinal;
  d.name = info.name;
  d.uuid = info.uuid;
  d.pci_bus_id = info.pci_bus_id;
  d.compute_capability = absl::StrCat(info.cc_major, ".", info.cc_minor);
  d.arch = info.Arch();
  d.sm_count = info.sm_count;
  d.l2_bytes = info.l2_bytes;
  d.persisting_l2_max_bytes = info.persisting_l2_max_bytes;
  d.shared_per_block_optin = info.shared_per_block_optin;
  d.total_memory = info.total_memory;
  d.sm_clock_max_khz = info.sm_clock_max_khz;
  d.memory_clock_max_khz = info.memory_clock_max_khz;
  d.memory_bus_bits = info.memory_bus_bits;
  d.driver_version = info.driver_version;
  d.runtime_version = info.runtime_version;
  return d;
}

absl::StatusOr<DeviceInfo> InitDevice(int ordinal) {
  std::string unavailable = GpuUnavailableReason(ordinal);
  if (!unavailable.empty()) return absl::UnavailableError(unavailable);
  PTXBENCH_CUDA_TRY(cudaSetDevice(ordinal));
  // Limits must be set before the first module load or launch in the context.
  PTXBENCH_CUDA_TRY(cudaDeviceSetLimit(cudaLimitPrintfFifoSize, 64 << 10));
  PTXBENCH_CUDA_TRY(cudaDeviceSetLimit(cudaLimitMallocHeapSize, 1 << 20));
  ASSIGN_OR_RETURN(const DriverApi* api, Driver());
  (void)api;
  cudaDeviceProp prop{};
  PTXBENCH_CUDA_TRY(cudaGetDeviceProperties(&prop, ordinal));
  DeviceInfo info;
  info.ordinal = ordinal;
  info.name = prop.name;
  char uuid[64];
  const unsigned char* u = reinterpret_cast<const unsigned char*>(prop.uuid.bytes);
  std::snprintf(uuid, sizeof uuid,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
                u[14], u[15]);
  info.uuid = uuid;
  info.pci_bus_id =
      absl::StrFormat("%04x:%02x:%02x.0", prop.pciDomainID, prop.pciBusID, prop.pciDeviceID);
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.sm_count = prop.multiProcessorCount;
  info.l2_bytes = prop.l2CacheSize;
  info.persisting_l2_max_bytes = prop.persistingL2CacheMaxSize;
  info.shared_per_block_optin = static_cast<int64_t>(prop.sharedMemPerBlockOptin);
  info.total_memory = static_cast<int64_t>(prop.totalGlobalMem);
  PTXBENCH_CUDA_TRY(cudaDeviceGetAttribute(&info.sm_clock_max_khz, cudaDevAttrClockRate, ordinal));
  PTXBENCH_CUDA_TRY(
      cudaDeviceGetAttribute(&info.memory_clock_max_khz, cudaDevAttrMemoryClockRate, ordinal));
  PTXBENCH_CUDA_TRY(
      cudaDeviceGetAttribute(&info.memory_bus_bits, cudaDevAttrGlobalMemoryBusWidth, ordinal));
  PTXBENCH_CUDA_TRY(cudaDriverGetVersion(&info.driver_version));
  PTXBENCH_CUDA_TRY(cudaRuntimeGetVersion(&info.runtime_version));
  if (info.persisting_l2_max_bytes > 0) {
    PTXBENCH_CUDA_TRY(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0));
  }
  return info;
}

// ---------------------------------------------------------------- RAII owners

namespace {
std::atomic<size_t> device_buffer_live_bytes{0};
}  // namespace

size_t DeviceBuffer::LiveBytes() { return device_buffer_live_bytes.load(); }

absl::StatusOr<DeviceBuffer> DeviceBuffer::Allocate(size_t bytes) {
  DeviceBuffer buffer;
  if (bytes == 0) return buffer;
  PTXBENCH_CUDA_TRY(cudaMalloc(&buffer.ptr_, bytes));
  buffer.bytes_ = bytes;
  device_buffer_live_bytes += bytes;
  return buffer;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::Reset() {
  if (ptr_ != nullptr) {
    cudaFree(ptr_);  // Errors here are sticky ones already reported.
    device_buffer_live_bytes -= bytes_;
  }
  ptr_ = nullptr;
  bytes_ = 0;
}

absl::StatusOr<Stream> Stream::Create() {
  Stream s;
  PTXBENCH_CUDA_TRY(cudaStreamCreateWithFlags(&s.stream_, cudaStreamNonBlocking));
  return s;
}
Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    if (stream_) cudaStreamDestroy(stream_);
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}
Stream::~Stream() {
  if (stream_) cudaStreamDestroy(stream_);
}
absl::Status Stream::Synchronize() const {
  PTXBENCH_CUDA_TRY(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::StatusOr<Event> Event::Create() {
  Event e;
  PTXBENCH_CUDA_TRY(cudaEventCreate(&e.event_));
  return e;
}
Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (event_) cudaEventDestroy(event_);
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}
Event::~Event() {
  if (event_) cudaEventDestroy(event_);
}

absl::StatusOr<double> ElapsedMs(const Event& start, const Event& end) {
  PTXBENCH_CUDA_TRY(cudaEventSynchronize(end.get()));
  float ms = 0;
  PTXBENCH_CUDA_TRY(cudaEventElapsedTime(&ms, start.get(), end.get()));
  return static_cast<double>(ms);
}

absl::StatusOr<Module> Module::Load(const void* image) {
  ASSIGN_OR_RETURN(const DriverApi* api, Driver());
  Module m;
  PTXBENCH_CU_TRY(api->ModuleLoadData(&m.module_, image));
  return m;
}
Module& Module::operator=(Module&& other) noexcept {
  if (this != &other) {
    (void)Unload();
    module_ = std::exchange(other.module_, nullptr);
  }
  return *this;
}
Module::~Module() { (void)Unload(); }
absl::Status Module::Unload() {
  if (module_ == nullptr) return absl::OkStatus();
  ASSIGN_OR_RETURN(const DriverApi* api, Driver());
  CUmodule m = std::exchange(module_, nullptr);
  PTXBENCH_CU_TRY(api->ModuleUnload(m));
  return absl::OkStatus();
}
absl::StatusOr<CUfunction> Module::Function(const std::string& name) const {
  ASSIGN_OR_RETURN(const DriverApi* api, Driver());
  CUfunction f = nullptr;
  CUresult r = api->ModuleGetFunction(&f, module_, name.c_str());
  if (r == CUDA_ERROR_NOT_FOUND) {
    return absl::NotFoundError(absl::StrCat("kernel '", name, "' is not in the module"));
  }
  PTXBENCH_CU_TRY(r);
  return f;
}

absl::StatusOr<std::string> ExportIpcHandle(const void* device_pointer) {
  cudaIpcMemHandle_t handle;
  PTXBENCH_CUDA_TRY(cudaIpcGetMemHandle(&handle, const_cast<void*>(device_pointer)));
  static_assert(sizeof handle.reserved == 64);
  std::string hex;
  for (char c : handle.reserved)
    absl::StrAppend(&hex, absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
  return hex;
}

absl::StatusOr<ImportedBuffer> ImportedBuffer::Open(const std::string& hex) {
  cudaIpcMemHandle_t handle;
  if (hex.size() != 2 * sizeof handle.reserved) {
    return absl::InvalidArgumentError(absl::StrCat("IPC handle of ", hex.size(), " hex digits"));
  }
  for (size_t i = 0; i < sizeof handle.reserved; ++i) {
    unsigned value = 0;
    if (std::sscanf(hex.c_str() + 2 * i, "%2x", &value) != 1) {
      return absl::InvalidArgumentError("IPC handle is not hexadecimal");
    }
    handle.reserved[i] = static_cast<char>(value);
  }
  ImportedBuffer b;
  PTXBENCH_CUDA_TRY(cudaIpcOpenMemHandle(&b.ptr_, handle, cudaIpcMemLazyEnablePeerAccess));
  return b;
}

ImportedBuffer& ImportedBuffer::operator=(ImportedBuffer&& other) noexcept {
  if (this != &other) {
    if (ptr_ != nullptr) cudaIpcCloseMemHandle(ptr_);
    ptr_ = std::exchange(other.ptr_, nullptr);
  }
  return *this;
}

ImportedBuffer::~ImportedBuffer() {
  if (ptr_ != nullptr) cudaIpcCloseMemHandle(ptr_);
}

absl::Status SynchronizeDevice() {
  PTXBENCH_CUDA_TRY(cudaDeviceSynchronize());
  PTXBENCH_CUDA_TRY(cudaGetLastError());
  return absl::OkStatus();
}

// ---------------------------------------------------------------- builtin kernels

int BuiltinDTypeBytes(BuiltinDType dtype) {
  switch (dtype) {
    case BuiltinDType::kBF16:
    case BuiltinDType::kFP16:
      return 2;
    case BuiltinDType::kFP32:
    case BuiltinDType::kInt32:
      return 4;
    case BuiltinDType::kFP8E4M3:
      return 1;
  }
  return 1;
}

ElementType ElementTypeOf(BuiltinDType dtype) {
  switch (dtype) {
    case BuiltinDType::kBF16:
      return ElementType::kBF16;
    case BuiltinDType::kFP16:
      return ElementType::kFP16;
    case BuiltinDType::kFP32:
      return ElementType::kFP32;
    case BuiltinDType::kFP8E4M3:
      return ElementType::kFP8E4M3;
    case BuiltinDType::kInt32:
      return ElementType::kInt32;
  }
  return ElementType::kFP32;
}

uint32_t PoisonPattern(BuiltinDType dtype) {
  switch (dtype) {
    case BuiltinDType::kBF16:
      return kPoisonBF16;
    case BuiltinDType::kFP16:
      return kPoisonFP16;
    case BuiltinDType::kFP32:
      return kPoisonFP32;
    case BuiltinDType::kFP8E4M3:
      return kPoisonFP8E4M3;
    case BuiltinDType::kInt32:
      return kPoisonInt32;
  }
  return kPoisonFP32;
}

absl::StatusOr<std::unique_ptr<Builtins>> Builtins::Load(const DeviceInfo& device) {
  std::unique_ptr<Builtins> b(new Builtins());
  ASSIGN_OR_RETURN(b->module_, Module::Load(ptxbench_builtin_fatbin));
  ASSIGN_OR_RETURN(b->generate_, b->module_.Function("ptxbench_generate"));
  ASSIGN_OR_RETURN(b->fill32_, b->module_.Function("ptxbench_fill32"));
  ASSIGN_OR_RETURN(b->hash_, b->module_.Function("ptxbench_hash"));
  ASSIGN_OR_RETURN(b->flush_fn_, b->module_.Function("ptxbench_flush"));
  ASSIGN_OR_RETURN(b->discard_fn_, b->module_.Function("ptxbench_discard"));
  ASSIGN_OR_RETURN(b->health_, b->module_.Function("ptxbench_health"));
  ASSIGN_OR_RETURN(b->compare_, b->module_.Function("ptxbench_compare"));
  ASSIGN_OR_RETURN(b->sketch_, b->module_.Function("ptxbench_sketch"));
  ASSIGN_OR_RETURN(b->delay_, b->module_.Function("ptxbench_delay"));
  ASSIGN_OR_RETURN(b->sdpa_fp64_delta_, b->module_.Function("ptxbench_sdpa_bwd_fp64_delta"));
  ASSIGN_OR_RETURN(b->sdpa_fp64_dq_, b->module_.Function("ptxbench_sdpa_bwd_fp64_dq"));
  ASSIGN_OR_RETURN(b->sdpa_fp64_dkdv_, b->module_.Function("ptxbench_sdpa_bwd_fp64_dkdv"));
  ASSIGN_OR_RETURN(b->compare_fp64_, b->module_.Function("ptxbench_compare_fp64"));
  {
    // The fp64 SDPA kernels' tiles exceed the 48 KiB default of dynamic shared memory.
    ASSIGN_OR_RETURN(const DriverApi* api, Driver());
    PTXBENCH_CU_TRY(api->FuncSetAttribute(
        b->sdpa_fp64_dq_, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, kSdpaFp64DqSharedBytes));
    PTXBENCH_CU_TRY(api->FuncSetAttribute(b->sdpa_fp64_dkdv_,
                                          CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                          kSdpaFp64DkdvSharedBytes));
  }
  ASSIGN_OR_RETURN(b->hash_result_, DeviceBuffer::Allocate(sizeof(unsigned long long)));
  // Twice the L2 (62.9 MB on the H200 -> 120 MB, overwritten in 38 us there, 2026-11-30).
  size_t flush_bytes = static_cast<size_t>(std::max<int64_t>(device.l2_bytes, 1 << 20)) * 2;
  flush_bytes = (flush_bytes + 127) / 128 * 128;  // whole lines for ptxbench_discard
  ASSIGN_OR_RETURN(b->flush_, DeviceBuffer::Allocate(flush_bytes));
  b->sm_count_ = device.sm_count > 0 ? device.sm_count : 132;
  return b;
}

absl::Status Builtins::Launch(CUfunction f, unsigned grid, unsigned block, void** args,
                              cudaStream_t stream) {
  ASSIGN_OR_RETURN(const DriverApi* api, Driver());
  PTXBENCH_CU_TRY(api->LaunchKernel(f, grid, 1, 1, block, 1, 1, 0,
                                    reinterpret_cast<CUstream>(stream), args, nullptr));
  return absl::OkStatus();
}

absl::Status Builtins::Generate(void* out, uint64_t count, BuiltinDType dtype, int distribution,
                                uint64_t seed, uint32_t tensor_index, cudaStream_t stream,
                                const IndexDistributionArgs& index_args) {
  if (count == 0) return absl::OkStatus();
  int dtype_code = static_cast<int>(dtype);
  int64_t pages = index_args.pages, max_length = index_args.max_length, jitter = index_args.jitter;
  void* args[] = {&out,          &count, &seed,       &tensor_index, &dtype_code,
                  &distribution, &pages, &max_length, &jitter};
  return Launch(generate_, static_cast<unsigned>(sm_count_) * 8, 256, args, stream);
}

absl::Status Builtins::Fill32(void* out, uint64_t bytes, uint32_t pattern, cudaStream_t stream) {
  if (bytes == 0) return absl::OkStatus();
  void* args[] = {&out, &bytes, &pattern};
  return Launch(fill32_, static_cast<unsigned>(sm_count_) * 8, 256, args, stream);
}

absl::StatusOr<uint64_t> Builtins::Hash(const void* data, uint64_t bytes, uint64_t key,
                                        cudaStream_t stream) {
  PTXBENCH_CUDA_TRY(cudaMemsetAsync(hash_result_.get(), 0, sizeof(unsigned long long), stream));
  void* result = hash_result_.get();
  void* args[] = {&data, &bytes, &key, &result};
  RETURN_IF_ERROR(Launch(hash_, static_cast<unsigned>(sm_count_) * 4, 256, args, stream));
  unsigned long long value = 0;
  PTXBENCH_CUDA_TRY(
      cudaMemcpyAsync(&value, hash_result_.get(), sizeof value, cudaMemcpyDeviceToHost, stream));
  PTXBENCH_CUDA_TRY(cudaStreamSynchronize(stream));
  return static_cast<uint64_t>(value) ^ bytes;
}

namespace {
// builtin_kernels.cu's ptxbench_sketch layout: 16 projections, then sum |x|, sum x^2, sum tol,
// sum tol^2, non-finite count.
constexpr size_t kSketchKernelMaxK = 16;
constexpr size_t kSketchStride = kSketchKernelMaxK + 5;
static_assert(kSketchKernelMaxK == kSketchMaxProjections);
}  // namespace

absl::StatusOr<TensorSketch> Builtins::Sketch(const void* data, uint64_t count, BuiltinDType dtype,
                                              uint64_t key, uint32_t tensor_index,
                                              size_t projections, double atol, double rtol,
                                              cudaStream_t stream) {
  if (projections == 0 || projections > kSketchMaxProjections) {
    return absl::InvalidArgumentError(absl::StrCat("sketch: ", projections, " projections (1..",
                                                   kSketchMaxProjections, " supported)"));
  }
  const unsigned blocks = static_cast<unsigned>(sm_count_) * 4;
  const size_t result_bytes = size_t{blocks} * kSketchStride * sizeof(double);
  if (sketch_results_.bytes() < result_bytes) {
    sketch_results_.Reset();
    ASSIGN_OR_RETURN(sketch_results_, DeviceBuffer::Allocate(result_bytes));
  }
  int dtype_code = static_cast<int>(dtype);
  uint32_t stream_id = kSketchStream + tensor_index;
  int k = static_cast<int>(projections);
  void* results = sketch_results_.get();
  void* args[] = {&data, &count, &dtype_code, &key, &stream_id, &k, &atol, &rtol, &results};
  RETURN_IF_ERROR(Launch(sketch_, blocks, 256, args, stream));
  std::vector<double> host(size_t{blocks} * kSketchStride);
  PTXBENCH_CUDA_TRY(
      cudaMemcpyAsync(host.data(), results, result_bytes, cudaMemcpyDeviceToHost, stream));
  PTXBENCH_CUDA_TRY(cudaStreamSynchronize(stream));
  std::vector<double> total(kSketchStride, 0.0);
  for (unsigned b = 0; b < blocks; ++b) {
    for (size_t j = 0; j < kSketchStride; ++j) total[j] += host[b * kSketchStride + j];
  }
  TensorSketch sketch;
  sketch.projections.assign(total.begin(), total.begin() + static_cast<ptrdiff_t>(projections));
  sketch.abs_sum = total[kSketchKernelMaxK];
  sketch.square_sum = total[kSketchKernelMaxK + 1];
  sketch.tolerance_sum = total[kSketchKernelMaxK + 2];
  sketch.tolerance_square_sum = total[kSketchKernelMaxK + 3];
  sketch.nonfinite = static_cast<uint64_t>(total[kSketchKernelMaxK + 4]);
  return sketch;
}

absl::Status Builtins::Delay(uint64_t ns, cudaStream_t stream) {
  if (ns == 0) return absl::OkStatus();
  void* args[] = {&ns};
  return Launch(delay_, 1, 1, args, stream);
}

absl::Status Builtins::FlushL2(cudaStream_t stream) {
  void* buffer = flush_.get();
  uint64_t count = flush_.bytes() / 16;
  int value = ++flush_value_;
  void* args[] = {&buffer, &count, &value};
  RETURN_IF_ERROR(Launch(flush_fn_, static_cast<unsigned>(sm_count_) * 4, 512, args, stream));
  uint64_t lines = flush_.bytes() / 128;
  void* discard_args[] = {&buffer, &lines};
  RETURN_IF_ERROR(
      Launch(discard_fn_, static_cast<unsigned>(sm_count_) * 4, 512, discard_args, stream));
  ASSIGN_OR_RETURN(const DriverApi* api, Driver());
  PTXBENCH_CU_TRY(api->CtxResetPersistingL2Cache());
  return absl::OkStatus();
}

namespace {

// builtin_kernels.cu's per-block result of ptxbench_compare.
struct CompareBlockResult {
  unsigned long long mismatched, nonfinite, unwritten, reference_nonfinite;
  double max_abs, max_rel, err_sq, ref_sq;
};
static_assert(sizeof(CompareBlockResult) == 64);

int DTypeCode(ElementType type) {
  switch (type) {
    case ElementType::kBF16:
      return static_cast<int>(BuiltinDType::kBF16);
    case ElementType::kFP16:
      return static_cast<int>(BuiltinDType::kFP16);
    case ElementType::kFP32:
      return static_cast<int>(BuiltinDType::kFP32);
    case ElementType::kFP8E4M3:
      return static_cast<int>(BuiltinDType::kFP8E4M3);
    case ElementType::kInt32:
      return static_cast<int>(BuiltinDType::kInt32);
  }
  return static_cast<int>(BuiltinDType::kFP32);
}

}  // namespace

absl::StatusOr<CompareReport> Builtins::Compare(const void* got, const void* expected,
                                                uint64_t count, ElementType type,
                                                const std::vector<int64_t>& shape,
                                                const ToleranceRule& rule, uint32_t poison,
                                                cudaStream_t stream) {
  CompareReport r;
  r.elements = count;
  if (count == 0) {
    FinishCompareReport(rule, 0, 0, &r);
    return r;
  }
  // 8 blocks of 256 threads per SM keep HBM busy (the compare reads 2 x 117 MB for the timed
  // GEMM); a block gets at least 4096 elements so the per-block results stay few.
  const uint64_t max_blocks = static_cast<uint64_t>(sm_count_) * 8;
  // The block rule: one thread block per rule block, so the per-block results are the rule's
  // block sums (64 rows x 128 columns = 8192 elements: 12288 blocks for the timed backward).
  const uint64_t rule_block = BlockElements(rule, shape, count);
  const uint64_t blocks = rule_block
                              ? (count + rule_block - 1) / rule_block
                              : std::max<uint64_t>(1, std::min(max_blocks, (count + 4095) / 4096));
  uint64_t chunk = rule_block ? rule_block : (count + blocks - 1) / blocks;
  if (rule_block && blocks > (uint64_t{1} << 22)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the block rule splits %d elements into %d blocks (more than 4194304): raise block_rows",
        count, blocks));
  }
  const size_t result_bytes = blocks * sizeof(CompareBlockResult);
  if (compare_results_.bytes() < result_bytes) {
    compare_results_.Reset();
    ASSIGN_OR_RETURN(compare_results_, DeviceBuffer::Allocate(result_bytes));
  }
  const int bytes = ElementBytes(type);
  uint32_t poison_bits = bytes == 4 ? poison : (poison & ((1u << (8 * bytes)) - 1));
  int dtype = DTypeCode(type);
  double atol = rule.atol, rtol = rule.rtol;
  void* results = compare_results_.get();
  void* args[] = {const_cast<void**>(&got),
                  const_cast<void**>(&expected),
                  &count,
                  &dtype,
                  &poison_bits,
                  &atol,
                  &rtol,
                  &chunk,
                  &results};
  RETURN_IF_ERROR(Launch(compare_, static_cast<unsigned>(blocks), 256, args, stream));
  std::vector<CompareBlockResult> host(blocks);
  PTXBENCH_CUDA_TRY(
      cudaMemcpyAsync(host.data(), results, result_bytes, cudaMemcpyDeviceToHost, stream));
  PTXBENCH_CUDA_TRY(cudaStreamSynchronize(stream));
  double err_sq = 0, ref_sq = 0;
  std::vector<BlockSums> rule_blocks;
  if (rule_block) rule_blocks.reserve(blocks);
  for (uint64_t i = 0; rule_block && i < blocks; ++i) {
    rule_blocks.push_back(
        BlockSums{host[i].err_sq, host[i].ref_sq, std::min(count, (i + 1) * chunk) - i * chunk});
  }
  for (const CompareBlockResult& b : host) {
    r.mismatched += b.mismatched;
    r.nonfinite += b.nonfinite;
    r.unwritten += b.unwritten;
    r.reference_nonfinite += b.reference_nonfinite;
    r.max_abs_error = std::max(r.max_abs_error, b.max_abs);
    r.max_rel_error = std::max(r.max_rel_error, b.max_rel);
    err_sq += b.err_sq;
    ref_sq += b.ref_sq;
  }
  // The first mismatches: the CPU rule on the ranges of the first blocks that hold any (a
  // block's range is at most ~56 K elements for the timed GEMM).
  for (uint64_t b = 0; b < blocks && r.first_mismatches.size() < kMaxReportedMismatches; ++b) {
    if (host[b].mismatched + host[b].nonfinite == 0) continue;
    const uint64_t begin = b * chunk, end = std::min(count, begin + chunk);
    std::string got_host((end - begin) * bytes, '\0'), expected_host((end - begin) * bytes, '\0');
    PTXBENCH_CUDA_TRY(cudaMemcpyAsync(got_host.data(),
                                      static_cast<const char*>(got) + begin * bytes,
                                      got_host.size(), cudaMemcpyDeviceToHost, stream));
    PTXBENCH_CUDA_TRY(cudaMemcpyAsync(expected_host.data(),
                                      static_cast<const char*>(expected) + begin * bytes,
                                      expected_host.size(), cudaMemcpyDeviceToHost, stream));
    PTXBENCH_CUDA_TRY(cudaStreamSynchronize(stream));
    // Only its first mismatches are used: no block sums for a part.
    ToleranceRule part_rule = rule;
    part_rule.block_rows = 0;
    CompareReport part = CompareOutputs(got_host.data(), expected_host.data(), end - begin, type,
                                        {}, part_rule, poison, 1);
    for (Mismatch& m : part.first_mismatches) {
      if (r.first_mismatches.size() >= kMaxReportedMismatches) break;
      m.index += begin;
      m.coordinates = Coordinates(m.index, shape);
      r.first_mismatches.push_back(std::move(m));
    }
  }
  FinishCompareReport(rule, err_sq, ref_sq, &r, rule_block ? &rule_blocks : nullptr);
  return r;
}

absl::Status Builtins::SdpaBackwardFp64(const SdpaFp64Shape& shape, const void* q, const void* k,
                                        const void* v, const void* o, const void* d_o,
                                        const void* lse, double* dq, double* dk, double* dv,
                                        cudaStream_t stream) {
  if (shape.d <= 0 || shape.d > 128 || shape.d % 8 != 0 || shape.s <= 0 || shape.heads <= 0 ||
      shape.s > (int64_t{1} << 30) || shape.heads > 65535) {
    return absl::InvalidArgumentError(
        absl::StrFormat("fp64 SDPA backward: heads %d, S %d, D %d (D must be a multiple of 8 up "
                        "to 128, heads at most 65535)",
                        shape.heads, shape.s, shape.d));
  }
  const uint64_t rows = static_cast<uint64_t>(shape.heads * shape.s);
  if (sdpa_fp64_delta_rows_.bytes() < rows * sizeof(double)) {
    sdpa_fp64_delta_rows_.Reset();
    ASSIGN_OR_RETURN(sdpa_fp64_delta_rows_, DeviceBuffer::Allocate(rows * sizeof(double)));
  }
  void* delta = sdpa_fp64_delta_rows_.get();
  int s = static_cast<int>(shape.s), d = static_cast<int>(shape.d);
  int causal = shape.causal ? 1 : 0;
  double scale = shape.scale;
  uint64_t row_count = rows;
  void* delta_args[] = {const_cast<void**>(&o), const_cast<void**>(&d_o), &delta, &row_count, &d};
  RETURN_IF_ERROR(
      Launch(sdpa_fp64_delta_, static_cast<unsigned>((rows + 255) / 256), 256, delta_args, stream));
  ASSIGN_OR_RETURN(const DriverApi* api, Driver());
  const unsigned tiles = static_cast<unsigned>((shape.s + 31) / 32);
  const unsigned heads = static_cast<unsigned>(shape.heads);
  void* dq_args[] = {const_cast<void**>(&q),
                     const_cast<void**>(&k),
                     const_cast<void**>(&v),
                     const_cast<void**>(&d_o),
                     const_cast<void**>(&lse),
                     &delta,
                     &dq,
                     &s,
                     &d,
                     &scale,
                     &causal};
  PTXBENCH_CU_TRY(api->LaunchKernel(sdpa_fp64_dq_, tiles, heads, 1, 256, 1, 1,
                                    kSdpaFp64DqSharedBytes, reinterpret_cast<CUstream>(stream),
                                    dq_args, nullptr));
  if (dk != nullptr && dv != nullptr) {
    void* dkdv_args[] = {const_cast<void**>(&q),
                         const_cast<void**>(&k),
                         const_cast<void**>(&v),
                         const_cast<void**>(&d_o),
                         const_cast<void**>(&lse),
                         &delta,
                         &dk,
                         &dv,
                         &s,
                         &d,
                         &scale,
                         &causal};
    PTXBENCH_CU_TRY(api->LaunchKernel(sdpa_fp64_dkdv_, tiles, heads, 1, 256, 1, 1,
                                      kSdpaFp64DkdvSharedBytes, reinterpret_cast<CUstream>(stream),
                                      dkdv_args, nullptr));
  }
  return absl::OkStatus();
}

absl::StatusOr<Fp64Sums> Builtins::Fp64ErrorSums(const void* got, ElementType type,
                                                 const double* reference, uint64_t count,
                                                 cudaStream_t stream) {
  Fp64Sums sums;
  if (count == 0) return sums;
  const uint64_t blocks = std::max<uint64_t>(
      1, std::min<uint64_t>(static_cast<uint64_t>(sm_count_) * 8, (count + 4095) / 4096));
  uint64_t chunk = (count + blocks - 1) / blocks;
  const size_t result_bytes = blocks * 2 * sizeof(double);
  if (compare_fp64_results_.bytes() < result_bytes) {
    compare_fp64_results_.Reset();
    ASSIGN_OR_RETURN(compare_fp64_results_, DeviceBuffer::Allocate(result_bytes));
  }
  int dtype = DTypeCode(type);
  void* results = compare_fp64_results_.get();
  void* args[] = {
      const_cast<void**>(&got), &dtype, const_cast<double**>(&reference), &count, &chunk, &results};
  RETURN_IF_ERROR(Launch(compare_fp64_, static_cast<unsigned>(blocks), 256, args, stream));
  std::vector<double> host(blocks * 2);
  PTXBENCH_CUDA_TRY(
      cudaMemcpyAsync(host.data(), results, result_bytes, cudaMemcpyDeviceToHost, stream));
  PTXBENCH_CUDA_TRY(cudaStreamSynchronize(stream));
  for (uint64_t b = 0; b < blocks; ++b) {
    sums.err_sq += host[2 * b];
    sums.ref_sq += host[2 * b + 1];
  }
  return sums;
}

absl::Status Builtins::HealthCheck() {
  constexpr int kCount = 4096;
  ASSIGN_OR_RETURN(DeviceBuffer out, DeviceBuffer::Allocate(kCount * sizeof(int)));
  void* ptr = out.get();
  int n = kCount;
  void* args[] = {&ptr, &n};
  RETURN_IF_ERROR(Launch(health_, kCount / 256, 256, args, nullptr));
  std::vector<int> host(kCount);
  PTXBENCH_CUDA_TRY(cudaMemcpy(host.data(), ptr, kCount * sizeof(int), cudaMemcpyDeviceToHost));
  for (int i = 0; i < kCount; ++i) {
    if (host[i] != i * 3 + 1) {
      return absl::InternalError(absl::StrCat("health kernel wrote ", host[i], " at ", i));
    }
  }
  return absl::OkStatus();
}

}  // namespace ptxbench::gpu
