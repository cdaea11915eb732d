#include "common/launch_plan.h"

#include <catch2/catch.hpp>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace ptxbench {
namespace {

using nlohmann::json;

// A plan that passes every structural check: two launches, scratch and a tensor map.
json GoodPlan() {
  return json::parse(R"json({
    "launches": [
      {"kernel": "gemm", "grid": ["ceil_div(N, 128)", "ceil_div(M, 128)"], "block": [384],
       "cluster": [2, 1], "dynamic_shared_bytes": "4 * 128 * 64 * 2",
       "args": [{"tensor_map": "a_tiles"}, {"tensor": "C"}, {"scratch": "w"}, {"scalar": "M"}]},
      {"kernel": "_Z6reducePf", "grid": [1], "block": [256], "args": [{"scratch": "w"}]}
    ],
    "scratch": [{"name": "w", "bytes": "4 * M"}],
    "tensor_maps": [{"name": "a_tiles", "tensor": "A", "box": [64, 128], "swizzle": "128B",
                     "l2_promotion": "256B", "oob_fill": "nan", "element_strides": [1, 1],
                     "dims": ["K", "M"]}]
  })json");
}

std::string ErrorOf(const json& plan) {
  PlanOr<LaunchPlan> parsed = LaunchPlanFromJson(plan);
  return parsed.ok() ? "" : parsed.error().ToString();
}

std::string ErrorOfText(const std::string& text) {
  PlanOr<LaunchPlan> parsed = ParseLaunchPlanJson(text);
  return parsed.ok() ? "" : parsed.error().ToString();
}

// GoodPlan with `edit` applied.
std::string ErrorWith(const std::function<void(json&)>& edit) {
  json plan = GoodPlan();
  edit(plan);
  return ErrorOf(plan);
}

// GoodPlan's text with the first launch's first grid entry replaced by raw JSON text `value`.
std::string ErrorWithGridText(const std::string& value) {
  json plan = GoodPlan();
  plan["launches"][0]["grid"][0] = "@@";
  std::string text = plan.dump();
  text.replace(text.find("\"@@\""), 4, value);
  return ErrorOfText(text);
}

TEST_CASE("A plan is read into types, and written back to the same JSON") {
  PlanOr<LaunchPlan> parsed = LaunchPlanFromJson(GoodPlan());
  if (!parsed.ok()) FAIL(parsed.error().ToString());
  const LaunchPlan& plan = parsed.value();
  REQUIRE(plan.launches.size() == 2);
  CHECK(plan.launches[0].kernel == "gemm");
  CHECK(plan.launches[0].grid == std::vector<std::string>{"ceil_div(N, 128)", "ceil_div(M, 128)"});
  CHECK(plan.launches[0].block == std::vector<std::string>{"384"});  // Integers: expressions.
  CHECK(plan.launches[0].cluster == std::vector<std::string>{"2", "1"});
  CHECK(plan.launches[0].dynamic_shared_bytes == "4 * 128 * 64 * 2");
  REQUIRE(plan.launches[0].args.size() == 4);
  CHECK(plan.launches[0].args[0].kind == PlanArgument::Kind::kTensorMap);
  CHECK(plan.launches[0].args[0].name == "a_tiles");
  CHECK(plan.launches[0].args[2].kind == PlanArgument::Kind::kScratch);
  CHECK(plan.launches[0].args[3].kind == PlanArgument::Kind::kScalar);
  CHECK(plan.launches[1].kernel == "_Z6reducePf");  // Kernel names need not be identifiers.
  REQUIRE(plan.tensor_maps.size() == 1);
  const PlanTensorMap& map = plan.tensor_maps[0];
  CHECK(map.swizzle == TensorMapSwizzle::k128B);
  CHECK(map.l2_promotion == TensorMapL2Promotion::k256B);
  CHECK(map.interleave == TensorMapInterleave::kNone);
  CHECK(map.oob_fill == TensorMapOobFill::kNan);
  CHECK(map.dims == std::vector<std::string>{"K", "M"});

  const json written = ToJson(plan);
  PlanOr<LaunchPlan> again = LaunchPlanFromJson(written);
  REQUIRE(again.ok());
  CHECK(ToJson(again.value()) == written);
  // Defaults are left out: an unset choice or list is absent, as protobuf's JSON leaves it.
  CHECK_FALSE(written["tensor_maps"][0].contains("interleave"));
  CHECK_FALSE(written["launches"][1].contains("cluster"));
  CHECK_FALSE(written["launches"][1].contains("dynamic_shared_bytes"));
}

