#include "worker/engine/gpu/plan_runner.h"

#include <cstring>
#include <limits>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/expr.h"
#include "worker/engine/gpu/cuda_check.h"
#include "worker/engine/gpu/host_generate.h"
#include "worker/engine/gpu/philox.h"

namespace ptxbench::gpu {

static_assert(static_cast<int>(TensorMapDataType::kBfloat16) == CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
static_assert(static_cast<int>(TensorMapDataType::kFloat16) == CU_TENSOR_MAP_DATA_TYPE_FLOAT16);
static_assert(static_cast<int>(TensorMapDataType::kFloat32) == CU_TENSOR_MAP_DATA_TYPE_FLOAT32);
static_assert(static_cast<int>(TensorMapDataType::kUint8) == CU_TENSOR_MAP_DATA_TYPE_UINT8);
static_assert(static_cast<int>(TensorMapDataType::kInt32) == CU_TENSOR_MAP_DATA_TYPE_INT32);
static_assert(static_cast<int>(TensorMapSwizzle::k128B) == CU_TENSOR_MAP_SWIZZLE_128B);
static_assert(static_cast<int>(TensorMapInterleave::k32B) == CU_TENSOR_MAP_INTERLEAVE_32B);
static_assert(static_cast<int>(TensorMapL2Promotion::k256B) == CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
static_assert(static_cast<int>(TensorMapOobFill::kNan) ==
              CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA);

BuiltinDType ToBuiltinDType(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return BuiltinDType::kBF16;
    case DType::kFP16:
      return BuiltinDType::kFP16;
    case DType::kFP32:
      return BuiltinDType::kFP32;
    case DType::kFP8E4M3:
      return BuiltinDType::kFP8E4M3;
    case DType::kInt32:
      return BuiltinDType::kInt32;
  }
  return BuiltinDType::kBF16;
}

absl::StatusOr<std::vector<WorkloadTensor>> ResolveTensors(const Task& task,
                                                           const Workload& workload) {
  std::vector<WorkloadTensor> out;
  for (size_t i = 0; i < task.tensors.size(); ++i) {
    const TensorSpec& spec = task.tensors[i];
    WorkloadTensor t;
    t.task_index = static_cast<int>(i);
    t.name = spec.name;
    t.output = spec.role == TensorRole::kOutput;
    t.dtype = ToBuiltinDType(spec.dtype);
    switch (spec.distribution) {
      case Distribution::kNormal:
        t.distribution = kDistNormal;
        break;
      case Distribution::kSpiky:
        t.distribution = kDistSpiky;
        break;
      case Distribution::kBlockScale:
        t.distribution = kDistBlockScale;
        break;
      case Distribution::kPagePermutation:
        t.distribution = kDistPagePermutation;
        break;
      case Distribution::kLengthLadder:
        t.distribution = kDistLengthLadder;
        break;
      case Distribution::kFp8Normal:
        t.distribution = kDistFp8Normal;
        break;
      case Distribution::kTensorDescale:
        t.distribution = kDistTensorDescale;
        break;
    }
    // The integer distributions' parameters (task.cc checked their ranges for every workload of
    // the task; a workload built elsewhere is checked here again).
    for (const auto& [text, lowest, target] :
         {std::tuple<const std::string&, int64_t, int64_t*>{spec.distribution_params.pages, 1,
                                                            &t.index_args.pages},
          {spec.distribution_params.max, 1, &t.index_args.max_length},
          {spec.distribution_params.jitter, 0, &t.index_args.jitter}}) {
      if (text.empty()) continue;
      auto value = EvalIntExpr(text, workload.axes);
      if (!value.ok() || *value < lowest || *value > std::numeric_limits<int32_t>::max()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "tensor ", spec.name, " distribution parameter '", text,
            "': ", value.ok() ? absl::StrCat("evaluates to ", *value) : value.status().message()));
      }
      *target = *value;
    }
    t.elements = 1;
    for (const std::string& dim : spec.shape) {
      auto value = EvalIntExpr(dim, workload.axes);
      if (!value.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("tensor ", spec.name, " dimension '", dim,
                                                       "': ", value.status().message()));
      }
      if (*value <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor ", spec.name, " dimension '", dim, "' is ", *value));
      }
      t.shape.push_back(*value);
      t.elements *= static_cast<uint64_t>(*value);
    }
    if (t.distribution == kDistPagePermutation &&
        static_cast<uint64_t>(t.index_args.pages) < t.elements) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", spec.name, ": ", t.elements,
                                                     " distinct pages drawn from a pool of ",
                                                     t.index_args.pages));
    }
    t.bytes = t.elements * static_cast<uint64_t>(BuiltinDTypeBytes(t.dtype));
    if (spec.derived.has_value()) {
      t.derived_library = task.baseline_library;
      t.derived_operation = spec.derived->operation;
      t.derived_output = spec.derived->output;
      t.axes = workload.axes;
    }
    out.push_back(std::move(t));
  }
  return out;
}

