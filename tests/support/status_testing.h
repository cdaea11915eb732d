// absl::Status helpers for Catch2 tests. Catch2 v2 assertions are not thread-safe: use these
// on the test's main thread only.
#ifndef PTXBENCH_TESTS_SUPPORT_STATUS_TESTING_H_
#define PTXBENCH_TESTS_SUPPORT_STATUS_TESTING_H_

#include <catch2/catch.hpp>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ptxbench::testing {

inline const absl::Status& StatusOf(const absl::Status& status) { return status; }
template <typename T>
const absl::Status& StatusOf(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

// The value of `status_or`; fails the test (printing the status) when it is an error.
template <typename T>
T ValueOrFail(absl::StatusOr<T> status_or) {
  INFO(status_or.status().ToString());
  REQUIRE(status_or.ok());
  return *std::move(status_or);
}

}  // namespace ptxbench::testing

// REQUIRE_OK(status_or_statusor): fails the test with the status's text when not OK.
#define REQUIRE_OK(expr)                                                           \
  do {                                                                             \
    const ::absl::Status ptxbench_status_ = ::ptxbench::testing::StatusOf((expr)); \
    INFO(ptxbench_status_.ToString());                                             \
    REQUIRE(ptxbench_status_.ok());                                                \
  } while (false)

// REQUIRE_STATUS(expr, code): the status of `expr` has exactly `code` (an absl::StatusCode).
#define REQUIRE_STATUS(expr, expected_code)                                        \
  do {                                                                             \
    const ::absl::Status ptxbench_status_ = ::ptxbench::testing::StatusOf((expr)); \
    INFO(ptxbench_status_.ToString());                                             \
    REQUIRE(ptxbench_status_.code() == (expected_code));                           \
  } while (false)

#endif  // PTXBENCH_TESTS_SUPPORT_STATUS_TESTING_H_