TEST_CASE("Every choice is read by its name; empty is the default") {
  auto map_with = [](const char* key, const std::string& value) {
    return ErrorWith([&](json& plan) { plan["tensor_maps"][0][key] = value; });
  };
  for (const auto& choice : kSwizzleChoices)
    CHECK(map_with("swizzle", std::string(choice.name)).empty());
  for (const auto& choice : kL2PromotionChoices) {
    CHECK(map_with("l2_promotion", std::string(choice.name)).empty());
  }
  for (const auto& choice : kOobFillChoices)
    CHECK(map_with("oob_fill", std::string(choice.name)).empty());
  CHECK(map_with("interleave", "16B").empty());
  CHECK(map_with("swizzle", "").empty());
  CHECK(map_with("swizzle", "256B") ==
        "tensor_maps[0].swizzle: '256B' is not one of \"none\", \"32B\", \"64B\", \"128B\"");
  CHECK(map_with("interleave", "8B") ==
        "tensor_maps[0].interleave: '8B' is not one of \"none\", \"16B\", \"32B\"");
  CHECK(map_with("l2_promotion", "512B") ==
        "tensor_maps[0].l2_promotion: '512B' is not one of \"none\", \"64B\", \"128B\", \"256B\"");
  CHECK(map_with("oob_fill", "NaN") ==
        "tensor_maps[0].oob_fill: 'NaN' is not one of \"zero\", \"nan\"");
  CHECK(
      map_with("swizzle", "128B\n[fake log line]") ==
      "tensor_maps[0].swizzle: '128B\\n[fake log line]' is not one of \"none\", \"32B\", \"64B\", "
      "\"128B\"");
  CHECK(ErrorWith([](json& plan) { plan["tensor_maps"][0]["swizzle"] = 3; }) ==
        "tensor_maps[0].swizzle: expected a string");
  CHECK(ErrorWith([](json& plan) {
          plan["tensor_maps"][0]["interleave"] = "32B";
          plan["tensor_maps"][0]["swizzle"] = "64B";
        }) == "tensor_maps[0].swizzle: 32B interleave requires swizzle \"32B\"");
  CHECK(ErrorWith([](json& plan) {
          plan["tensor_maps"][0]["interleave"] = "32B";
          plan["tensor_maps"][0]["swizzle"] = "32B";
        }).empty());
  CHECK(TensorMapSwizzleName(TensorMapSwizzle::k64B) == "64B");
  CHECK(PlanArgumentKindName(PlanArgument::Kind::kTensorMap) == "tensor_map");
}

