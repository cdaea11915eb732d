#include "worker/engine/plan.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <string>

#include "tests/worker/engine/engine_test_support.h"

namespace ptxbench {
namespace {

// The GEMM task as the tests see it: the real task definition.
const Task& Gemm() {
  static const Task* const kTask = [] {
    auto task = LoadTask(SourceDir() + "/tasks/gemm_n7168_k5120");
    if (!task.ok()) FAIL("cannot load the GEMM task: " << task.status().ToString());
    return new Task(*std::move(task));
  }();
  return *kTask;
}

const Workload& Workload(const std::string& name) {
  for (const auto& w : Gemm().workloads) {
    if (w.name == name) return w;
  }
  FAIL("no workload " << name);
  return Gemm().workloads.front();
}

KernelParameter Param(const std::string& name, int64_t size, int64_t alignment) {
  return KernelParameter{name, size, alignment};
}

// What the compile stage reports for `gemm(CUtensorMap a, CUtensorMap b, bf16* c, int M, int N,
// int K)` with 4 KiB of static shared memory.
std::vector<KernelSignature> GemmKernels() {
  KernelSignature kernel;
  kernel.name = "gemm";
  kernel.parameters = {Param("gemm_param_0", 128, 64), Param("gemm_param_1", 128, 64),
                       Param("gemm_param_2", 8, 8),    Param("gemm_param_3", 4, 4),
                       Param("gemm_param_4", 4, 4),    Param("gemm_param_5", 4, 4)};
  kernel.has_resources = true;
  kernel.resources.shared_bytes = 4096;
  kernel.resources.registers = 168;
  KernelSignature fma;
  fma.name = "fma";
  fma.parameters = {Param("fma_param_0", 8, 8), Param("fma_param_1", 8, 8),
                    Param("fma_param_2", 8, 8), Param("fma_param_3", 8, 8)};
  fma.max_threads = {256, 1, 1};
  return {kernel, fma};
}

constexpr char kGoodPlan[] = R"json({
  "launches": [{
    "kernel": "gemm",
    "grid": ["ceil_div(N, 128)", "ceil_div(M, 128)"],
    "block": [384],
    "dynamic_shared_bytes": "4 * (128*64 + 128*64) * 2 + 1024",
    "args": [{"tensor_map": "a_tiles"}, {"tensor_map": "b_tiles"}, {"tensor": "C"},
             {"scalar": "M"}, {"scalar": "N"}, {"scalar": "K"}]
}],
  "tensor_maps": [
    {"name": "a_tiles", "tensor": "A", "box": [64, 128], "swizzle": "128B", "l2_promotion": "256B"},
    {"name": "b_tiles", "tensor": "B", "box": ["64", "128"], "swizzle": "128B"}
  ]
})json";

LaunchPlan Parse(const std::string& text) {
  PlanOr<LaunchPlan> plan = ParseLaunchPlanJson(text);
  INFO(text);
  if (!plan.ok()) FAIL(plan.error().ToString());
  return plan.value();
}

std::string ParseError(const std::string& text) {
  PlanOr<LaunchPlan> plan = ParseLaunchPlanJson(text);
  REQUIRE_FALSE(plan.ok());
  return plan.error().ToString();
}

// Validates `plan` for the timed workload and returns the error ("" when valid).
std::string ValidationError(const LaunchPlan& plan, const std::string& workload = "timed",
                            const std::vector<KernelSignature>& kernels = GemmKernels()) {
  PlanOr<ResolvedPlan> resolved =
      ValidatePlan(plan, Gemm(), Workload(workload), DeviceLimits{}, kernels);
  return resolved.ok() ? "" : resolved.error().ToString();
}

// The first error of `text`, whether the plan alone refuses it (common/launch_plan.h) or its
// resolution for the timed workload does ("" when valid).
std::string PlanErrorOf(const std::string& text) {
  PlanOr<LaunchPlan> plan = ParseLaunchPlanJson(text);
  if (!plan.ok()) return plan.error().ToString();
  return ValidationError(plan.value());
}

