#include "worker/daemon/artifact_wire.h"

namespace ptxbench::worker {

engine::CompileArtifact FromWire(const v1::CompileArtifact& artifact) {
  engine::CompileArtifact out;
  out.cubin = artifact.cubin();
  out.ptx = artifact.ptx();
  out.cubin_sha256 = artifact.cubin_sha256();
  out.ptx_sha256 = artifact.ptx_sha256();
  out.compile_event_json = artifact.compile_event_json();
  out.nvrtc_version = artifact.nvrtc_version();
  out.ptxas_version = artifact.ptxas_version();
  out.harness_version = artifact.harness_version();
  out.producer_job_id = artifact.producer_job_id();
  out.producer_worker_id = artifact.producer_worker_id();
  return out;
}

v1::CompileArtifact ToWire(const engine::CompileArtifact& artifact) {
  v1::CompileArtifact out;
  out.set_cubin(artifact.cubin);
  out.set_ptx(artifact.ptx);
  out.set_cubin_sha256(artifact.cubin_sha256);
  out.set_ptx_sha256(artifact.ptx_sha256);
  out.set_compile_event_json(artifact.compile_event_json);
  out.set_nvrtc_version(artifact.nvrtc_version);
  out.set_ptxas_version(artifact.ptxas_version);
  out.set_harness_version(artifact.harness_version);
  // The producer is the server's to name (from the lease of the job that sends this).
  return out;
}

v1::ArtifactUse ToWire(const engine::ArtifactUse& use) {
  v1::ArtifactUse out;
  switch (use.outcome) {
    case engine::ArtifactOutcome::kNone:
      out.set_outcome(v1::ARTIFACT_OUTCOME_NONE);
      break;
    case engine::ArtifactOutcome::kUsed:
      out.set_outcome(v1::ARTIFACT_OUTCOME_USED);
      break;
    case engine::ArtifactOutcome::kVerifiedMatch:
      out.set_outcome(v1::ARTIFACT_OUTCOME_VERIFIED_MATCH);
      break;
    case engine::ArtifactOutcome::kMismatch:
      out.set_outcome(v1::ARTIFACT_OUTCOME_MISMATCH);
      break;
    case engine::ArtifactOutcome::kRefused:
      out.set_outcome(v1::ARTIFACT_OUTCOME_REFUSED);
      break;
  }
  out.set_detail(use.detail);
  return out;
}

}  // namespace ptxbench::worker