TEST_CASE("Every count limit holds, at the limit and one past it") {
  // launches: 1 to 16.
  CHECK(ErrorWith([](json& plan) {
          while (plan["launches"].size() < kMaxPlanLaunches)
            plan["launches"].push_back(plan["launches"][1]);
        }).empty());
  CHECK(ErrorWith([](json& plan) {
          while (plan["launches"].size() <= kMaxPlanLaunches)
            plan["launches"].push_back(plan["launches"][1]);
        }) == "launches: has 17 entries; 1 to 16 are allowed");
  CHECK(ErrorWith([](json& plan) { plan["launches"] = json::array(); }) ==
        "launches: has 0 entries; 1 to 16 are allowed");
  CHECK(ErrorWith([](json& plan) { plan.erase("launches"); }) == "launches: missing");
  // scratch: at most 16, names unique.
  auto scratch = [](size_t count) {
    return [count](json& plan) {
      for (size_t i = 1; i < count; ++i) {
        plan["scratch"].push_back({{"name", "s" + std::to_string(i)}, {"bytes", 16}});
      }
    };
  };
  CHECK(ErrorWith(scratch(kMaxPlanScratchBuffers)).empty());
  CHECK(ErrorWith(scratch(kMaxPlanScratchBuffers + 1)) ==
        "scratch: has 17 entries; at most 16 are allowed");
  // tensor maps: at most 32.
  auto maps = [](size_t count) {
    return [count](json& plan) {
      for (size_t i = 1; i < count; ++i) {
        json map = plan["tensor_maps"][0];
        map["name"] = "m" + std::to_string(i);
        plan["tensor_maps"].push_back(map);
      }
    };
  };
  CHECK(ErrorWith(maps(kMaxPlanTensorMaps)).empty());
  CHECK(ErrorWith(maps(kMaxPlanTensorMaps + 1)) ==
        "tensor_maps: has 33 entries; at most 32 are allowed");
  // arguments: at most 64 per launch.
  auto args = [](size_t count) {
    return [count](json& plan) {
      plan["launches"][1]["args"] = json::array();
      for (size_t i = 0; i < count; ++i) plan["launches"][1]["args"].push_back({{"scalar", "M"}});
    };
  };
  CHECK(ErrorWith(args(kMaxPlanArgsPerLaunch)).empty());
  CHECK(ErrorWith(args(kMaxPlanArgsPerLaunch + 1)) ==
        "launches[1].args: has 65 entries; at most 64 are allowed");
  // grid, block: 1 to 3; cluster: 0 to 3.
  for (const char* key : {"grid", "block"}) {
    CHECK(ErrorWith([&](json& plan) { plan["launches"][0][key] = {1, 1, 1}; }).empty());
    CHECK(ErrorWith([&](json& plan) {
            plan["launches"][0][key] = {1, 1, 1, 1};
          }) == std::string("launches[0].") + key + ": has 4 entries; 1 to 3 are allowed");
    CHECK(ErrorWith([&](json& plan) { plan["launches"][0][key] = json::array(); }) ==
          std::string("launches[0].") + key + ": has 0 entries; 1 to 3 are allowed");
  }
  CHECK(ErrorWith([](json& plan) { plan["launches"][0]["cluster"] = json::array(); }).empty());
  CHECK(ErrorWith([](json& plan) {
          plan["launches"][0]["cluster"] = {1, 1, 1, 1};
        }) == "launches[0].cluster: has 4 entries; at most 3 are allowed");
  // box: 1 to 5; element_strides and dims: at most 5.
  CHECK(ErrorWith([](json& plan) { plan["tensor_maps"][0]["box"] = {8, 1, 1, 1, 1}; }).empty());
  CHECK(ErrorWith([](json& plan) { plan["tensor_maps"][0]["box"] = {8, 1, 1, 1, 1, 1}; }) ==
        "tensor_maps[0].box: has 6 entries; 1 to 5 are allowed");
  CHECK(ErrorWith([](json& plan) { plan["tensor_maps"][0]["box"] = json::array(); }) ==
        "tensor_maps[0].box: has 0 entries; 1 to 5 are allowed");
  CHECK(ErrorWith([](json& plan) {
          plan["tensor_maps"][0]["element_strides"] = {1, 1, 1, 1, 1, 1};
        }) == "tensor_maps[0].element_strides: has 6 entries; at most 5 are allowed");
  CHECK(ErrorWith([](json& plan) { plan["tensor_maps"][0]["dims"] = {1, 1, 1, 1, 1, 1}; }) ==
        "tensor_maps[0].dims: has 6 entries; at most 5 are allowed");
}

