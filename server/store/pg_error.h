// Internal to server/store: maps libpqxx exceptions to absl::Status without exposing libpqxx
// in a header. Call ClassifyCurrentException() only inside a catch block.
#ifndef PTXBENCH_SERVER_STORE_PG_ERROR_H_
#define PTXBENCH_SERVER_STORE_PG_ERROR_H_

#include <string>

#include "absl/status/status.h"

namespace ptxbench::store::internal {

struct PgFailure {
  absl::Status status;
  // Serialization failures and deadlocks: running the whole transaction again may succeed.
  bool retryable = false;
  // The connection cannot be used again; the pool drops it and opens a new one on next use.
  bool connection_lost = false;
};

// The payload that marks a status whose write may or may not have committed (the connection
// broke while COMMIT, or a statement, was in flight). store.h's IsCommitOutcomeUnknown reads it.
inline constexpr char kOutcomeUnknownPayload[] = "type.ptxbench.dev/ptxbench.store.OutcomeUnknown";

// Classifies the exception being handled (rethrows and catches it):
//   broken connection, admin shutdown, 08xxx         -> UNAVAILABLE, connection_lost
//   connection lost during COMMIT (outcome unknown)  -> UNKNOWN, connection_lost, marked with
//                                                       kOutcomeUnknownPayload
//   40001 serialization failure, 40P01 deadlock      -> ABORTED, retryable
//   23505 unique violation                           -> ALREADY_EXISTS
//   23503 foreign key violation                      -> NOT_FOUND
//   23xxx other constraints, 22xxx data exceptions   -> INVALID_ARGUMENT
//   42501 insufficient privilege                     -> PERMISSION_DENIED
//   42P01 undefined table, 42703 undefined column    -> FAILED_PRECONDITION (not migrated)
//   55xxx object not in prerequisite state           -> FAILED_PRECONDITION
//   57014 query cancelled (statement_timeout)        -> DEADLINE_EXCEEDED
//   53xxx insufficient resources                     -> RESOURCE_EXHAUSTED
//   anything else                                    -> INTERNAL
// The message is "<context>: <PostgreSQL's message on one line>".
PgFailure ClassifyCurrentException(const std::string& context);

}  // namespace ptxbench::store::internal

#endif  // PTXBENCH_SERVER_STORE_PG_ERROR_H_