absl::StatusOr<TensorSet> TensorSet::Allocate(std::vector<WorkloadTensor> tensors) {
  TensorSet set;
  for (const WorkloadTensor& t : tensors) {
    ASSIGN_OR_RETURN(DeviceBuffer b, DeviceBuffer::Allocate(t.bytes));
    set.buffers_.push_back(std::move(b));
  }
  for (const WorkloadTensor& t : tensors) {
    if (t.derived_operation.empty()) continue;
    ASSIGN_OR_RETURN(set.derived_, DerivedInputs::Create(tensors, t.axes));
    break;
  }
  set.tensors_ = std::move(tensors);
  return set;
}

absl::Status TensorSet::GenerateInputs(Builtins& builtins, uint64_t seed, cudaStream_t stream) {
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const WorkloadTensor& t = tensors_[i];
    if (t.output || !t.derived_operation.empty()) continue;
    RETURN_IF_ERROR(builtins.Generate(buffers_[i].get(), t.elements, t.dtype, t.distribution, seed,
                                      static_cast<uint32_t>(t.task_index), stream, t.index_args));
  }
  return derived_.Fill(buffers_, stream);
}

absl::Status TensorSet::PoisonOutputs(Builtins& builtins, cudaStream_t stream) {
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (!tensors_[i].output) continue;
    RETURN_IF_ERROR(builtins.Fill32(buffers_[i].get(), tensors_[i].bytes,
                                    PoisonPattern(tensors_[i].dtype), stream));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> TensorSet::HashInputs(Builtins& builtins, uint64_t key,
                                               cudaStream_t stream) {
  uint64_t combined = 0;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (tensors_[i].output) continue;
    ASSIGN_OR_RETURN(uint64_t h, builtins.Hash(buffers_[i].get(), tensors_[i].bytes,
                                               key ^ Mix64(i + 1), stream));
    combined = Mix64(combined ^ h);
  }
  return combined;
}

absl::StatusOr<std::string> TensorSet::DownloadOutput(size_t output_ordinal,
                                                      cudaStream_t stream) const {
  size_t seen = 0;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (!tensors_[i].output) continue;
    if (seen++ != output_ordinal) continue;
    std::string host(tensors_[i].bytes, '\0');
    PTXBENCH_CUDA_TRY(cudaMemcpyAsync(host.data(), buffers_[i].get(), tensors_[i].bytes,
                                      cudaMemcpyDeviceToHost, stream));
    PTXBENCH_CUDA_TRY(cudaStreamSynchronize(stream));
    return host;
  }
  return absl::OutOfRangeError(absl::StrCat("no output #", output_ordinal));
}

absl::Status TensorSet::UploadInputsFromHost(uint64_t seed, cudaStream_t stream) {
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const WorkloadTensor& t = tensors_[i];
    if (t.output) continue;
    std::vector<unsigned char> host(t.bytes);
    HostGenerate(host.data(), t.elements, static_cast<int>(t.dtype), t.distribution, seed,
                 static_cast<uint32_t>(t.task_index), /*threads=*/0, t.index_args);
    PTXBENCH_CUDA_TRY(
        cudaMemcpyAsync(buffers_[i].get(), host.data(), t.bytes, cudaMemcpyHostToDevice, stream));
    PTXBENCH_CUDA_TRY(cudaStreamSynchronize(stream));
  }
  return absl::OkStatus();
}

absl::Status TensorSet::PoisonOutputsByCopy(cudaStream_t stream) {
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (!tensors_[i].output) continue;
    uint32_t pattern = PoisonPattern(tensors_[i].dtype);
    std::vector<unsigned char> host(tensors_[i].bytes);
    for (size_t b = 0; b < host.size(); ++b)
      host[b] = static_cast<unsigned char>(pattern >> (8 * (b % 4)));
    PTXBENCH_CUDA_TRY(cudaMemcpyAsync(buffers_[i].get(), host.data(), host.size(),
                                      cudaMemcpyHostToDevice, stream));
    PTXBENCH_CUDA_TRY(cudaStreamSynchronize(stream));
  }
  return absl::OkStatus();
}