TEST_CASE("Names and expressions have a length limit and a shape") {
  const std::string longest_name(kMaxPlanNameBytes, 'k');
  CHECK(ErrorWith([&](json& plan) { plan["launches"][1]["kernel"] = longest_name; }).empty());
  CHECK(ErrorWith([&](json& plan) { plan["launches"][1]["kernel"] = longest_name + "k"; }) ==
        "launches[1].kernel: a name of 257 bytes exceeds the limit of 256");
  CHECK(ErrorWith([](json& plan) { plan["launches"][1]["kernel"] = "k\nINFO forged"; }) ==
        "launches[1].kernel: contains a control character (byte 1)");
  CHECK(ErrorWith([](json& plan) { plan["launches"][1]["kernel"] = ""; }) ==
        "launches[1].kernel: must not be empty");
  CHECK(ErrorWith([](json& plan) {
          plan["launches"][0]["args"][1] = {{"tensor", "C-1"}};
        }) == "launches[0].args[1].tensor: 'C-1' is not an identifier");
  CHECK(ErrorWith([&](json& plan) {
          plan["launches"][0]["args"][1] = {{"scalar", longest_name + "M"}};
        }) == "launches[0].args[1].scalar: a name of 257 bytes exceeds the limit of 256");
  CHECK(ErrorWith([](json& plan) { plan["scratch"][0]["name"] = "9w"; }) ==
        "scratch[0].name: '9w' is not an identifier");
  CHECK(ErrorWith([](json& plan) { plan["tensor_maps"][0]["name"] = "a tiles"; }) ==
        "tensor_maps[0].name: 'a tiles' is not an identifier");
  CHECK(ErrorWith([](json& plan) { plan["tensor_maps"][0]["tensor"] = "A[0]"; }) ==
        "tensor_maps[0].tensor: 'A[0]' is not an identifier");
  CHECK(ErrorWith([](json& plan) {
          plan["scratch"].push_back({{"name", "w"}, {"bytes", 8}});
        }) == "scratch[1].name: duplicate scratch buffer 'w'");
  CHECK(ErrorWith([](json& plan) { plan["tensor_maps"].push_back(plan["tensor_maps"][0]); }) ==
        "tensor_maps[1].name: duplicate tensor map 'a_tiles'");
  // A scratch buffer and a tensor map may share a name: arguments say which they mean.
  CHECK(ErrorWith([](json& plan) {
          plan["scratch"][0]["name"] = "a_tiles";
          plan["launches"][0]["args"][2]["scratch"] = "a_tiles";
          plan["launches"][1]["args"][0]["scratch"] = "a_tiles";
        }).empty());

  // Expressions: at most 256 bytes, and their syntax is checked without a workload.
  std::string longest_expression = "1";
  while (longest_expression.size() + 2 <= kMaxPlanExpressionBytes) longest_expression += "+1";
  CHECK(
      ErrorWith([&](json& plan) { plan["launches"][0]["grid"][0] = longest_expression; }).empty());
  CHECK(ErrorWith([&](json& plan) {
          plan["launches"][0]["grid"][0] = longest_expression + "+1";
        }) == "launches[0].grid[0]: an expression of 257 bytes exceeds the limit of 256");
  CHECK(ErrorWith([](json& plan) { plan["launches"][0]["grid"][1] = "ceil_div(M,"; }) ==
        "launches[0].grid[1]: syntax error: expected a number, a name or '(' at the end in "
        "'ceil_div(M,' at position 12");
  CHECK(ErrorWith([](json& plan) {
          plan["launches"][0]["block"][0] = "1.5";
        }).rfind("launches[0].block[0]: ", 0) == 0);
  CHECK(ErrorWith([](json& plan) { plan["launches"][0]["block"][0] = ""; }) ==
        "launches[0].block[0]: empty expression");
  CHECK(ErrorWith([](json& plan) { plan["launches"][0]["dynamic_shared_bytes"] = ""; }) ==
        "launches[0].dynamic_shared_bytes: empty expression");
  CHECK(ErrorWith([](json& plan) { plan["launches"][0]["cluster"][1] = "2\r"; }) ==
        "launches[0].cluster[1]: contains a control character (byte 1)");
  CHECK(ErrorWith([](json& plan) {
          plan["scratch"][0]["bytes"] = "M *";
        }).rfind("scratch[0].bytes: syntax error", 0) == 0);
  CHECK(ErrorWith([](json& plan) {
          plan["tensor_maps"][0]["dims"][0] = "K)";
        }).rfind("tensor_maps[0].dims[0]: syntax error", 0) == 0);
  // Values the workload decides are not the plan's to check: a negative grid is a valid
  // expression here (the engine refuses it for each workload).
  CHECK(ErrorWith([](json& plan) { plan["launches"][0]["grid"][0] = -5; }).empty());
  CHECK(ErrorWith([](json& plan) { plan["launches"][0]["grid"][0] = "Q / 0"; }).empty());
}