TEST_CASE("A GEMM plan with TMA maps resolves to numbers") {
  const LaunchPlan plan = Parse(kGoodPlan);
  PlanOr<ResolvedPlan> resolved =
      ValidatePlan(plan, Gemm(), Workload("timed"), DeviceLimits{}, GemmKernels());
  if (!resolved.ok()) FAIL(resolved.error().ToString());
  const ResolvedPlan& r = resolved.value();
  CHECK(r.workload == "timed");
  REQUIRE(r.launches.size() == 1);
  const ResolvedLaunch& launch = r.launches[0];
  CHECK(launch.grid == std::array<uint32_t, 3>{56, 64, 1});
  CHECK(launch.block == std::array<uint32_t, 3>{384, 1, 1});
  CHECK_FALSE(launch.has_cluster);
  CHECK(launch.dynamic_shared_bytes == 132096);
  REQUIRE(launch.args.size() == 6);
  CHECK(launch.args[0].kind == PlanArgument::Kind::kTensorMap);
  CHECK(launch.args[0].index == 0);
  CHECK(launch.args[0].size_bytes == 128);
  CHECK(launch.args[2].kind == PlanArgument::Kind::kTensor);
  CHECK(launch.args[2].index == 2);  // C is the task's third tensor.
  CHECK(launch.args[2].size_bytes == 8);
  CHECK(launch.args[5].scalar_is_integer);
  CHECK(launch.args[5].int_value == 5120);
  CHECK(launch.args[5].size_bytes == 4);

  REQUIRE(r.tensor_maps.size() == 2);
  const ResolvedTensorMap& a = r.tensor_maps[0];
  CHECK(a.tensor == "A");
  CHECK(a.data_type == TensorMapDataType::kBfloat16);
  CHECK(a.rank == 2);
  CHECK(a.global_dims == std::vector<uint64_t>{5120, 8192});      // [K, M], innermost first.
  CHECK(a.global_strides_bytes == std::vector<uint64_t>{10240});  // One row of K bf16 values.
  CHECK(a.box == std::vector<uint32_t>{64, 128});
  CHECK(a.element_strides == std::vector<uint32_t>{1, 1});
  CHECK(a.swizzle == TensorMapSwizzle::k128B);
  CHECK(a.l2_promotion == TensorMapL2Promotion::k256B);
  CHECK(a.interleave == TensorMapInterleave::kNone);
  CHECK(a.oob_fill == TensorMapOobFill::kZero);
  CHECK(r.tensor_maps[1].global_dims == std::vector<uint64_t>{5120, 7168});

  // The same plan for a ragged workload.
  PlanOr<ResolvedPlan> ragged =
      ValidatePlan(plan, Gemm(), Workload("ragged_m"), DeviceLimits{}, GemmKernels());
  REQUIRE(ragged.ok());
  CHECK(ragged.value().launches[0].grid == std::array<uint32_t, 3>{56, 3, 1});

  const nlohmann::json json = ToJson(r);
  CHECK(json["launches"][0]["grid"] == nlohmann::json{56, 64, 1});
  CHECK(json["tensor_maps"][0]["swizzle"] == 3);
}

TEST_CASE("Plans round-trip through JSON") {
  const LaunchPlan plan = Parse(kGoodPlan);
  const nlohmann::json json = ToJson(plan);
  PlanOr<LaunchPlan> again = LaunchPlanFromJson(json);
  REQUIRE(again.ok());
  CHECK(ToJson(again.value()) == json);
  CHECK(json["launches"][0]["block"] == nlohmann::json{"384"});  // Integers become expressions.
}

