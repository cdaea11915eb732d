// The launch plan at the API: the server refuses, with INVALID_ARGUMENT naming the field, exactly
// the plans the engine would refuse from the plan alone (common/launch_plan.h is the one
// definition), and a plan it accepts reaches the worker as JSON the engine reads. Over a real
// server, PostgreSQL and loopback gRPC.
#include <catch2/catch.hpp>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/launch_plan.h"
#include "google/protobuf/descriptor.h"
#include "ptxbench/v1/types.pb.h"
#include "server/api/convert.h"
#include "server/api/validate.h"
#include "tests/server/api/api_test_support.h"

namespace ptxbench::api_test {
namespace {

// What the engine makes of a plan the server stored: the store's JSON back into the proto (as
// convert.cc builds the leased job), printed as the worker prints it (worker/daemon/worker.cc:
// the proto field names), then read by the engine's reader.
PlanOr<LaunchPlan> AsTheEngineReadsIt(const v1::LaunchPlan& plan) {
  absl::StatusOr<std::string> stored = api::MessageToJson(plan);
  REQUIRE(stored.ok());
  v1::LaunchPlan leased;
  REQUIRE(api::MessageFromJson(*stored, &leased).ok());
  absl::StatusOr<std::string> handed_to_engine = api::MessageToJson(leased);
  REQUIRE(handed_to_engine.ok());
  return ParseLaunchPlanJson(*handed_to_engine);
}

// The API's answer and the engine's, side by side: "" for accepted, else the message.
std::string ApiAnswer(const v1::LaunchPlan& plan) {
  absl::Status status = api::ValidateLaunchPlan(plan, "launch_plan");
  if (status.ok()) return "";
  CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  return std::string(status.message());
}

std::string EngineAnswer(const v1::LaunchPlan& plan) {
  PlanOr<LaunchPlan> parsed = AsTheEngineReadsIt(plan);
  if (parsed.ok()) return "";
  const PlanError& error = parsed.error();
  return error.field.empty() ? absl::StrCat("launch_plan: ", error.message)
                             : absl::StrCat("launch_plan.", error.field, ": ", error.message);
}

v1::LaunchPlan GoodPlan() {
  v1::LaunchPlan plan;
  v1::Launch* launch = plan.add_launches();
  launch->set_kernel("gemm");
  launch->add_grid("ceil_div(N, 128)");
  launch->add_grid("ceil_div(M, 128)");
  launch->add_block("384");
  launch->add_cluster("2");
  launch->set_dynamic_shared_bytes("4 * 128 * 64 * 2");
  launch->add_args()->set_tensor_map("a_tiles");
  launch->add_args()->set_tensor("C");
  launch->add_args()->set_scratch("w");
  launch->add_args()->set_scalar("M");
  v1::ScratchSpec* scratch = plan.add_scratch();
  scratch->set_name("w");
  scratch->set_bytes("4 * M");
  v1::TensorMapSpec* map = plan.add_tensor_maps();
  map->set_name("a_tiles");
  map->set_tensor("A");
  map->add_box("64");
  map->add_box("128");
  map->set_swizzle("128B");
  map->set_l2_promotion("256B");
  return plan;
}

struct Case {
  const char* what;
  std::function<void(v1::LaunchPlan&)> edit;
  std::string expected;  // "" when the plan is accepted.
};

// Every limit at the limit (accepted) and one past it (refused), and the plan's other rules.
std::vector<Case> LimitCases() {
  const std::string longest_name(kMaxPlanNameBytes, 'k');
  std::string longest_expression = "1";
  while (longest_expression.size() + 2 <= kMaxPlanExpressionBytes) longest_expression += "+1";
  auto launches = [](size_t count) {
    return [count](v1::LaunchPlan& plan) {
      while (static_cast<size_t>(plan.launches_size()) < count) {
        *plan.add_launches() = plan.launches(0);
      }
    };
  };
  auto scratch = [](size_t count) {
    return [count](v1::LaunchPlan& plan) {
      while (static_cast<size_t>(plan.scratch_size()) < count) {
        v1::ScratchSpec* buffer = plan.add_scratch();
        buffer->set_name(absl::StrCat("s", plan.scratch_size()));
        buffer->set_bytes("64");
      }
    };
  };
  auto maps = [](size_t count) {
    return [count](v1::LaunchPlan& plan) {
      while (static_cast<size_t>(plan.tensor_maps_size()) < count) {
        v1::TensorMapSpec map = plan.tensor_maps(0);
        map.set_name(absl::StrCat("m", plan.tensor_maps_size()));
        *plan.add_tensor_maps() = map;
      }
    };
  };
  auto args = [](size_t count) {
    return [count](v1::LaunchPlan& plan) {
      v1::Launch* launch = plan.mutable_launches(0);
      while (static_cast<size_t>(launch->args_size()) < count) launch->add_args()->set_scalar("N");
    };
  };
  return {
      {"the good plan", [](v1::LaunchPlan&) {}, ""},
      {"16 launches", launches(kMaxPlanLaunches), ""},
      {"17 launches", launches(kMaxPlanLaunches + 1),
       "launch_plan.launches: has 17 entries; 1 to 16 are allowed"},
      {"no launch", [](v1::LaunchPlan& plan) { plan.clear_launches(); },
       "launch_plan.launches: missing"},
      {"16 scratch buffers", scratch(kMaxPlanScratchBuffers), ""},
      {"17 scratch buffers", scratch(kMaxPlanScratchBuffers + 1),
       "launch_plan.scratch: has 17 entries; at most 16 are allowed"},
      {"32 tensor maps", maps(kMaxPlanTensorMaps), ""},
      {"33 tensor maps", maps(kMaxPlanTensorMaps + 1),
       "launch_plan.tensor_maps: has 33 entries; at most 32 are allowed"},
      {"64 arguments", args(kMaxPlanArgsPerLaunch), ""},
      {"65 arguments", args(kMaxPlanArgsPerLaunch + 1),
       "launch_plan.launches[0].args: has 65 entries; at most 64 are allowed"},
      {"3 grid extents", [](v1::LaunchPlan& plan) { plan.mutable_launches(0)->add_grid("1"); }, ""},
      {"4 grid extents",
       [](v1::LaunchPlan& plan) {
         plan.mutable_launches(0)->add_grid("1");
         plan.mutable_launches(0)->add_grid("1");
       },
       "launch_plan.launches[0].grid: has 4 entries; 1 to 3 are allowed"},
      {"4 cluster extents",
       [](v1::LaunchPlan& plan) {
         for (int i = 0; i < 3; ++i) plan.mutable_launches(0)->add_cluster("1");
       },
       "launch_plan.launches[0].cluster: has 4 entries; at most 3 are allowed"},
      {"no block", [](v1::LaunchPlan& plan) { plan.mutable_launches(0)->clear_block(); },
       "launch_plan.launches[0].block: missing"},
      {"6 box extents",
       [](v1::LaunchPlan& plan) {
         for (int i = 0; i < 4; ++i) plan.mutable_tensor_maps(0)->add_box("1");
       },
       "launch_plan.tensor_maps[0].box: has 6 entries; 1 to 5 are allowed"},
      {"6 element strides",
       [](v1::LaunchPlan& plan) {
         for (int i = 0; i < 6; ++i) plan.mutable_tensor_maps(0)->add_element_strides("1");
       },
       "launch_plan.tensor_maps[0].element_strides: has 6 entries; at most 5 are allowed"},
      {"6 dims",
       [](v1::LaunchPlan& plan) {
         for (int i = 0; i < 6; ++i) plan.mutable_tensor_maps(0)->add_dims("1");
       },
       "launch_plan.tensor_maps[0].dims: has 6 entries; at most 5 are allowed"},
      {"a 256-byte kernel name",
       [=](v1::LaunchPlan& plan) { plan.mutable_launches(0)->set_kernel(longest_name); }, ""},
      {"a 257-byte kernel name",
       [=](v1::LaunchPlan& plan) { plan.mutable_launches(0)->set_kernel(longest_name + "k"); },
       "launch_plan.launches[0].kernel: a name of 257 bytes exceeds the limit of 256"},
      {"a 256-byte expression",
       [=](v1::LaunchPlan& plan) { plan.mutable_launches(0)->set_grid(0, longest_expression); },
       ""},
      {"a 257-byte expression",
       [=](v1::LaunchPlan& plan) { plan.mutable_scratch(0)->set_bytes(longest_expression + "+1"); },
       "launch_plan.scratch[0].bytes: an expression of 257 bytes exceeds the limit of 256"},
      {"an empty kernel name",
       [](v1::LaunchPlan& plan) { plan.mutable_launches(0)->clear_kernel(); },
       "launch_plan.launches[0].kernel: missing"},
      {"an empty grid expression",
       [](v1::LaunchPlan& plan) { plan.mutable_launches(0)->set_grid(0, ""); },
       "launch_plan.launches[0].grid[0]: empty expression"},
      {"an expression that does not parse",
       [](v1::LaunchPlan& plan) { plan.mutable_launches(0)->set_grid(1, "ceil_div(M,"); },
       "launch_plan.launches[0].grid[1]: syntax error: expected a number, a name or '(' at the "
       "end in 'ceil_div(M,' at position 12"},
      {"a NUL in the kernel name",
       [](v1::LaunchPlan& plan) {
         plan.mutable_launches(0)->set_kernel(std::string("gemm\0evil", 9));
       },
       "launch_plan.launches[0].kernel: contains a NUL byte (\\u0000)"},
      {"a newline in the kernel name",
       [](v1::LaunchPlan& plan) { plan.mutable_launches(0)->set_kernel("gemm\nINFO forged"); },
       "launch_plan.launches[0].kernel: contains a control character (byte 4)"},
      {"an argument without a kind",
       [](v1::LaunchPlan& plan) { plan.mutable_launches(0)->add_args(); },
       "launch_plan.launches[0].args[4]: an argument is an object with exactly one key: tensor, "
       "scratch, scalar or tensor_map"},
      {"an argument with an empty name",
       [](v1::LaunchPlan& plan) { plan.mutable_launches(0)->mutable_args(1)->set_tensor(""); },
       "launch_plan.launches[0].args[1].tensor: must not be empty"},
      {"an argument that is no identifier",
       [](v1::LaunchPlan& plan) { plan.mutable_launches(0)->mutable_args(3)->set_scalar("M+1"); },
       "launch_plan.launches[0].args[3].scalar: 'M+1' is not an identifier"},
      {"a duplicate scratch buffer",
       [](v1::LaunchPlan& plan) { *plan.add_scratch() = plan.scratch(0); },
       "launch_plan.scratch[1].name: duplicate scratch buffer 'w'"},
      {"a duplicate tensor map",
       [](v1::LaunchPlan& plan) { *plan.add_tensor_maps() = plan.tensor_maps(0); },
       "launch_plan.tensor_maps[1].name: duplicate tensor map 'a_tiles'"},
      {"an unknown swizzle",
       [](v1::LaunchPlan& plan) { plan.mutable_tensor_maps(0)->set_swizzle("96B"); },
       "launch_plan.tensor_maps[0].swizzle: '96B' is not one of \"none\", \"32B\", \"64B\", "
       "\"128B\""},
      {"32B interleave without the 32B swizzle",
       [](v1::LaunchPlan& plan) { plan.mutable_tensor_maps(0)->set_interleave("32B"); },
       "launch_plan.tensor_maps[0].swizzle: 32B interleave requires swizzle \"32B\""},
      {"JSON larger than the limit",
       [=](v1::LaunchPlan& plan) {
         launches(kMaxPlanLaunches)(plan);
         for (v1::Launch& launch : *plan.mutable_launches()) {
           launch.clear_args();
           for (size_t a = 0; a < kMaxPlanArgsPerLaunch; ++a) {
             launch.add_args()->set_tensor(std::string(kMaxPlanNameBytes, 'T'));
           }
         }
       },
       "launch_plan: the plan is "},  // Checked as a prefix.
  };
}

TEST_CASE("every plan limit is enforced at Submit over gRPC, with the engine's field path",
          "[api][plan]") {
  TestServer server;
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  for (const Case& c : LimitCases()) {
    v1::SubmitRequest request = ValidSubmit();
    *request.mutable_launch_plan() = GoodPlan();
    c.edit(*request.mutable_launch_plan());
    const grpc::Status status = Submit(server, vendor, request);
    INFO(c.what << ": " << status.error_message());
    if (c.expected.empty()) {
      CHECK(status.ok());
    } else {
      CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
      CHECK(status.error_message().rfind(c.expected, 0) == 0);
    }
    // The engine, given what the server would store, says the same.
    CHECK(EngineAnswer(request.launch_plan()) == ApiAnswer(request.launch_plan()));
  }
}

TEST_CASE("an accepted plan reaches the worker as JSON the engine reads", "[api][plan]") {
  TestServer server;
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  FakeWorker worker(server.channel(), server.CreateToken("fleet", v1::ROLE_WORKER), v1::ARCH_SM_90A,
                    "", /*compile_only=*/true);
  REQUIRE(worker.Register().ok());
  v1::SubmitRequest request = ValidSubmit();
  *request.mutable_launch_plan() = GoodPlan();
  REQUIRE(Submit(server, vendor, request).ok());
  worker.OpenLease(1);
  std::optional<v1::LeasedJob> job = worker.NextJob(absl::Seconds(15));
  REQUIRE(job.has_value());
  REQUIRE(job->has_launch_plan());
  absl::StatusOr<std::string> json = api::MessageToJson(job->launch_plan());
  REQUIRE(json.ok());
  PlanOr<LaunchPlan> plan = ParseLaunchPlanJson(*json);
  if (!plan.ok()) FAIL(plan.error().ToString());
  CHECK(plan.value().launches[0].kernel == "gemm");
  CHECK(plan.value().launches[0].grid ==
        std::vector<std::string>{"ceil_div(N, 128)", "ceil_div(M, 128)"});
  CHECK(plan.value().tensor_maps[0].swizzle == TensorMapSwizzle::k128B);
  CHECK(plan.value().scratch[0].bytes == "4 * M");
  REQUIRE(worker.Complete(*job, MakeVerdict(v1::VERDICT_CLASS_COMPILED)).ok());
}

// The plan's JSON keys are the proto messages' field names: a field added to or renamed in
// types.proto without common/launch_plan.cc would make the engine refuse every plan using it.
TEST_CASE("the plan's JSON keys are the proto's field names", "[api][plan]") {
  auto names = [](const google::protobuf::Descriptor* descriptor) {
    std::set<std::string> out;
    for (int i = 0; i < descriptor->field_count(); ++i) out.insert(descriptor->field(i)->name());
    return out;
  };
  auto keys = [](PlanObject object) {
    std::set<std::string> out;
    for (std::string_view key : PlanJsonKeys(object)) out.insert(std::string(key));
    return out;
  };
  CHECK(names(v1::LaunchPlan::descriptor()) == keys(PlanObject::kLaunchPlan));
  CHECK(names(v1::Launch::descriptor()) == keys(PlanObject::kLaunch));
  CHECK(names(v1::LaunchArgument::descriptor()) == keys(PlanObject::kArgument));
  CHECK(names(v1::ScratchSpec::descriptor()) == keys(PlanObject::kScratch));
  CHECK(names(v1::TensorMapSpec::descriptor()) == keys(PlanObject::kTensorMap));
  // Every argument field is one member of the oneof.
  const google::protobuf::OneofDescriptor* kind =
      v1::LaunchArgument::descriptor()->FindOneofByName("kind");
  REQUIRE(kind != nullptr);
  CHECK(kind->field_count() == v1::LaunchArgument::descriptor()->field_count());
}

// A random proto plan from parts that are valid or a little wrong.
v1::LaunchPlan RandomPlan(std::mt19937& rng) {
  const bool hostile = rng() % 2 == 0;
  auto odd = [&](size_t one_in) { return hostile && rng() % (one_in * 2) == 0; };
  auto pick = [&](const std::vector<std::string>& options) {
    return options[rng() % options.size()];
  };
  const std::vector<std::string> names = {"",
                                          "A",
                                          "9x",
                                          "a b",
                                          std::string("n\0n", 3),
                                          "k\x7f",
                                          std::string(kMaxPlanNameBytes + 1, 'n'),
                                          "Σ"};
  const std::vector<std::string> expressions = {"",
                                                "M*",
                                                "((1",
                                                "1.5",
                                                "N/0",
                                                "-0",
                                                "0x10",
                                                "M\t",
                                                std::string(300, '1'),
                                                "9223372036854775808"};
  const std::vector<std::string> choices = {"",    "none", "32B", "64B", "128B",  "256B",
                                            "16B", "zero", "nan", "NAN", "128B\n"};
  auto fill = [&](google::protobuf::RepeatedPtrField<std::string>* list, int max_count,
                  bool may_be_empty) {
    int count = may_be_empty ? static_cast<int>(rng() % (max_count + 1))
                             : 1 + static_cast<int>(rng() % max_count);
    if (odd(4)) count = static_cast<int>(rng() % (max_count + 3));
    for (int i = 0; i < count; ++i) *list->Add() = odd(4) ? pick(expressions) : "1";
  };
  v1::LaunchPlan plan;
  const int launches = odd(4) ? static_cast<int>(rng() % 18) : 1 + static_cast<int>(rng() % 3);
  for (int l = 0; l < launches; ++l) {
    v1::Launch* launch = plan.add_launches();
    launch->set_kernel(odd(6) ? pick(names) : "k");
    fill(launch->mutable_grid(), 3, false);
    fill(launch->mutable_block(), 3, false);
    if (rng() % 2 == 0) fill(launch->mutable_cluster(), 3, true);
    if (rng() % 2 == 0) launch->set_dynamic_shared_bytes(odd(3) ? pick(expressions) : "1024");
    const int args = odd(4) ? static_cast<int>(rng() % 70) : static_cast<int>(rng() % 4);
    for (int a = 0; a < args; ++a) {
      v1::LaunchArgument* arg = launch->add_args();
      const std::string name = odd(5) ? pick(names) : "A";
      switch (odd(8) ? 4 : rng() % 4) {
        case 0:
          arg->set_tensor(name);
          break;
        case 1:
          arg->set_scratch(name);
          break;
        case 2:
          arg->set_scalar(name);
          break;
        case 3:
          arg->set_tensor_map(name);
          break;
        default:
          break;  // No kind.
      }
    }
  }
  const int scratch = odd(4) ? static_cast<int>(rng() % 20) : static_cast<int>(rng() % 3);
  for (int i = 0; i < scratch; ++i) {
    v1::ScratchSpec* buffer = plan.add_scratch();
    buffer->set_name(odd(5) ? pick(names) : absl::StrCat("s", odd(5) ? 0 : i));
    buffer->set_bytes(odd(5) ? pick(expressions) : "64");
  }
  const int maps = odd(6) ? static_cast<int>(rng() % 36) : static_cast<int>(rng() % 3);
  for (int i = 0; i < maps; ++i) {
    v1::TensorMapSpec* map = plan.add_tensor_maps();
    map->set_name(odd(5) ? pick(names) : absl::StrCat("m", odd(5) ? 0 : i));
    map->set_tensor(odd(5) ? pick(names) : "A");
    fill(map->mutable_box(), 5, false);
    if (rng() % 2 == 0) fill(map->mutable_element_strides(), 5, true);
    if (rng() % 2 == 0) fill(map->mutable_dims(), 5, true);
    if (rng() % 2 == 0) map->set_swizzle(odd(3) ? pick(choices) : "128B");
    if (odd(3)) map->set_interleave(pick(choices));
    if (rng() % 2 == 0) map->set_l2_promotion(odd(3) ? pick(choices) : "256B");
    if (odd(3)) map->set_oob_fill(pick(choices));
  }
  return plan;
}

// The property behind one definition: a plan the API accepts parses in the engine, and a plan
// the engine refuses from the plan alone is refused by the API with the same field path.
TEST_CASE("API and engine agree on random plans", "[api][plan][fuzz]") {
  std::mt19937 rng(12);
  int accepted = 0;
  std::vector<v1::LaunchPlan> sample;
  for (int i = 0; i < 4000; ++i) {
    const v1::LaunchPlan plan = RandomPlan(rng);
    const std::string api = ApiAnswer(plan);
    INFO(plan.ShortDebugString().substr(0, 2000));
    CHECK(EngineAnswer(plan) == api);
    if (api.empty()) ++accepted;
    if (i % 40 == 0) sample.push_back(plan);
  }
  CHECK(accepted > 200);
  CHECK(accepted < 3800);

  // And over the wire: the server answers what ValidateLaunchPlan answers.
  TestServer server;
  const std::string vendor = server.CreateToken("acme", v1::ROLE_VENDOR);
  for (const v1::LaunchPlan& plan : sample) {
    v1::SubmitRequest request = ValidSubmit();
    *request.mutable_launch_plan() = plan;
    const grpc::Status status = Submit(server, vendor, request);
    const std::string api = ApiAnswer(plan);
    INFO(plan.ShortDebugString().substr(0, 2000));
    if (api.empty()) {
      CHECK(status.ok());
    } else {
      CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
      CHECK(status.error_message() == api);
    }
  }
}

}  // namespace
}  // namespace ptxbench::api_test