TEST_CASE("Hostile numbers become errors naming their field") {
  CHECK(ErrorWithGridText("128").empty());
  CHECK(ErrorWithGridText("9223372036854775807").empty());  // An expression; its value may fail.
  CHECK(ErrorWithGridText("1e400") ==
        "launches[0].grid[0]: number 1e400 is beyond the range of a double");
  CHECK(ErrorWithGridText("-1e400") ==
        "launches[0].grid[0]: number -1e400 is beyond the range of a double");
  CHECK(ErrorWithGridText("18446744073709551616") ==
        "launches[0].grid[0]: integer 18446744073709551616 is outside the int64 range");
  CHECK(ErrorWithGridText("18446744073709551615") ==
        "launches[0].grid[0]: integer 18446744073709551615 is outside the int64 range");
  CHECK(ErrorWithGridText("9223372036854775808") ==
        "launches[0].grid[0]: integer 9223372036854775808 is outside the int64 range");
  CHECK(ErrorWithGridText("-9223372036854775809") ==
        "launches[0].grid[0]: integer -9223372036854775809 is outside the int64 range");
  CHECK(ErrorWithGridText(std::string(5000, '7')).rfind("launches[0].grid[0]: integer 7777", 0) ==
        0);
  const std::string not_integer =
      "launches[0].grid[0]: expected an expression (a string such as \"ceil_div(M, 128)\") or an "
      "integer";
  CHECK(ErrorWithGridText("1.5") == not_integer);
  CHECK(ErrorWithGridText("-0.0") == not_integer);
  CHECK(ErrorWithGridText("1e2") == not_integer);
  CHECK(ErrorWithGridText("4.9e-324") == not_integer);
  CHECK(ErrorWithGridText("true") == not_integer);
  CHECK(ErrorWithGridText("null") == not_integer);
  CHECK(ErrorWithGridText("{}") == not_integer);
  // -0 is the integer 0 (JSON has one integer zero); it reads as the expression "0".
  PlanOr<LaunchPlan> zero =
      ParseLaunchPlanJson(R"({"launches": [{"kernel": "k", "grid": [-0], "block": [1]}]})");
  REQUIRE(zero.ok());
  CHECK(zero.value().launches[0].grid[0] == "0");
  // JSON has no NaN or infinity: not valid JSON, at the byte where it stops.
  for (const char* text : {"NaN", "Infinity", "-Infinity", "nan", "0x80", "+1", "1_000"}) {
    INFO(text);
    CHECK(ErrorWithGridText(text).rfind("not valid JSON at line 1 (byte ", 0) == 0);
  }
}