TEST_CASE("Malformed plan JSON is refused with the field path") {
  CHECK(ParseError("[]") == "a launch plan is a JSON object");
  CHECK(ParseError("{}") == "launches: missing");
  CHECK(ParseError(R"json({"launches": []})json") ==
        "launches: has 0 entries; 1 to 16 are allowed");
  CHECK(
      ParseError(
          R"json({"launches": [{"kernel": "k", "grid": [1], "block": [1]}], "scratches": []})json") ==
      "scratches: unknown key (allowed: launches, scratch, tensor_maps)");
  CHECK(ParseError(R"json({"launches": [{"kernel": "k", "grids": [1], "block": [1]}]})json") ==
        "launches[0].grids: unknown key (allowed: args, block, cluster, dynamic_shared_bytes, "
        "grid, kernel)");
  CHECK(ParseError(R"json({"launches": [{"grid": [1], "block": [1]}]})json") ==
        "launches[0].kernel: missing");
  CHECK(ParseError(R"json({"launches": [{"kernel": "k", "grid": [], "block": [1]}]})json") ==
        "launches[0].grid: has 0 entries; 1 to 3 are allowed");
  CHECK(ParseError(R"json({"launches": [{"kernel": "k", "grid": [1,1,1,1], "block": [1]}]})json") ==
        "launches[0].grid: has 4 entries; 1 to 3 are allowed");
  CHECK(ParseError(R"json({"launches": [{"kernel": "k", "grid": [1.5], "block": [1]}]})json") ==
        "launches[0].grid[0]: expected an expression (a string such as \"ceil_div(M, 128)\") or an "
        "integer");
  CHECK(
      ParseError(
          R"json({"launches": [{"kernel": "k", "grid": [1], "block": [1], "args": [{}]}]})json") ==
      "launches[0].args[0]: an argument is an object with exactly one key: tensor, scratch, "
      "scalar or "
      "tensor_map");
  CHECK(ParseError(R"json({"launches": [{"kernel": "k", "grid": [1], "block": [1],
                        "args": [{"tensor": "A", "scalar": "M"}]}]})json") ==
        "launches[0].args[0]: an argument is an object with exactly one key: tensor, scratch, "
        "scalar or "
        "tensor_map");
  CHECK(
      ParseError(
          R"json({"launches": [{"kernel": "k", "grid": [1], "block": [1], "args": [{"pointer": "A"}]}]})json") ==
      "launches[0].args[0].pointer: unknown argument kind; an argument is an object with exactly "
      "one key: "
      "tensor, scratch, scalar or tensor_map");
  CHECK(
      ParseError(
          R"json({"launches": [{"kernel": "k", "grid": [1], "block": [1], "args": [{"tensor": 3}]}]})json") ==
      "launches[0].args[0].tensor: expected a name (a string)");
  CHECK(
      ParseError(
          R"json({"launches": [{"kernel": "k", "grid": [1], "block": [1]}], "scratch": [{"name": "w"}]})json") ==
      "scratch[0].bytes: missing");
  CHECK(ParseError(R"json({"launches": [{"kernel": "k", "grid": [1], "block": [1]}],
                       "tensor_maps": [{"name": "m", "tensor": "A", "box": [64], "swizle": "128B"}]})json") ==
        "tensor_maps[0].swizle: unknown key (allowed: box, dims, element_strides, interleave, "
        "l2_promotion, name, "
        "oob_fill, swizzle, tensor)");
  CHECK(ParseError(R"json({"launches": [{"kernel": "k", "grid": [1], "block": [1]}],
                       "tensor_maps": [{"name": "m", "tensor": "A"}]})json") ==
        "tensor_maps[0].box: missing");
  CHECK(ParseError("{\"launches\": [") ==
        "not valid JSON at line 1 (byte 13): syntax error while parsing value - unexpected end of "
        "input; expected '[', '{', or a literal");
}

