// Status helpers shared by every component. Abseil 20220623 (Debian 12) has no
// ABSL_RETURN_IF_ERROR, so the project defines its own pair of macros.
#ifndef PTXBENCH_COMMON_STATUS_H_
#define PTXBENCH_COMMON_STATUS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define PTXBENCH_STATUS_CONCAT_INNER_(a, b) a##b
#define PTXBENCH_STATUS_CONCAT_(a, b) PTXBENCH_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function when `expr` (an absl::Status) is not OK.
#define RETURN_IF_ERROR(expr)                            \
  do {                                                   \
    ::absl::Status ptxbench_status_ = (expr);            \
    if (!ptxbench_status_.ok()) return ptxbench_status_; \
  } while (false)

#define PTXBENCH_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                    \
  if (!tmp.ok()) return std::move(tmp).status();        \
  lhs = std::move(tmp).value()

// `ASSIGN_OR_RETURN(auto x, StatusOrExpr());` declares x from the value or returns the error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  PTXBENCH_ASSIGN_OR_RETURN_IMPL_(PTXBENCH_STATUS_CONCAT_(ptxbench_statusor_, __LINE__), lhs, expr)

namespace ptxbench {

// Prefixes a non-OK status's message with context, keeping its code:
// "loading tasks/gemm/task.json: field 'axes': ...".
absl::Status Annotate(const absl::Status& status, std::string_view context);

}  // namespace ptxbench

#endif  // PTXBENCH_COMMON_STATUS_H_