TEST_CASE("Hostile JSON never throws: duplicates, NUL, depth, size and types") {
  CHECK(ErrorOfText(R"({"launches": [{"kernel": "a", "grid": [1], "block": [1]}],
                        "launches": [{"kernel": "b", "grid": [1], "block": [1]}]})") ==
        "launches: duplicate key");
  CHECK(
      ErrorOfText(R"({"launches": [{"kernel": "a", "kernel": "b", "grid": [1], "block": [1]}]})") ==
      "launches[0].kernel: duplicate key");
  CHECK(ErrorOfText(R"({"launches": [{"kernel": "k\u0000evil", "grid": [1], "block": [1]}]})") ==
        "launches[0].kernel: contains a NUL byte (\\u0000)");
  CHECK(ErrorOfText(R"({"launches": [{"kernel": "k", "grid": ["M\u0000"], "block": [1]}]})") ==
        "launches[0].grid[0]: contains a NUL byte (\\u0000)");
  CHECK(ErrorOfText(
            R"({"launches": [{"kernel": "k", "grid": [1], "block": [1], "args\u0000": []}]})") ==
        "launches[0].args\\u0000: the key contains a NUL byte (\\u0000)");
  CHECK(
      ErrorOfText(R"({"launches": [{"kernel": "k", "grid": [[[[[[[[1]]]]]]]], "block": [1]}]})") ==
      "launches[0].grid[0][0][0][0][0]: nested deeper than 8 levels");
  CHECK(ErrorOfText(std::string(100000, '[')) ==
        "[0][0][0][0][0][0][0][0]: nested deeper than 8 levels");
  std::string many = R"({"launches": [{"kernel": "k", "block": [1], "grid": [1)";
  for (int i = 0; i < 5000; ++i) many += ",1";
  many += "]}]}";
  CHECK(ErrorOfText(many) == "launches[0].grid: more than 4096 entries");
  const std::string huge = R"({"launches": [{"kernel": ")" + std::string(kMaxPlanJsonBytes, 'k') +
                           R"(", "grid": [1], "block": [1]}]})";
  CHECK(ErrorOfText(huge) ==
        "the plan is " + std::to_string(huge.size()) + " bytes; the limit is 262144");
  CHECK(ErrorOfText("{\"launches\": [") ==
        "not valid JSON at line 1 (byte 13): syntax error while parsing value - unexpected end of "
        "input; expected '[', '{', or a literal");
  CHECK(ErrorOfText("{\n\"launches\": [\n{\"kernel\": \"\xff\"}]}")
            .rfind("not valid JSON at line 3 (byte ", 0) == 0);

  // Wrong types, field by field.
  CHECK(ErrorOf(json::array()) == "a launch plan is a JSON object");
  CHECK(ErrorWith([](json& plan) { plan["launches"] = json::object(); }) ==
        "launches: expected an array");
  CHECK(ErrorWith([](json& plan) { plan["launches"][0] = 7; }) ==
        "launches[0]: expected an object");
  CHECK(ErrorWith([](json& plan) { plan["launches"][0]["kernel"] = 7; }) ==
        "launches[0].kernel: expected a string");
  CHECK(ErrorWith([](json& plan) { plan["launches"][0]["grid"] = "1"; }) ==
        "launches[0].grid: expected an array of expressions");
  CHECK(ErrorWith([](json& plan) { plan["launches"][0]["args"] = json::object(); }) ==
        "launches[0].args: expected an array of arguments");
  CHECK(ErrorWith([](json& plan) {
          plan["launches"][0]["args"][0] = {{"tensor", 3}};
        }) == "launches[0].args[0].tensor: expected a name (a string)");
  CHECK(ErrorWith([](json& plan) { plan["launches"][0]["args"][0] = json::object(); }) ==
        "launches[0].args[0]: an argument is an object with exactly one key: tensor, scratch, "
        "scalar or tensor_map");
  CHECK(ErrorWith([](json& plan) {
          plan["launches"][0]["args"][0] = {{"pointer", "A"}};
        }) ==
        "launches[0].args[0].pointer: unknown argument kind; an argument is an object with "
        "exactly one key: tensor, scratch, scalar or tensor_map");
  CHECK(ErrorWith([](json& plan) { plan["scratch"] = "w"; }) == "scratch: expected an array");
  CHECK(ErrorWith([](json& plan) { plan["scratch"][0] = json::array(); }) ==
        "scratch[0]: expected an object");
  CHECK(ErrorWith([](json& plan) { plan["scratch"][0].erase("bytes"); }) ==
        "scratch[0].bytes: missing");
  CHECK(ErrorWith([](json& plan) { plan["tensor_maps"][0].erase("box"); }) ==
        "tensor_maps[0].box: missing");
  CHECK(ErrorWith([](json& plan) { plan["tensor_maps"][0]["swizle"] = "128B"; }) ==
        "tensor_maps[0].swizle: unknown key (allowed: box, dims, element_strides, interleave, "
        "l2_promotion, name, oob_fill, swizzle, tensor)");
  CHECK(ErrorWith([](json& plan) { plan["launches"][0]["grids"] = {1}; }) ==
        "launches[0].grids: unknown key (allowed: args, block, cluster, dynamic_shared_bytes, "
        "grid, kernel)");
  CHECK(ErrorWith([](json& plan) { plan["scratches"] = json::array(); }) ==
        "scratches: unknown key (allowed: launches, scratch, tensor_maps)");
}