TEST_CASE("Validation names the field, the problem and the workload") {
  auto replaced = [](const std::string& from, const std::string& to) {
    std::string text = kGoodPlan;
    const size_t at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), to);
    return text;
  };
  auto with = [&](const std::string& from, const std::string& to) {
    return Parse(replaced(from, to));
  };
  CHECK(ValidationError(Parse(kGoodPlan)).empty());
  CHECK(ValidationError(with("\"ceil_div(M, 128)\"", "\"N/0\"")) ==
        "launches[0].grid[1]: division by zero in 'N/0' at position 2 (workload 'timed')");
  CHECK(
      ValidationError(with("\"ceil_div(M, 128)\"", "\"ceil_div(Q, 128)\"")) ==
      "launches[0].grid[1]: unknown name 'Q' (known: K, M, N) in 'ceil_div(Q, 128)' at position 10 "
      "(workload 'timed')");
  // A syntax error is the plan's own: no workload is needed to see it.
  CHECK(ParseError(replaced("\"ceil_div(M, 128)\"", "\"ceil_div(M,\"")) ==
        "launches[0].grid[1]: syntax error: expected a number, a name or '(' at the end in "
        "'ceil_div(M,' at position 12");
  CHECK(
      ValidationError(with("\"ceil_div(M, 128)\"", "\"M - 8192\"")) ==
      "launches[0].grid[1]: grid extent 0 ('M - 8192') is below the minimum 1 (workload 'timed')");
  CHECK(ValidationError(with("\"ceil_div(M, 128)\"", "\"M * 16\"")) ==
        "launches[0].grid[1]: grid extent 131072 ('M * 16') exceeds the limit 65535 (workload "
        "'timed')");
  CHECK(
      ValidationError(with("[384]", "[2048]")) ==
      "launches[0].block[0]: block extent 2048 ('2048') exceeds the limit 1024 (workload 'timed')");
  CHECK(ValidationError(with("[384]", "[384, 4]")) ==
        "launches[0].block: 1536 threads per block exceed the limit of 1024 (workload 'timed')");
  CHECK(ValidationError(with("\"kernel\": \"gemm\"", "\"kernel\": \"gemm_kernel\"")) ==
        "launches[0].kernel: no kernel 'gemm_kernel' (kernels in the module: gemm, fma)");
  CHECK(ValidationError(with("{\"tensor\": \"C\"}", "{\"tensor\": \"D\"}")) ==
        "launches[0].args[2].tensor: unknown tensor 'D' (tensors: A, B, C)");
  CHECK(ValidationError(with("{\"tensor_map\": \"b_tiles\"}", "{\"tensor_map\": \"b\"}")) ==
        "launches[0].args[1].tensor_map: unknown tensor map 'b' (tensor maps: a_tiles, b_tiles)");
  CHECK(ValidationError(with("{\"scalar\": \"K\"}", "{\"scalar\": \"L\"}")) ==
        "launches[0].args[5].scalar: unknown scalar 'L' (axes and scalars: M, N, K)");
  CHECK(ValidationError(with("{\"tensor\": \"C\"}", "{\"scratch\": \"C\"}")) ==
        "launches[0].args[2].scratch: unknown scratch buffer 'C' (the plan declares no scratch "
        "buffers)");
  CHECK(ValidationError(with(", {\"scalar\": \"K\"}", "")) ==
        "launches[0].args: 5 arguments for kernel 'gemm', which takes 6 parameters");
  CHECK(ValidationError(with("{\"scalar\": \"M\"}", "{\"tensor\": \"C\"}")) ==
        "launches[0].args[3]: kernel 'gemm' parameter 3 ('gemm_param_3') is 4 bytes; a tensor is "
        "passed as an "
        "8-byte device pointer");
  CHECK(ValidationError(with("{\"tensor_map\": \"a_tiles\"}", "{\"tensor\": \"A\"}")) ==
        "launches[0].args[0]: kernel 'gemm' parameter 0 ('gemm_param_0') is 128 bytes; a tensor is "
        "passed as an "
        "8-byte device pointer");
  CHECK(ValidationError(with("{\"scalar\": \"M\"}", "{\"tensor_map\": \"a_tiles\"}")) ==
        "launches[0].args[3]: kernel 'gemm' parameter 3 ('gemm_param_3') is 4 bytes; a tensor map "
        "is passed by "
        "value as 128 bytes (declare the parameter 'const __grid_constant__ CUtensorMap')");
  CHECK(ValidationError(with("\"4 * (128*64 + 128*64) * 2 + 1024\"", "\"227 * 1024\"")) ==
        "launches[0].dynamic_shared_bytes: 232448 dynamic + 4096 static bytes (kernel 'gemm') "
        "exceed the "
        "232448-byte limit per block (workload 'timed')");
  CHECK(ValidationError(with("\"4 * (128*64 + 128*64) * 2 + 1024\"", "\"300000\"")) ==
        "launches[0].dynamic_shared_bytes: dynamic shared memory 300000 ('300000') exceeds the "
        "limit 232448 "
        "(workload 'timed')");
  CHECK(ValidationError(with("\"block\": [384],", "\"block\": [384], \"cluster\": [2, 1],")) == "");
  CHECK(ValidationError(with("\"block\": [384],", "\"block\": [384], \"cluster\": [16],")) ==
        "launches[0].cluster[0]: cluster extent 16 ('16') exceeds the limit 8 (workload 'timed')");
  CHECK(ValidationError(with("\"block\": [384],", "\"block\": [384], \"cluster\": [3],")) ==
        "launches[0].grid[0]: grid extent 56 is not a multiple of the cluster extent 3 (workload "
        "'timed')");
  CHECK(ValidationError(with("\"block\": [384],", "\"block\": [384], \"cluster\": [4, 4],")) ==
        "launches[0].cluster: a cluster of 16 CTAs exceeds the limit of 8 (workload 'timed')");
}