absl::Status TensorSet::ZeroAll(cudaStream_t stream) {
  for (size_t i = 0; i < tensors_.size(); ++i) {
    PTXBENCH_CUDA_TRY(cudaMemsetAsync(buffers_[i].get(), 0, tensors_[i].bytes, stream));
  }
  PTXBENCH_CUDA_TRY(cudaStreamSynchronize(stream));
  return absl::OkStatus();
}

std::vector<const void*> TensorSet::InputPointers() const {
  std::vector<const void*> out;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (!tensors_[i].output) out.push_back(buffers_[i].get());
  }
  return out;
}

std::vector<void*> TensorSet::OutputPointers() const {
  std::vector<void*> out;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (tensors_[i].output) out.push_back(buffers_[i].get());
  }
  return out;
}

std::vector<size_t> TensorSet::OutputTaskIndices() const {
  std::vector<size_t> out;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (tensors_[i].output) out.push_back(i);
  }
  return out;
}

absl::StatusOr<PlanLauncher> PlanLauncher::Create(const ResolvedPlan& plan,
                                                  const TensorSet& tensors) {
  ASSIGN_OR_RETURN(const DriverApi* api, Driver());
  PlanLauncher launcher;
  for (const ResolvedScratch& s : plan.scratch) {
    ASSIGN_OR_RETURN(DeviceBuffer b, DeviceBuffer::Allocate(static_cast<size_t>(s.bytes)));
    launcher.scratch_.push_back(std::move(b));
  }
  std::vector<CUtensorMap> maps(plan.tensor_maps.size());
  for (size_t m = 0; m < plan.tensor_maps.size(); ++m) {
    const ResolvedTensorMap& tm = plan.tensor_maps[m];
    if (tm.tensor_index < 0 || tm.tensor_index >= static_cast<int>(tensors.tensors().size())) {
      return absl::InvalidArgumentError(absl::StrCat("tensor map ", tm.name, ": bad tensor"));
    }
    std::vector<cuuint64_t> dims(tm.global_dims.begin(), tm.global_dims.end());
    std::vector<cuuint64_t> strides(tm.global_strides_bytes.begin(), tm.global_strides_bytes.end());
    std::vector<cuuint32_t> box(tm.box.begin(), tm.box.end());
    std::vector<cuuint32_t> element_strides(tm.element_strides.begin(), tm.element_strides.end());
    CUresult r = api->TensorMapEncodeTiled(
        &maps[m], static_cast<CUtensorMapDataType>(tm.data_type), static_cast<cuuint32_t>(tm.rank),
        tensors.pointer(tm.tensor_index), dims.data(), strides.data(), box.data(),
        element_strides.data(), static_cast<CUtensorMapInterleave>(tm.interleave),
        static_cast<CUtensorMapSwizzle>(tm.swizzle),
        static_cast<CUtensorMapL2promotion>(tm.l2_promotion),
        static_cast<CUtensorMapFloatOOBfill>(tm.oob_fill));
    if (r != CUDA_SUCCESS) {
      const char* name = "?";
      api->GetErrorName(r, &name);
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor_maps '", tm.name, "': cuTensorMapEncodeTiled refused it (", name,
          "): check box sizes, strides (16-byte multiples), swizzle span and alignment"));
    }
  }
  for (const ResolvedLaunch& l : plan.launches) {
    Prepared p;
    p.kernel = l.kernel;
    for (int d = 0; d < 3; ++d) {
      p.grid[d] = l.grid[d];
      p.block[d] = l.block[d];
      p.cluster[d] = l.cluster[d];
    }
    p.has_cluster = l.has_cluster;
    p.dynamic_shared_bytes = static_cast<unsigned>(l.dynamic_shared_bytes);
    p.slots.resize(l.args.size());
    for (size_t a = 0; a < l.args.size(); ++a) {
      const ResolvedArgument& arg = l.args[a];
      unsigned char* slot = p.slots[a].bytes;
      std::memset(slot, 0, sizeof(ArgSlot));
      switch (arg.kind) {
        case PlanArgument::Kind::kTensor: {
          void* ptr = tensors.pointer(arg.index);
          std::memcpy(slot, &ptr, sizeof ptr);
          break;
        }
        case PlanArgument::Kind::kScratch: {
          void* ptr = launcher.scratch_.at(arg.index).get();
          std::memcpy(slot, &ptr, sizeof ptr);
          break;
        }
        case PlanArgument::Kind::kScalar: {
          if (arg.scalar_is_integer) {
            if (arg.size_bytes == 4) {
              int32_t v = static_cast<int32_t>(arg.int_value);
              std::memcpy(slot, &v, 4);
            } else {
              int64_t v = arg.int_value;
              std::memcpy(slot, &v, 8);
            }
          } else if (arg.size_bytes == 4) {
            float v = static_cast<float>(arg.real_value);
            std::memcpy(slot, &v, 4);
          } else {
            double v = arg.real_value;
            std::memcpy(slot, &v, 8);
          }
          break;
        }
        case PlanArgument::Kind::kTensorMap:
          std::memcpy(slot, &maps.at(arg.index), sizeof(CUtensorMap));
          break;
      }
    }
    launcher.launches_.push_back(std::move(p));
  }
  for (Prepared& p : launcher.launches_) {
    p.params.clear();
    for (ArgSlot& s : p.slots) p.params.push_back(s.bytes);
  }
  return launcher;
}

