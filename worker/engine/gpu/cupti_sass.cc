#include "worker/engine/gpu/cupti_sass.h"

#include <cupti.h>
#include <cupti_pcsampling.h>
#include <cupti_profiler_target.h>
#include <cupti_sass_metrics.h>
#include <cupti_target.h>

#include <cstdlib>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "worker/engine/gpu/cupti_status.h"
#include "worker/engine/gpu/runtime.h"

// CUPTI's documented idiom initializes its parameter structs as {STRUCT_SIZE}: the rest is
// value-initialized (zero), which is what CUPTI requires of unset fields.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace ptxbench::gpu {
namespace {

constexpr const char* kMetricNames[] = {
    "smsp__sass_inst_executed",
    "smsp__sass_thread_inst_executed_pred_on",
    "smsp__sass_inst_executed_op_shared_gmma",
    "smsp__sass_inst_executed_op_tma",
};

absl::StatusOr<CUcontext> CurrentContext() {
  ASSIGN_OR_RETURN(const DriverApi* api, Driver());
  CUcontext ctx = nullptr;
  if (api->CtxGetCurrent(&ctx) != CUDA_SUCCESS || ctx == nullptr) {
    return absl::FailedPreconditionError("no current CUDA context for CUPTI");
  }
  return ctx;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SassMetricsSession>> SassMetricsSession::Create(int device_ordinal) {
  std::unique_ptr<SassMetricsSession> s(new SassMetricsSession());
  PTXBENCH_CUPTI_TRY(cuptiGetVersion(&s->version_));
  CUpti_Profiler_Initialize_Params init = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
  PTXBENCH_CUPTI_TRY(cuptiProfilerInitialize(&init));
  CUpti_Profiler_DeviceSupported_Params supported = {
      CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE};
  supported.cuDevice = device_ordinal;
  supported.api = CUPTI_PROFILER_SASS_METRICS;
  PTXBENCH_CUPTI_TRY(cuptiProfilerDeviceSupported(&supported));
  if (supported.isSupported != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) {
    return absl::UnavailableError(
        absl::StrCat("CUPTI SASS metrics not supported on device ", device_ordinal,
                     " (architecture ", supported.architecture, ", vGPU ", supported.vGpu,
                     ", confidential compute ", supported.confidentialCompute, ")"));
  }
  CUpti_Device_GetChipName_Params chip = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};
  chip.deviceIndex = device_ordinal;
  PTXBENCH_CUPTI_TRY(cuptiDeviceGetChipName(&chip));
  s->chip_ = chip.pChipName;
  for (const char* name : kMetricNames) {
    CUpti_SassMetrics_GetProperties_Params props = {
        CUpti_SassMetrics_GetProperties_Params_STRUCT_SIZE};
    props.pChipName = chip.pChipName;
    props.pMetricName = name;
    PTXBENCH_CUPTI_TRY(cuptiSassMetricsGetProperties(&props));
    s->metrics_.push_back({props.metric.metricId, name});
  }
  s->device_ = device_ordinal;
  return s;
}

SassMetricsSession::~SassMetricsSession() {
  if (enabled_) {
    CUpti_SassMetricsDisable_Params p = {CUpti_SassMetricsDisable_Params_STRUCT_SIZE};
    cuptiSassMetricsDisable(&p);
  }
  if (configured_) {
    CUpti_SassMetricsUnsetConfig_Params p = {CUpti_SassMetricsUnsetConfig_Params_STRUCT_SIZE};
    p.deviceIndex = static_cast<uint32_t>(device_);
    cuptiSassMetricsUnsetConfig(&p);
  }
}

absl::Status SassMetricsSession::Enable() {
  if (enabled_) return absl::FailedPreconditionError("SASS metrics already enabled");
  if (configured_) {
    // A second SetConfig in one process failed with CUPTI_ERROR_OUT_OF_MEMORY on the H200.
    return absl::FailedPreconditionError("SASS metrics can be enabled once per process");
  }
  std::vector<CUpti_SassMetrics_Config> configs;
  for (const Metric& m : metrics_) {
    configs.push_back({m.id, CUPTI_SASS_METRICS_OUTPUT_GRANULARITY_GPU});
  }
  CUpti_SassMetricsSetConfig_Params set = {CUpti_SassMetricsSetConfig_Params_STRUCT_SIZE};
  set.numOfMetricConfig = configs.size();
  set.pConfigs = configs.data();
  set.deviceIndex = static_cast<uint32_t>(device_);
  PTXBENCH_CUPTI_TRY(cuptiSassMetricsSetConfig(&set));
  configured_ = true;
  ASSIGN_OR_RETURN(CUcontext ctx, CurrentContext());
  CUpti_SassMetricsEnable_Params p = {CUpti_SassMetricsEnable_Params_STRUCT_SIZE};
  p.ctx = ctx;
  p.enableLazyPatching = 1;
  PTXBENCH_CUPTI_TRY(cuptiSassMetricsEnable(&p));
  enabled_ = true;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<SassPcCounts>> SassMetricsSession::FlushAndDisable() {
  if (!enabled_) return absl::FailedPreconditionError("SASS metrics not enabled");
  ASSIGN_OR_RETURN(CUcontext ctx, CurrentContext());
  CUpti_SassMetricsGetDataProperties_Params props = {
      CUpti_SassMetricsGetDataProperties_Params_STRUCT_SIZE};
  props.ctx = ctx;
  PTXBENCH_CUPTI_TRY(cuptiSassMetricsGetDataProperties(&props));
  std::map<std::tuple<uint64_t, std::string, uint32_t>, SassPcCounts> by_pc;
  if (props.numOfPatchedInstructionRecords > 0 && props.numOfInstances > 0) {
    std::vector<CUpti_SassMetrics_Data> data(props.numOfPatchedInstructionRecords);
    std::vector<CUpti_SassMetrics_InstanceValue> values(props.numOfPatchedInstructionRecords *
                                                        props.numOfInstances);
    for (size_t i = 0; i < data.size(); ++i) {
      data[i].structSize = sizeof(CUpti_SassMetrics_Data);
      data[i].pInstanceValues = &values[i * props.numOfInstances];
    }
    CUpti_SassMetricsFlushData_Params flush = {CUpti_SassMetricsFlushData_Params_STRUCT_SIZE};
    flush.ctx = ctx;
    flush.numOfPatchedInstructionRecords = props.numOfPatchedInstructionRecords;
    flush.numOfInstances = props.numOfInstances;
    flush.pMetricsData = data.data();
    PTXBENCH_CUPTI_TRY(cuptiSassMetricsFlushData(&flush));
    for (const CUpti_SassMetrics_Data& d : data) {
      std::string function = d.functionName ? d.functionName : "";
      SassPcCounts& c = by_pc[{d.cubinCrc, function, d.pcOffset}];
      c.function = function;
      c.cubin_crc = d.cubinCrc;
      c.function_index = d.functionIndex;
      c.pc_offset = d.pcOffset;
      for (size_t k = 0; k < props.numOfInstances; ++k) {
        const CUpti_SassMetrics_InstanceValue& v = d.pInstanceValues[k];
        for (const Metric& m : metrics_) {
          if (m.id != v.metricId) continue;
          if (m.name == kMetricNames[0]) c.warp_inst_executed += v.value;
          if (m.name == kMetricNames[1]) c.thread_inst_pred_on += v.value;
          if (m.name == kMetricNames[2]) c.gmma_warp_inst_executed += v.value;
          if (m.name == kMetricNames[3]) c.tma_warp_inst_executed += v.value;
        }
      }
      // CUPTI allocates functionName with malloc (its sample frees it).
      std::free(const_cast<char*>(d.functionName));
    }
  }
  CUpti_SassMetricsDisable_Params disable = {CUpti_SassMetricsDisable_Params_STRUCT_SIZE};
  disable.ctx = ctx;
  PTXBENCH_CUPTI_TRY(cuptiSassMetricsDisable(&disable));
  enabled_ = false;
  std::vector<SassPcCounts> out;
  out.reserve(by_pc.size());
  for (auto& [key, counts] : by_pc) out.push_back(std::move(counts));
  return out;
}

absl::StatusOr<uint64_t> SassMetricsSession::CubinCrc(const std::string& cubin) {
  CUpti_GetCubinCrcParams p = {CUpti_GetCubinCrcParamsSize};
  p.cubin = cubin.data();
  p.cubinSize = cubin.size();
  PTXBENCH_CUPTI_TRY(cuptiGetCubinCrc(&p));
  return p.cubinCrc;
}

absl::StatusOr<SourceLine> SassMetricsSession::Correlate(const std::string& cubin,
                                                         const std::string& function,
                                                         uint32_t pc_offset) {
  CUpti_GetSassToSourceCorrelationParams p = {CUpti_GetSassToSourceCorrelationParamsSize};
  p.cubin = cubin.data();
  p.cubinSize = cubin.size();
  p.functionName = function.c_str();
  p.pcOffset = pc_offset;
  PTXBENCH_CUPTI_TRY(cuptiGetSassToSourceCorrelation(&p));
  SourceLine line;
  line.line = p.lineNumber;
  if (p.fileName) line.file = p.fileName;
  if (p.dirName) line.dir = p.dirName;
  std::free(p.fileName);
  std::free(p.dirName);
  return line;
}

}  // namespace ptxbench::gpu