TEST_CASE("A source block's JSON errors name the source line") {
  CHECK(
      ParsePlanBlockJson("\n{\"launches\": [\n  {\"kernel\": }\n]}\n", 3)
          .error()
          .ToString()
          .rfind("PTXBENCH_PLAN: not valid JSON at source line 5: syntax error while parsing value",
                 0) == 0);
  // Errors that are not syntax name the field, as for the API's plan.
  CHECK(ParsePlanBlockJson(R"({"launches": [{"kernel": "k", "grid": [1e999], "block": [1]}]})", 9)
            .error()
            .ToString() == "launches[0].grid[0]: number 1e999 is beyond the range of a double");
  CHECK(ParsePlanBlockJson(std::string(kMaxPlanJsonBytes + 1, ' '), 1).error().ToString() ==
        "PTXBENCH_PLAN: the plan is 262145 bytes; the limit is 262144");
  CHECK(
      ParsePlanBlockJson(R"({"launches": [{"kernel": "k", "grid": [1], "block": [1]}]})", 1).ok());
}

// A random plan near the limits, from parts that are valid or a little wrong.
LaunchPlan RandomPlan(std::mt19937& rng) {
  // Half of the plans are honest; in the others, each part goes wrong now and then.
  const bool hostile = rng() % 2 == 0;
  auto odd = [&](size_t one_in) { return hostile && rng() % (one_in * 2) == 0; };
  auto pick = [&](const std::vector<std::string>& options) {
    return options[rng() % options.size()];
  };
  const std::vector<std::string> names = {"A",
                                          "C",
                                          "w",
                                          "M",
                                          "a_tiles",
                                          "",
                                          "9x",
                                          "x-y",
                                          std::string(kMaxPlanNameBytes, 'n'),
                                          std::string(kMaxPlanNameBytes + 1, 'n'),
                                          "k\tk"};
  const std::vector<std::string> expressions = {
      "1",    "ceil_div(M, 128)",
      "M*",   "",
      "-0",   "min(M, N, 4)",
      "(((1", "N/0",
      "M\n",  std::string(kMaxPlanExpressionBytes + 1, '1')};
  auto list = [&](size_t max_count) {
    std::vector<std::string> out(odd(4) ? rng() % (max_count + 2) : 1 + rng() % max_count);
    for (std::string& e : out) e = odd(4) ? pick(expressions) : "1";
    return out;
  };
  LaunchPlan plan;
  plan.launches.resize(odd(4) ? rng() % 18 : 1 + rng() % 3);
  for (PlanLaunch& launch : plan.launches) {
    launch.kernel = odd(6) ? pick(names) : "k";
    launch.grid = list(3);
    launch.block = list(3);
    launch.cluster = rng() % 2 == 0 ? std::vector<std::string>() : list(3);
    launch.dynamic_shared_bytes = odd(3) ? pick(expressions) : rng() % 2 == 0 ? "" : "1024";
    launch.args.resize(odd(4) ? rng() % 70 : rng() % 4);
    for (PlanArgument& arg : launch.args) {
      arg.kind = static_cast<PlanArgument::Kind>(rng() % 4);
      arg.name = odd(5) ? pick(names) : "A";
    }
  }
  plan.scratch.resize(odd(4) ? rng() % 20 : rng() % 3);
  for (size_t i = 0; i < plan.scratch.size(); ++i) {
    plan.scratch[i].name = odd(5) ? pick(names) : "s" + std::to_string(i);
    plan.scratch[i].bytes = odd(5) ? pick(expressions) : "64";
  }
  plan.tensor_maps.resize(odd(6) ? rng() % 36 : rng() % 3);
  for (size_t i = 0; i < plan.tensor_maps.size(); ++i) {
    PlanTensorMap& map = plan.tensor_maps[i];
    map.name = odd(5) ? pick(names) : "m" + std::to_string(i);
    map.tensor = odd(5) ? pick(names) : "A";
    map.box = list(5);
    map.element_strides = rng() % 2 == 0 ? std::vector<std::string>() : list(5);
    map.dims = rng() % 2 == 0 ? std::vector<std::string>() : list(5);
    map.swizzle = static_cast<TensorMapSwizzle>(rng() % 4);
    map.interleave =
        odd(2) ? static_cast<TensorMapInterleave>(rng() % 3) : TensorMapInterleave::kNone;
    map.l2_promotion = static_cast<TensorMapL2Promotion>(rng() % 4);
    map.oob_fill = static_cast<TensorMapOobFill>(rng() % 2);
  }
  return plan;
}

