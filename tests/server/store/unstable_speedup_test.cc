// Unstable speedups in the ranking views (migrations/0011_unstable_speedups), against a real
// PostgreSQL: verdicts.speedup_stable is generated from the stored verdict JSON in both the
// forms it arrives in (protobuf JSON, which leaves a false flag out, and common/verdict.h
// ToJson, which writes it), an unstable TIC turn keeps its TIC but gives no speedup, fast_p or
// speed of light in leaderboard_results and benchmark_*, and 0011's down migration restores
// every view and column as they were before it.
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/store/store.h"
#include "tests/support/pg_fixture.h"
#include "tests/support/status_testing.h"

namespace ptxbench::store {
namespace {

namespace fs = std::filesystem;
using ::ptxbench::testing::MigrationsDir;
using ::ptxbench::testing::PgFixture;
using ::ptxbench::testing::TestDatabase;
using ::ptxbench::testing::ValueOrFail;

constexpr int kUnstableSpeedupsVersion = 11;

// The timing stage of a verdict's JSON with a roofline floor of 0.4 ms and a candidate median
// of 0.8 ms: a speed of light of 0.5 (benchmark_speed_of_light).
constexpr char kTimingStage[] =
    R"("stages": [{"stage": "STAGE_TIMING", "ok": true, "detail_json": )"
    R"("{\"roofline_floor_ms\": 0.4, \"timing\": {\"result\": {\"candidate\": )"
    R"({\"median_ms\": 0.8}}}}"}])";

// The sampling member of a verdict's JSON, as each writer writes it.
constexpr char kStableProtoJson[] =
    R"("sampling": {"stop_reason": "converged", "converged": true, "speedup_stable": true,)"
    R"( "candidate_scatter": 0.004, "baseline_scatter": 0.003})";
// Protobuf JSON leaves a false boolean out: this is an unstable speedup as the server stores it.
constexpr char kUnstableProtoJson[] =
    R"("sampling": {"stop_reason": "sample_cap", "candidate_scatter": 0.2,)"
    R"( "baseline_scatter": 0.003, "note": "the candidate's samples scatter"})";
constexpr char kUnstableToJson[] =
    R"("sampling": {"stop_reason": "sample_cap", "converged": false, "speedup_stable": false,)"
    R"( "candidate_scatter": 0.2, "baseline_scatter": 0.003, "note": ""})";

std::string Scalar(PgFixture& fixture, const std::string& sql) {
  return fixture.database().Scalar(sql).value().value_or("NULL");
}

class Judge {
 public:
  explicit Judge(Store& store) : store_(store) {
    TenantRow tenant;
    tenant.name = "acme";
    REQUIRE_OK(store_.CreateTenant(tenant));
    WorkerRegistration registration;
    registration.hostname = "gpu-host";
    registration.arch = v1::ARCH_SM_90A;
    registration.gpu_name = "NVIDIA H200";
    registration.gpu_uuid = "GPU-1";
    worker_ = ValueOrFail(store_.RegisterWorker(registration)).worker_id;
  }

  // Submits turn `turn_index` of trajectory `session` and judges it a TIC pass with `speedup`,
  // the verdict JSON holding `sampling` (empty: none). Returns the submission id.
  std::string Pass(const std::string& session, int turn_index, double speedup,
                   const std::string& sampling) {
    NewSubmission submission;
    submission.tenant = "acme";
    submission.task_id = "gemm_n7168_k5120";
    submission.task_version_hash = "3f2a9c";
    submission.arch = v1::ARCH_SM_90A;
    submission.language = v1::SOURCE_LANGUAGE_PTX;
    submission.source = absl::StrCat("// kernel ", session, " ", turn_index, "\n.version 8.7\n");
    submission.model = "test-model";
    submission.session_id = session;
    submission.turn_index = turn_index;
    submission.knowledge_level = v1::KNOWLEDGE_LEVEL_NONE;
    submission.scope = v1::EVALUATION_SCOPE_FULL;
    std::string id = ValueOrFail(store_.CreateSubmission(submission)).id;

    auto compile = ValueOrFail(store_.LeaseJob(worker_));
    REQUIRE(compile.has_value());
    VerdictRow compiled;
    compiled.verdict_class = v1::VERDICT_CLASS_COMPILED;
    compiled.compiled = true;
    REQUIRE_OK(store_.CompleteJob(compile->lease, compiled));
    auto evaluate = ValueOrFail(store_.LeaseJob(worker_));
    REQUIRE(evaluate.has_value());
    VerdictRow verdict;
    verdict.verdict_class = v1::VERDICT_CLASS_PASS;
    verdict.compiled = verdict.correct = verdict.target_executed = verdict.tic = true;
    verdict.speedup = speedup;
    verdict.verdict_json =
        absl::StrCat(R"({"verdict_class": "VERDICT_CLASS_PASS", "tic": true, )", R"("speedup": )",
                     speedup, ", ", kTimingStage, sampling.empty() ? "" : ", ", sampling, "}");
    REQUIRE_OK(store_.CompleteJob(evaluate->lease, verdict));
    return id;
  }

