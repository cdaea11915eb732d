// What one stored verdict may carry. A worker's verdict is stored as its JSON and replayed to
// every watcher, so its size is the server's memory and the database's rows: a module with
// thousands of kernels made the compile stage's detail (kernel list, per-kernel resources)
// as large as the request limit allowed (issue 12, "Low").
//
// Basis: the largest honest details seen, the H200 repair loop of 2026-11-30
// (docs/results/2026-11-30-h200-repair-loop), are 10.9 KB (a correctness stage) and a
// 3.6 KB report; the bounds below leave 20x room. A detail or report over its bound is
// replaced by a marker object {"truncated": true, "original_bytes": N, "limit_bytes": M,
// "head": "<its first 16 KiB>"} and the stage's summary says so; the verdict's class, flags
// and numbers are never touched. A verdict with more stages than the four a job can produce
// (twice that, for room) is refused.
#ifndef PTXBENCH_SERVER_API_VERDICT_BOUNDS_H_
#define PTXBENCH_SERVER_API_VERDICT_BOUNDS_H_

#include <cstddef>

#include "absl/status/status.h"
#include "ptxbench/v1/types.pb.h"

namespace ptxbench::api {

inline constexpr size_t kMaxStoredDetailBytes = 256 << 10;
inline constexpr size_t kMaxStoredReportBytes = 256 << 10;
inline constexpr size_t kTruncatedHeadBytes = 16 << 10;
inline constexpr int kMaxVerdictStages = 8;

// Truncates detail_json (with the marker) when over kMaxStoredDetailBytes.
void BoundStageResult(v1::StageResult* result);
// Every stage as above, report_json against kMaxStoredReportBytes; INVALID_ARGUMENT
// "verdict.stages: ..." for more than kMaxVerdictStages stages.
absl::Status BoundVerdict(v1::Verdict* verdict);

}  // namespace ptxbench::api

#endif  // PTXBENCH_SERVER_API_VERDICT_BOUNDS_H_