TEST_CASE("Tensor maps follow cuTensorMapEncodeTiled's rules") {
  auto map_error = [](const std::string& map) {
    const std::string text =
        std::string(R"json({"launches": [{"kernel": "gemm", "grid": [1], "block": [128],
        "args": [{"tensor_map": "m"}, {"tensor_map": "m"}, {"tensor": "C"}, {"scalar": "M"},
                 {"scalar": "N"}, {"scalar": "K"}]}], "tensor_maps": [)json") +
        map + "]}";
    return PlanErrorOf(text);
  };
  CHECK(map_error(R"json({"name": "m", "tensor": "A", "box": [64, 128], "swizzle": "128B"})json")
            .empty());
  CHECK(map_error(R"json({"name": "m", "tensor": "D", "box": [64, 128]})json") ==
        "tensor_maps[0].tensor: unknown tensor 'D' (tensors: A, B, C)");
  CHECK(map_error(R"json({"name": "m", "tensor": "A", "box": [64]})json") ==
        "tensor_maps[0].box: has 1 entries for a rank-2 tensor map (innermost first)");
  CHECK(map_error(R"json({"name": "m", "tensor": "A", "box": [512, 1]})json") ==
        "tensor_maps[0].box[0]: box extent 512 ('512') exceeds the limit 256 (workload 'timed')");
  CHECK(map_error(R"json({"name": "m", "tensor": "A", "box": [0, 1]})json") ==
        "tensor_maps[0].box[0]: box extent 0 ('0') is below the minimum 1 (workload 'timed')");
  CHECK(map_error(R"json({"name": "m", "tensor": "A", "box": [12, 128]})json") ==
        "tensor_maps[0].box[0]: the inner box is 24 bytes (12 x 2-byte bf16); it must be a "
        "multiple of 16 "
        "bytes (workload 'timed')");
  CHECK(map_error(R"json({"name": "m", "tensor": "A", "box": [128, 64], "swizzle": "128B"})json") ==
        "tensor_maps[0].box[0]: the inner box is 256 bytes, more than the 128-byte span of swizzle "
        "\"128B\" "
        "(workload 'timed')");
  CHECK(map_error(R"json({"name": "m", "tensor": "A", "box": [32, 64], "swizzle": "32B"})json") ==
        "tensor_maps[0].box[0]: the inner box is 64 bytes, more than the 32-byte span of swizzle "
        "\"32B\" "
        "(workload 'timed')");
  CHECK(map_error(R"json({"name": "m", "tensor": "A", "box": [64, 128], "swizzle": "256B"})json") ==
        "tensor_maps[0].swizzle: '256B' is not one of \"none\", \"32B\", \"64B\", \"128B\"");
  CHECK(
      map_error(R"json({"name": "m", "tensor": "A", "box": [64, 128], "interleave": "16B"})json") ==
      "tensor_maps[0].interleave: interleaved tensor maps need rank 3 or more; this one has rank "
      "2");
  CHECK(
      map_error(
          R"json({"name": "m", "tensor": "A", "box": [64, 128], "element_strides": [1, 9]})json") ==
      "tensor_maps[0].element_strides[1]: element stride 9 ('9') exceeds the limit 8 (workload "
      "'timed')");
  CHECK(map_error(
            R"json({"name": "m", "tensor": "A", "box": [64, 128], "element_strides": [1]})json") ==
        "tensor_maps[0].element_strides: has 1 entries for a rank-2 tensor map");
  CHECK(map_error(R"json({"name": "m", "tensor": "A", "box": [64, 128], "oob_fill": "inf"})json") ==
        "tensor_maps[0].oob_fill: 'inf' is not one of \"zero\", \"nan\"");
  // Reshaping: [K, M] viewed as [64, K/64, M] is fine; a wrong product is not.
  CHECK(
      map_error(
          R"json({"name": "m", "tensor": "A", "box": [64, 1, 128], "dims": [64, "K/64", "M"]})json")
          .empty());
  CHECK(
      map_error(R"json({"name": "m", "tensor": "A", "box": [64, 128], "dims": ["K", "N"]})json") ==
      "tensor_maps[0].dims: the extents multiply to 36700160 elements but tensor 'A' has 41943040 "
      "(workload 'timed')");
  // A row of 4 bf16 values is 8 bytes: not a legal TMA stride.
  CHECK(map_error(R"json({"name": "m", "tensor": "A", "box": [8, 1], "dims": [4, "M*K/4"]})json") ==
        "tensor_maps[0].dims: the stride of dimension 1 is 8 bytes; TMA needs a multiple of 16 "
        "(workload "
        "'timed')");
  CHECK(
      map_error(
          R"json({"name": "m", "tensor": "A", "box": [64, 128]}, {"name": "m", "tensor": "B", "box": [64, 128]})json") ==
      "tensor_maps[1].name: duplicate tensor map 'm'");
}