// The typed checks and the JSON reader agree: a plan built in code is refused by
// CheckLaunchPlan exactly when its JSON is refused by the reader, with the same field.
TEST_CASE("The typed plan and its JSON are checked alike") {
  std::mt19937 rng(15);
  int accepted = 0;
  for (int i = 0; i < 3000; ++i) {
    const LaunchPlan plan = RandomPlan(rng);
    const std::optional<PlanError> typed = CheckLaunchPlan(plan);
    const json text = ToJson(plan);
    PlanOr<LaunchPlan> from_json = ParseLaunchPlanJson(text.dump());
    INFO(text.dump().substr(0, 2000));
    if (typed.has_value()) {
      REQUIRE_FALSE(from_json.ok());
      CHECK(from_json.error().ToString() == typed->ToString());
    } else {
      REQUIRE(from_json.ok());
      CHECK(ToJson(from_json.value()) == text);
      ++accepted;
    }
  }
  // The generator reaches both outcomes often enough to mean something.
  CHECK(accepted > 100);
  CHECK(accepted < 2900);
}

TEST_CASE("The JSON keys of each object are listed once") {
  CHECK(PlanJsonKeys(PlanObject::kLaunchPlan) ==
        std::vector<std::string_view>{"launches", "scratch", "tensor_maps"});
  CHECK(PlanJsonKeys(PlanObject::kArgument) ==
        std::vector<std::string_view>{"tensor", "scratch", "scalar", "tensor_map"});
  CHECK(PlanJsonKeys(PlanObject::kScratch) == std::vector<std::string_view>{"name", "bytes"});
  CHECK(PlanJsonKeys(PlanObject::kLaunch).size() == 6);
  CHECK(PlanJsonKeys(PlanObject::kTensorMap).size() == 9);
}

}  // namespace
}  // namespace ptxbench
