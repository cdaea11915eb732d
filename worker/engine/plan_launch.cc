// One launch of a plan: its kernel, grid, block, cluster and shared memory.
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json_fields.h"
#include "worker/engine/plan_resolve.h"

namespace ptxbench::plan_resolve {
namespace {

std::string KernelNames(const std::vector<KernelSignature>& kernels) {
  if (kernels.empty()) return "the module has no kernels";
  return absl::StrCat("kernels in the module: ",
                      absl::StrJoin(kernels, ", ", [](std::string* out, const KernelSignature& k) {
                        out->append(k.name);
                      }));
}

}  // namespace

PlanOr<const KernelSignature*> ResolveKernel(const PlanLaunch& spec, const std::string& field,
                                             const std::vector<KernelSignature>& kernels) {
  for (const KernelSignature& kernel : kernels) {
    if (kernel.name == spec.kernel) return &kernel;
  }
  std::string hint;
  if (!kernels.empty() && kernels.front().name.rfind("_Z", 0) == 0) {
    hint = "; declare kernels extern \"C\" so that their names are not mangled";
  }
  return PlanError{FieldJoin(field, "kernel"), absl::StrCat("no kernel '", spec.kernel, "' (",
                                                            KernelNames(kernels), ")", hint)};
}

PlanOr<std::array<uint32_t, 3>> ResolveGrid(const PlanLaunch& spec, const std::string& field,
                                            const Resolver& resolver) {
  std::array<uint32_t, 3> grid = {1, 1, 1};
  for (size_t d = 0; d < spec.grid.size() && d < grid.size(); ++d) {
    PlanOr<int64_t> value = resolver.Eval(FieldIndex(FieldJoin(field, "grid"), d), spec.grid[d], 1,
                                          resolver.limits().max_grid_dims[d], "grid extent");
    if (!value.ok()) return value.error();
    grid[d] = static_cast<uint32_t>(value.value());
  }
  return grid;
}

PlanOr<std::array<uint32_t, 3>> ResolveBlock(const PlanLaunch& spec, const std::string& field,
                                             const Resolver& resolver,
                                             const KernelSignature& kernel) {
  const DeviceLimits& limits = resolver.limits();
  const std::string block_field = FieldJoin(field, "block");
  std::array<uint32_t, 3> block = {1, 1, 1};
  int64_t threads = 1;
  for (size_t d = 0; d < spec.block.size() && d < block.size(); ++d) {
    PlanOr<int64_t> value = resolver.Eval(FieldIndex(block_field, d), spec.block[d], 1,
                                          limits.max_block_dims[d], "block extent");
    if (!value.ok()) return value.error();
    block[d] = static_cast<uint32_t>(value.value());
    threads *= value.value();
  }
  if (threads > limits.max_threads_per_block) {
    return PlanError{block_field, absl::StrCat(threads, " threads per block exceed the limit of ",
                                               limits.max_threads_per_block, resolver.Where())};
  }
  const auto& max_threads = kernel.max_threads;
  const int64_t bound = max_threads[0] * max_threads[1] * max_threads[2];
  if (max_threads[0] > 0 && threads > bound) {
    return PlanError{block_field,
                     absl::StrCat(threads, " threads per block exceed kernel '", kernel.name,
                                  "''s launch bounds (.maxntid ", bound, ")", resolver.Where())};
  }
  const auto& required = kernel.required_threads;
  if (required[0] > 0 && (int64_t{block[0]} != required[0] || int64_t{block[1]} != required[1] ||
                          int64_t{block[2]} != required[2])) {
    return PlanError{
        block_field,
        absl::StrCat("kernel '", kernel.name, "' requires a block of exactly ", required[0], " x ",
                     required[1], " x ", required[2], " threads (.reqntid)")};
  }
  return block;
}

PlanOr<std::array<uint32_t, 3>> ResolveCluster(const PlanLaunch& spec, const std::string& field,
                                               const Resolver& resolver,
                                               const std::array<uint32_t, 3>& grid) {
  std::array<uint32_t, 3> cluster = {1, 1, 1};
  const DeviceLimits& limits = resolver.limits();
  const int64_t max_cluster = limits.allow_non_portable_cluster
                                  ? limits.max_non_portable_cluster_size
                                  : limits.max_cluster_size;
  int64_t size = 1;
  for (size_t d = 0; d < spec.cluster.size() && d < cluster.size(); ++d) {
    PlanOr<int64_t> value = resolver.Eval(FieldIndex(FieldJoin(field, "cluster"), d),
                                          spec.cluster[d], 1, max_cluster, "cluster extent");
    if (!value.ok()) return value.error();
    cluster[d] = static_cast<uint32_t>(value.value());
    size *= value.value();
  }
  if (size > max_cluster) {
    return PlanError{FieldJoin(field, "cluster"),
                     absl::StrCat("a cluster of ", size, " CTAs exceeds the limit of ", max_cluster,
                                  resolver.Where())};
  }
  for (size_t d = 0; d < cluster.size(); ++d) {
    if (grid[d] % cluster[d] != 0) {
      return PlanError{
          FieldIndex(FieldJoin(field, "grid"), d),
          absl::StrCat("grid extent ", grid[d], " is not a multiple of the cluster extent ",
                       cluster[d], resolver.Where())};
    }
  }
  return cluster;
}

PlanOr<int64_t> ResolveDynamicSharedBytes(const PlanLaunch& spec, const std::string& field,
                                          const Resolver& resolver, const KernelSignature& kernel) {
  const int64_t limit = resolver.limits().max_shared_bytes_per_block;
  const std::string shared_field = FieldJoin(field, "dynamic_shared_bytes");
  const std::string text = spec.dynamic_shared_bytes.empty() ? "0" : spec.dynamic_shared_bytes;
  PlanOr<int64_t> dynamic = resolver.Eval(shared_field, text, 0, limit, "dynamic shared memory");
  if (!dynamic.ok()) return dynamic.error();
  const int64_t static_shared = kernel.has_resources ? kernel.resources.shared_bytes : 0;
  if (dynamic.value() + static_shared > limit) {
    return PlanError{shared_field,
                     absl::StrCat(dynamic.value(), " dynamic + ", static_shared,
                                  " static bytes (kernel '", kernel.name, "') exceed the ", limit,
                                  "-byte limit per block", resolver.Where())};
  }
  return dynamic;
}

PlanOr<ResolvedLaunch> ResolveLaunch(const PlanLaunch& spec, const std::string& field,
                                     const Resolver& resolver, const LaunchPlan& plan,
                                     const ResolvedPlan& resolved,
                                     const std::vector<KernelSignature>& kernels) {
  PlanOr<const KernelSignature*> kernel = ResolveKernel(spec, field, kernels);
  if (!kernel.ok()) return kernel.error();
  const KernelSignature& signature = *kernel.value();
  ResolvedLaunch launch;
  launch.kernel = spec.kernel;
  PlanOr<std::array<uint32_t, 3>> grid = ResolveGrid(spec, field, resolver);
  if (!grid.ok()) return grid.error();
  launch.grid = grid.value();
  PlanOr<std::array<uint32_t, 3>> block = ResolveBlock(spec, field, resolver, signature);
  if (!block.ok()) return block.error();
  launch.block = block.value();
  if (!spec.cluster.empty()) {
    PlanOr<std::array<uint32_t, 3>> cluster = ResolveCluster(spec, field, resolver, launch.grid);
    if (!cluster.ok()) return cluster.error();
    launch.has_cluster = true;
    launch.cluster = cluster.value();
  }
  PlanOr<int64_t> shared = ResolveDynamicSharedBytes(spec, field, resolver, signature);
  if (!shared.ok()) return shared.error();
  launch.dynamic_shared_bytes = shared.value();
  PlanOr<std::vector<ResolvedArgument>> args =
      ResolveArguments(spec, field, resolver, plan, resolved, signature);
  if (!args.ok()) return args.error();
  launch.args = std::move(args).value();
  return launch;
}

}  // namespace ptxbench::plan_resolve