TEST_CASE("Scratch buffers are capped by the task") {
  auto scratch_error = [](const std::string& scratch) {
    const std::string text =
        std::string(R"json({"launches": [{"kernel": "fma", "grid": [1], "block": [256],
        "args": [{"tensor": "A"}, {"tensor": "B"}, {"tensor": "C"}, {"scratch": "w"}]}], "scratch": [)json") +
        scratch + "]}";
    return PlanErrorOf(text);
  };
  CHECK(scratch_error(R"json({"name": "w", "bytes": "4 * M * N"})json").empty());
  CHECK(scratch_error(R"json({"name": "w", "bytes": 300000000})json") ==
        "scratch[0].bytes: 300000000 exceeds the task's scratch cap 268435456 (workload 'timed')");
  CHECK(
      scratch_error(
          R"json({"name": "w", "bytes": "M * N * 4"}, {"name": "v", "bytes": "M * N * 2"})json") ==
      "scratch: the buffers total 352321536 bytes, more than the task's scratch cap 268435456 "
      "(workload "
      "'timed')");
  CHECK(scratch_error(R"json({"name": "w", "bytes": 0})json") ==
        "scratch[0].bytes: 0 is not a positive size (workload 'timed')");
  CHECK(scratch_error(R"json({"name": "A", "bytes": 16})json") ==
        "scratch[0].name: 'A' is already a task tensor");
  CHECK(scratch_error(R"json({"name": "w", "bytes": 16}, {"name": "w", "bytes": 16})json") ==
        "scratch[1].name: duplicate scratch buffer 'w'");
  CHECK(scratch_error(R"json({"name": "w-1", "bytes": 16})json") ==
        "scratch[0].name: 'w-1' is not an identifier");
  // Tensor maps describe task tensors only.
  const std::string over_scratch =
      R"json({"launches": [{"kernel": "fma", "grid": [1], "block": [256],
      "args": [{"tensor": "A"}, {"tensor": "B"}, {"tensor": "C"}, {"scratch": "w"}]}],
      "scratch": [{"name": "w", "bytes": 1024}],
      "tensor_maps": [{"name": "m", "tensor": "w", "box": [8]}]})json";
  CHECK(ValidationError(Parse(over_scratch)) ==
        "tensor_maps[0].tensor: 'w' is a scratch buffer; tensor maps describe task tensors, whose "
        "element type "
        "is known");
}

