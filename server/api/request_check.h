// Checks of a request's text before it is parsed: every string field, at any depth, must be
// well-formed UTF-8 and hold no NUL byte.
//
// Why before parsing: protobuf refuses a proto3 string that is not UTF-8 while parsing, and
// inside a generated handler gRPC then answers INTERNAL with no message; reading the wire
// bytes here names the field instead. Why NUL: PostgreSQL's text cannot hold it and libpq
// takes parameters as C strings, so "key\0a" and "key\0b" were stored as the same "key"
// (two idempotency keys collided, issue 12, "Low"); no field of the API has a use for it.
#ifndef PTXBENCH_SERVER_API_REQUEST_CHECK_H_
#define PTXBENCH_SERVER_API_REQUEST_CHECK_H_

#include <string_view>

#include "absl/status/status.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace ptxbench::api {

// INVALID_ARGUMENT "<field path>: contains a NUL byte (\u0000)" (kNulByteRefusal, the launch
// plan reader's words) or "...: not valid UTF-8 (byte N)", the path spelled as validate.h
// spells it ("launch_plan.launches[0].grid[1]").
// OK when every string field passes, and for bytes that are not a well-formed message (the
// parser then says so).
absl::Status CheckRequestText(const google::protobuf::Descriptor* descriptor,
                              std::string_view bytes);

// The same for a parsed message (serialises it first; for the small requests of the
// streaming calls, whose parsing gRPC does).
absl::Status CheckRequestText(const google::protobuf::Message& message);

}  // namespace ptxbench::api

#endif  // PTXBENCH_SERVER_API_REQUEST_CHECK_H_
