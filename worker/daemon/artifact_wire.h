// Conversion of compile artifacts (worker/engine/compile_artifact.h) between the engine and the
// wire (worker.proto CompileArtifact, ArtifactUse), in one place.
#ifndef PTXBENCH_WORKER_DAEMON_ARTIFACT_WIRE_H_
#define PTXBENCH_WORKER_DAEMON_ARTIFACT_WIRE_H_

#include "ptxbench/v1/worker.pb.h"
#include "worker/engine/compile_artifact.h"

namespace ptxbench::worker {

engine::CompileArtifact FromWire(const v1::CompileArtifact& artifact);
v1::CompileArtifact ToWire(const engine::CompileArtifact& artifact);
v1::ArtifactUse ToWire(const engine::ArtifactUse& use);

}  // namespace ptxbench::worker

#endif  // PTXBENCH_WORKER_DAEMON_ARTIFACT_WIRE_H_