TEST_CASE("Launch bounds, outputs and widths are checked against the module") {
  const std::string fma = R"json({"launches": [{"kernel": "fma", "grid": [1], "block": [BLOCK],
      "args": [{"tensor": "A"}, {"tensor": "B"}, {"tensor": "OUT"}, {"tensor": "A"}]}]})json";
  auto plan = [&](const std::string& block, const std::string& out) {
    std::string text = fma;
    text.replace(text.find("BLOCK"), 5, block);
    text.replace(text.find("OUT"), 3, out);
    return Parse(text);
  };
  CHECK(ValidationError(plan("256", "C")).empty());
  CHECK(ValidationError(plan("512", "C")) ==
        "launches[0].block: 512 threads per block exceed kernel 'fma''s launch bounds (.maxntid "
        "256) (workload "
        "'timed')");
  CHECK(ValidationError(plan("256", "B")) ==
        "launches: output tensor 'C' is passed to no launch, neither as a pointer nor through a "
        "tensor map");

  std::vector<KernelSignature> kernels = GemmKernels();
  kernels[0].parameters[0].alignment = 8;  // A CUtensorMap struct without alignas(64).
  CHECK(ValidationError(Parse(kGoodPlan), "timed", kernels) ==
        "launches[0].args[0]: kernel 'gemm' parameter 0 is 8-byte aligned; a CUtensorMap must be "
        "64-byte aligned "
        "(struct alignas(64) CUtensorMap, passed as 'const __grid_constant__ CUtensorMap')");
  kernels = GemmKernels();
  kernels[0].parameters[5].size_bytes = 8;  // long long K: the axis goes as int64.
  PlanOr<ResolvedPlan> wide =
      ValidatePlan(Parse(kGoodPlan), Gemm(), Workload("timed"), DeviceLimits{}, kernels);
  REQUIRE(wide.ok());
  CHECK(wide.value().launches[0].args[5].size_bytes == 8);

  KernelSignature mangled;
  mangled.name = "_Z4gemmPf";
  CHECK(ValidationError(Parse(kGoodPlan), "timed", {mangled}) ==
        "launches[0].kernel: no kernel 'gemm' (kernels in the module: _Z4gemmPf); declare kernels "
        "extern \"C\" so "
        "that their names are not mangled");
  CHECK(ValidationError(Parse(kGoodPlan), "timed", {}) ==
        "launches[0].kernel: no kernel 'gemm' (the module has no kernels)");
}

TEST_CASE("The plan block is found in comments only, exactly once") {
  const std::string block = "/* PTXBENCH_PLAN\n" + std::string(kGoodPlan) + "\n*/\n";
  PlanOr<std::optional<LaunchPlan>> found =
      ExtractPlanFromSource("// a kernel\n" + block + "extern \"C\" __global__ void gemm() {}\n");
  REQUIRE(found.ok());
  REQUIRE(found.value().has_value());
  CHECK(found.value()->launches[0].kernel == "gemm");

  // No block: nullopt; a string or a prose mention is no block.
  PlanOr<std::optional<LaunchPlan>> none = ExtractPlanFromSource(
      "const char* s = \"/* PTXBENCH_PLAN {} */\";\n/* See the PTXBENCH_PLAN block below. */\n");
  REQUIRE(none.ok());
  CHECK_FALSE(none.value().has_value());

  auto error = [](const std::string& source) {
    PlanOr<std::optional<LaunchPlan>> result = ExtractPlanFromSource(source);
    REQUIRE_FALSE(result.ok());
    return result.error().ToString();
  };
  const size_t second_line = 2 + static_cast<size_t>(std::count(block.begin(), block.end(), '\n'));
  CHECK(error(block + "\n" + block) == "PTXBENCH_PLAN: two plan blocks (source lines 1 and " +
                                           std::to_string(second_line) +
                                           "); exactly one is allowed");
  CHECK(error("int x;\n// PTXBENCH_PLAN {\"launches\": []}\n") ==
        "PTXBENCH_PLAN: the marker at source line 2 is in a // comment; the plan must be a /* "
        "PTXBENCH_PLAN {...} */ "
        "block comment");
  CHECK(
      error("\n\n/* PTXBENCH_PLAN\n{\"launches\": [\n  {\"kernel\": }\n]}\n*/\n")
          .rfind("PTXBENCH_PLAN: not valid JSON at source line 5: syntax error while parsing value",
                 0) == 0);
  CHECK(error("/* PTXBENCH_PLAN {\"launches\": [{\"kernel\": \"k\", \"grid\": [1]}]} */") ==
        "launches[0].block: missing");
  CHECK(error("/* PTXBENCH_PLAN {\"launches\": [] ") ==
        "PTXBENCH_PLAN: the plan block at source line 1 is not closed with */");

  // The request's plan wins over the source's block; neither is an error.
  LaunchPlan request =
      Parse(R"json({"launches": [{"kernel": "from_request", "grid": [1], "block": [1]}]})json");
  PlanOr<LaunchPlan> selected = SelectLaunchPlan(request, block);
  REQUIRE(selected.ok());
  CHECK(selected.value().launches[0].kernel == "from_request");
  PlanOr<LaunchPlan> from_source = SelectLaunchPlan(std::nullopt, block);
  REQUIRE(from_source.ok());
  CHECK(from_source.value().launches[0].kernel == "gemm");
  PlanOr<LaunchPlan> neither =
      SelectLaunchPlan(std::nullopt, "extern \"C\" __global__ void k() {}");
  REQUIRE_FALSE(neither.ok());
  CHECK(neither.error().ToString() ==
        "no launch plan: the request carries none and the source has no /* PTXBENCH_PLAN {...} */ "
        "block");
}