 private:
  Store& store_;
  std::string worker_;
};

TEST_CASE_METHOD(PgFixture, "an unstable speedup is no speedup in the ranking views",
                 "[store][views][unstable]") {
  auto store = ConnectStore();
  Judge judge(*store);
  // Trajectory "steady": one TIC turn, stable, 1.5.
  const std::string steady = judge.Pass("steady", 0, 1.5, kStableProtoJson);
  // Trajectory "scattered": one TIC turn whose samples scatter (as the server stores it): 3.0.
  const std::string scattered = judge.Pass("scattered", 0, 3.0, kUnstableProtoJson);
  // Trajectory "mixed": 0.8 stable at turn 1, then 2.5 unstable (as ToJson writes it) at turn
  // 2; and a verdict without sampling (not timed by a sampling harness) at turn 3, 1.1.
  judge.Pass("mixed", 0, 0.8, kStableProtoJson);
  const std::string mixed_unstable = judge.Pass("mixed", 1, 2.5, kUnstableToJson);
  const std::string no_sampling = judge.Pass("mixed", 2, 1.1, "");

  // The flag, generated from the stored JSON in every form it arrives in.
  auto stable = [&](const std::string& id) {
    return Scalar(*this, absl::StrCat("SELECT speedup_stable FROM verdicts WHERE submission_id = '",
                                      id, "'"));
  };
  CHECK(stable(steady) == "t");
  CHECK(stable(scattered) == "f");
  CHECK(stable(mixed_unstable) == "f");
  CHECK(stable(no_sampling) == "t");
  // The stored JSON still holds the speedup: the evidence is kept, only the rankings skip it.
  CHECK(Scalar(*this, absl::StrCat("SELECT speedup FROM verdicts WHERE submission_id = '",
                                   scattered, "'")) == "3");

  // Per turn: TIC stays; the unstable speedup and its speed of light are NULL.
  CHECK(Scalar(*this, absl::StrCat("SELECT tic::text || ' ' || coalesce(speedup::text, 'NULL') || "
                                   "' ' || coalesce(speed_of_light::text, 'NULL') FROM "
                                   "benchmark_turns WHERE submission_id = '",
                                   scattered, "'")) == "true NULL NULL");
  CHECK(Scalar(*this, absl::StrCat("SELECT speedup::text || ' ' || speed_of_light::text FROM "
                                   "benchmark_turns WHERE submission_id = '",
                                   steady, "'")) == "1.5 0.5");
  CHECK(Scalar(*this, absl::StrCat("SELECT coalesce(speedup::text, 'NULL') FROM "
                                   "leaderboard_results WHERE submission_id = '",
                                   mixed_unstable, "'")) == "NULL");
  CHECK(Scalar(*this, "SELECT count(*) FROM leaderboard_results WHERE tic") == "5");

  // Per trajectory: TIC@1 counts the unstable turn; fast_p and the speedups do not.
  std::map<std::string, std::string> rows;
  auto result = database().Sql(
      "SELECT trajectory, tic_at_1::text || ' ' || coalesce(best_tic_speedup::text, 'NULL') || "
      "' ' || tic_speedups || ' ' || round(exp(tic_log_speedup_sum / nullif(tic_speedups, 0))"
      "::numeric, 4)::text || ' ' || fast_1_0::text || ' ' || fast_0_5::text || ' ' || "
      "tic_speeds_of_light FROM benchmark_trajectories");
  REQUIRE(result.ok());
  for (const auto& row : result->rows) rows[row[0].value()] = row[1].value_or("NULL");
  CHECK(rows["steady"] == "true 1.5 1 1.5000 true true 1");
  // No clean speedup at all: TIC, but no best speedup, none counted, not fast, no SOL.
  CHECK(Scalar(*this,
               "SELECT tic_at_1::text || ' ' || coalesce(best_tic_speedup::text, 'NULL') "
               "|| ' ' || tic_speedups || ' ' || fast_0_5::text || ' ' || "
               "tic_speeds_of_light FROM benchmark_trajectories WHERE trajectory = "
               "'scattered'") == "true NULL 0 false 0");
  // 0.8 and 1.1 count (geometric mean sqrt(0.88)); 2.5 does not: best 1.1, fast_1.0 only
  // through 1.1.
  CHECK(rows["mixed"] == "true 1.1 2 0.9381 true true 2");
  CHECK(Scalar(*this,
               "SELECT fast_1_2::text FROM benchmark_trajectories WHERE trajectory = "
               "'mixed'") == "false");
}

