// Compile artifacts at the daemon's edges: the engine's artifact and report reach the wire
// whole (every outcome with a wire value: one without would be refused by the server as
// UNSPECIFIED), and --artifact-verify-fraction is checked and defaulted.
#include "worker/daemon/artifact_wire.h"

#include <catch2/catch.hpp>
#include <sstream>
#include <string>

#include "worker/daemon/worker_main.h"

namespace ptxbench::worker {
namespace {

TEST_CASE("a compile artifact crosses the wire whole; the producer is the server's to name",
          "[artifact]") {
  engine::CompileArtifact artifact;
  artifact.cubin = std::string({'\x7f', 'E', 'L', 'F', '\x00', '\xff'});
  artifact.ptx = ".version 8.7\n";
  artifact.cubin_sha256 = std::string(64, 'a');
  artifact.ptx_sha256 = std::string(64, 'b');
  artifact.compile_event_json = R"({"outcome": "compiled"})";
  artifact.nvrtc_version = "13.0.48";
  artifact.ptxas_version = "V13.0.48";
  artifact.harness_version = "0.3.0";
  artifact.producer_job_id = "job";
  artifact.producer_worker_id = "worker";
  const v1::CompileArtifact wire = ToWire(artifact);
  CHECK(wire.cubin() == artifact.cubin);
  CHECK(wire.ptx() == artifact.ptx);
  CHECK(wire.cubin_sha256() == artifact.cubin_sha256);
  CHECK(wire.ptx_sha256() == artifact.ptx_sha256);
  CHECK(wire.compile_event_json() == artifact.compile_event_json);
  CHECK(wire.nvrtc_version() == artifact.nvrtc_version);
  CHECK(wire.ptxas_version() == artifact.ptxas_version);
  CHECK(wire.harness_version() == artifact.harness_version);
  // A worker never names the producer: the server refuses an artifact that does.
  CHECK(wire.producer_job_id().empty());
  CHECK(wire.producer_worker_id().empty());

  v1::CompileArtifact leased = wire;
  leased.set_producer_job_id("compile-job");
  leased.set_producer_worker_id("compile-worker");
  const engine::CompileArtifact back = FromWire(leased);
  CHECK(back.cubin == artifact.cubin);
  CHECK(back.compile_event_json == artifact.compile_event_json);
  CHECK(back.harness_version == artifact.harness_version);
  CHECK(back.producer_job_id == "compile-job");
  CHECK(back.producer_worker_id == "compile-worker");
}

TEST_CASE("every artifact outcome has its wire value", "[artifact]") {
  const std::pair<engine::ArtifactOutcome, v1::ArtifactOutcome> outcomes[] = {
      {engine::ArtifactOutcome::kNone, v1::ARTIFACT_OUTCOME_NONE},
      {engine::ArtifactOutcome::kUsed, v1::ARTIFACT_OUTCOME_USED},
      {engine::ArtifactOutcome::kVerifiedMatch, v1::ARTIFACT_OUTCOME_VERIFIED_MATCH},
      {engine::ArtifactOutcome::kMismatch, v1::ARTIFACT_OUTCOME_MISMATCH},
      {engine::ArtifactOutcome::kRefused, v1::ARTIFACT_OUTCOME_REFUSED}};
  for (const auto& [outcome, wire] : outcomes) {
    INFO(engine::ArtifactOutcomeName(outcome));
    const v1::ArtifactUse use = ToWire(engine::ArtifactUse{outcome, "why"});
    CHECK(use.outcome() == wire);
    CHECK(use.detail() == "why");
  }
}

TEST_CASE("the flag --artifact-verify-fraction: 1/8 by default, 0 to 1, a warning at 0",
          "[artifact]") {
  std::ostringstream warnings;
  auto config = ParseWorkerFlags({"--server", "127.0.0.1:1"}, warnings);
  REQUIRE(config.ok());
  CHECK(config->executor.artifact_verify_fraction == 0.125);
  CHECK(warnings.str().find("artifact") == std::string::npos);

  config =
      ParseWorkerFlags({"--server", "127.0.0.1:1", "--artifact-verify-fraction", "1"}, warnings);
  REQUIRE(config.ok());
  CHECK(config->executor.artifact_verify_fraction == 1);

  for (const char* bad : {"1.5", "-0.1", "nan", "often"}) {
    INFO(bad);
    auto refused =
        ParseWorkerFlags({"--server", "127.0.0.1:1", "--artifact-verify-fraction", bad}, warnings);
    REQUIRE_FALSE(refused.ok());
    CHECK(std::string(refused.status().message()).find("--artifact-verify-fraction") !=
          std::string::npos);
  }

  config =
      ParseWorkerFlags({"--server", "127.0.0.1:1", "--artifact-verify-fraction", "0"}, warnings);
  REQUIRE(config.ok());
  CHECK(config->executor.artifact_verify_fraction == 0);
  CHECK(warnings.str().find("never caught") != std::string::npos);
}

}  // namespace
}  // namespace ptxbench::worker