TEST_CASE("A plan built in code is held to the structural checks") {
  LaunchPlan plan = Parse(kGoodPlan);
  while (plan.launches.size() <= kMaxPlanLaunches) plan.launches.push_back(plan.launches[0]);
  CHECK(ValidationError(plan) == "launches: has 17 entries; 1 to 16 are allowed");
  plan = Parse(kGoodPlan);
  plan.launches[0].grid[0] = "ceil_div(N,";
  CHECK(ValidationError(plan).rfind("launches[0].grid[0]: syntax error", 0) == 0);
  plan = Parse(kGoodPlan);
  plan.tensor_maps[0].interleave = TensorMapInterleave::k32B;
  CHECK(ValidationError(plan) == "tensor_maps[0].swizzle: 32B interleave requires swizzle \"32B\"");
}

TEST_CASE("Hostile numbers in a plan block name their field") {
  auto error = [](const std::string& grid) {
    const std::string source =
        "/* PTXBENCH_PLAN {\"launches\": [{\"kernel\": \"gemm\", \"grid\": [" + grid +
        "], \"block\": [384]}]} */\n";
    PlanOr<std::optional<LaunchPlan>> found = ExtractPlanFromSource(source);
    REQUIRE_FALSE(found.ok());
    return found.error().ToString();
  };
  CHECK(error("1e400") == "launches[0].grid[0]: number 1e400 is beyond the range of a double");
  CHECK(error("-18446744073709551617") ==
        "launches[0].grid[0]: integer -18446744073709551617 is outside the int64 range");
  CHECK(error("1, 1, 1, 1") == "launches[0].grid: has 4 entries; 1 to 3 are allowed");
  CHECK(error("NaN").rfind("PTXBENCH_PLAN: not valid JSON at source line 1: ", 0) == 0);
  // An int64 literal is an expression; its value is refused per workload, not a crash.
  PlanOr<std::optional<LaunchPlan>> big = ExtractPlanFromSource(
      "/* PTXBENCH_PLAN {\"launches\": [{\"kernel\": \"gemm\", \"grid\": [9223372036854775807], "
      "\"block\": [384]}]} */");
  REQUIRE(big.ok());
  CHECK(ValidationError(*big.value())
            .rfind("launches[0].grid[0]: grid extent 9223372036854775807 ('9223372036854775807') "
                   "exceeds "
                   "the limit 2147483647",
                   0) == 0);
}

TEST_CASE("Device limits exist for both arches") {
  auto hopper = DeviceLimitsForArch("sm_90a");
  REQUIRE(hopper.ok());
  CHECK(hopper->max_shared_bytes_per_block == 232448);
  CHECK(hopper->max_cluster_size == 8);
  CHECK(DeviceLimitsForArch("sm_100a").ok());
  CHECK_FALSE(DeviceLimitsForArch("sm_80").ok());
}

}  // namespace
}  // namespace ptxbench