// Every view's definition and every column of every table in the public schema.
std::map<std::string, std::string> Schema(const TestDatabase& database) {
  std::map<std::string, std::string> schema;
  auto views = database.Sql(
      "SELECT viewname, pg_get_viewdef(viewname::regclass, true) FROM pg_views "
      "WHERE schemaname = 'public'");
  REQUIRE(views.ok());
  for (const auto& row : views->rows) schema["view " + row[0].value()] = row[1].value_or("");
  auto columns = database.Sql(
      "SELECT table_name || '.' || column_name, concat_ws(' ', ordinal_position, data_type, "
      "is_nullable, column_default, is_generated, generation_expression) "
      "FROM information_schema.columns WHERE table_schema = 'public'");
  REQUIRE(columns.ok());
  for (const auto& row : columns->rows) schema["column " + row[0].value()] = row[1].value_or("");
  return schema;
}

TEST_CASE("0011's down migration restores the views and columns it changed",
          "[store][migrations][unstable]") {
  // The migrations before 0011 in a folder of their own: the state 0011 starts from.
  const fs::path before =
      fs::temp_directory_path() / absl::StrCat("ptxbench-before-0011-", getpid());
  fs::remove_all(before);
  fs::create_directories(before);
  int at_or_after = 0;  // Migrations of version >= 11: what undoing 0011 reverts.
  for (const auto& entry : fs::directory_iterator(MigrationsDir())) {
    const std::string name = entry.path().filename().string();
    const int version = std::stoi(name.substr(0, 4));  // NNNN_name.{up,down}.sql
    if (version < kUnstableSpeedupsVersion) {
      fs::copy_file(entry.path(), before / name);
    } else if (name.find(".up.sql") != std::string::npos) {
      ++at_or_after;
    }
  }
  REQUIRE(at_or_after >= 1);

  auto database = ValueOrFail(TestDatabase::Create(/*migrate=*/false));
  StoreOptions options;
  options.database_url = database->url();
  options.pool_size = 2;
  auto store = ValueOrFail(Store::Connect(options));
  REQUIRE_OK(store->MigrateUp(before.string()));
  const std::map<std::string, std::string> expected = Schema(*database);
  REQUIRE(expected.count("view benchmark_turns") == 1);
  REQUIRE(expected.count("column verdicts.speedup_stable") == 0);

  REQUIRE_OK(store->MigrateUp(MigrationsDir()));
  const std::map<std::string, std::string> up = Schema(*database);
  CHECK(up.count("column verdicts.speedup_stable") == 1);
  CHECK(up.count("column superseded_verdicts.speedup_stable") == 1);
  CHECK(up.at("view benchmark_turns") != expected.at("view benchmark_turns"));
  CHECK(up.at("view leaderboard_results") != expected.at("view leaderboard_results"));

  REQUIRE_OK(store->MigrateDown(MigrationsDir(), at_or_after));
  CHECK(ValueOrFail(store->SchemaVersion()) < kUnstableSpeedupsVersion);
  const std::map<std::string, std::string> down = Schema(*database);
  for (const auto& [name, definition] : expected) {
    INFO(name);
    REQUIRE(down.count(name) == 1);
    CHECK(down.at(name) == definition);
  }
  CHECK(down.size() == expected.size());
  fs::remove_all(before);
}

}  // namespace
}  // namespace ptxbench::store
