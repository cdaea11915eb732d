// What every binary says about itself (`--version`) and sends as its gRPC User-Agent: the
// harness version, the commit it was built from and the CUDA toolkit it was built against; and
// where the checkout's own folders (tasks/, migrations/) are, so that the three programs find
// the same defaults.
#ifndef PTXBENCH_COMMON_BUILD_INFO_H_
#define PTXBENCH_COMMON_BUILD_INFO_H_

#include <string>

namespace ptxbench {

// The harness version: bumped when a change alters what a verdict means. The one definition:
// every verdict carries it (Verdict::harness.engine) and the worker registers with it.
// 0.2.0: the strong TIC (work share, profiled path = timed path), dual tolerance rules.
inline constexpr char kHarnessVersion[] = "0.2.0";

// `git describe --always --dirty` of the tree at build time ("f920bac1d2e3", with "-dirty"
// when it had uncommitted changes), or "unknown" for a tree built without git.
std::string BuildCommit();
// The CUDA toolkit's version found at configure time ("13.0.48").
std::string CudaToolkitVersion();

// "ptxbench-worker 0.2.0 (commit f920bac1d2e3, CUDA toolkit 13.0.48)".
std::string VersionLine(const std::string& program);
// "ptxbench/0.2.0": the product token every gRPC channel of ours sends (gRPC appends its own).
std::string UserAgent();

// A folder of the source tree: ./<name> when the working folder has one, else the checkout
// this binary was built from, else <name> as given (an error then names it).
std::string SourceTreeDir(const std::string& name);

}  // namespace ptxbench

#endif  // PTXBENCH_COMMON_BUILD_INFO_H_