absl::Status PlanLauncher::Bind(const Module& module) {
  ASSIGN_OR_RETURN(const DriverApi* api, Driver());
  for (Prepared& p : launches_) {
    auto f = module.Function(p.kernel);
    if (!f.ok()) return absl::InvalidArgumentError(std::string(f.status().message()));
    p.function = *f;
    if (p.dynamic_shared_bytes > 0) {
      CUresult r =
          api->FuncSetAttribute(p.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                static_cast<int>(p.dynamic_shared_bytes));
      if (r != CUDA_SUCCESS) {
        return absl::InvalidArgumentError(
            absl::StrCat("kernel ", p.kernel, ": ", p.dynamic_shared_bytes,
                         " bytes of dynamic shared memory refused by the driver"));
      }
    }
    if (p.has_cluster && p.cluster[0] * p.cluster[1] * p.cluster[2] > 8) {
      api->FuncSetAttribute(p.function, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1);
    }
  }
  return absl::OkStatus();
}

absl::Status PlanLauncher::ZeroScratch(cudaStream_t stream) {
  for (DeviceBuffer& b : scratch_) {
    PTXBENCH_CUDA_TRY(cudaMemsetAsync(b.get(), 0, b.bytes(), stream));
  }
  return absl::OkStatus();
}

absl::Status PlanLauncher::ZeroScratchByCopy(cudaStream_t stream) {
  for (DeviceBuffer& b : scratch_) {
    std::vector<unsigned char> zeros(b.bytes(), 0);
    PTXBENCH_CUDA_TRY(
        cudaMemcpyAsync(b.get(), zeros.data(), zeros.size(), cudaMemcpyHostToDevice, stream));
    PTXBENCH_CUDA_TRY(cudaStreamSynchronize(stream));
  }
  return absl::OkStatus();
}

absl::Status PlanLauncher::Launch(cudaStream_t stream, size_t begin, size_t end) {
  ASSIGN_OR_RETURN(const DriverApi* api, Driver());
  for (size_t i = begin; i < end && i < launches_.size(); ++i) {
    Prepared& p = launches_[i];
    if (p.function == nullptr) return absl::FailedPreconditionError("plan not bound to a module");
    CUlaunchConfig config{};
    config.gridDimX = p.grid[0];
    config.gridDimY = p.grid[1];
    config.gridDimZ = p.grid[2];
    config.blockDimX = p.block[0];
    config.blockDimY = p.block[1];
    config.blockDimZ = p.block[2];
    config.sharedMemBytes = p.dynamic_shared_bytes;
    config.hStream = reinterpret_cast<CUstream>(stream);
    CUlaunchAttribute attribute{};
    if (p.has_cluster) {
      attribute.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
      attribute.value.clusterDim.x = p.cluster[0];
      attribute.value.clusterDim.y = p.cluster[1];
      attribute.value.clusterDim.z = p.cluster[2];
      config.attrs = &attribute;
      config.numAttrs = 1;
    }
    CUresult r = api->LaunchKernelEx(&config, p.function, p.params.data(), nullptr);
    if (r != CUDA_SUCCESS) {
      const char* name = "?";
      const char* text = "?";
      api->GetErrorName(r, &name);
      api->GetErrorString(r, &text);
      std::string message =
          absl::StrCat("launch ", i, " (", p.kernel, ") refused: ", name, " (", text, ")");
      if (IsKernelFault(static_cast<int>(r))) return absl::AbortedError(message);
      return absl::FailedPreconditionError(message);
    }
  }
  return absl::OkStatus();
}

}  // namespace ptxbench::gpu
