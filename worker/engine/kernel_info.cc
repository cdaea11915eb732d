#include "worker/engine/kernel_info.h"

namespace ptxbench {

nlohmann::json ToJson(const KernelSignature& kernel) {
  nlohmann::json parameters = nlohmann::json::array();
  for (const KernelParameter& p : kernel.parameters) {
    parameters.push_back(
        {{"name", p.name}, {"size_bytes", p.size_bytes}, {"alignment", p.alignment}});
  }
  nlohmann::json json = {
      {"name", kernel.name},
      {"parameters", std::move(parameters)},
      {"max_threads", kernel.max_threads},
      {"required_threads", kernel.required_threads},
  };
  if (kernel.has_resources) {
    const KernelResources& r = kernel.resources;
    json["resources"] = {
        {"registers", r.registers},
        {"barriers", r.barriers},
        {"shared_bytes", r.shared_bytes},
        {"spill_store_bytes", r.spill_store_bytes},
        {"spill_load_bytes", r.spill_load_bytes},
        {"stack_frame_bytes", r.stack_frame_bytes},
        {"constant_bytes", r.constant_bytes},
    };
  }
  return json;
}

}  // namespace ptxbench
