// Text from callers in the server's log lines. Logs are key=value lines (docs/operations.md)
// that operators grep and collectors split at newlines, so a model name "x\nsubmission
// accepted submission_id=..." would forge a line (issue 12, "Low"). Every string a caller
// chose (model, session, hostname, reasons, error messages that quote request fields) goes
// through LogQuoted: in double quotes, with control characters, quotes, backslashes, C1
// controls, Unicode line separators and bytes that are not UTF-8 escaped, and cut to a bound.
#ifndef PTXBENCH_SERVER_API_LOG_TEXT_H_
#define PTXBENCH_SERVER_API_LOG_TEXT_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace ptxbench::api {

// The longest text one field of a log line carries; the rest is counted, not logged.
inline constexpr size_t kMaxLoggedTextBytes = 512;

// "\"" + escaped text + "\"": \n \r \t \" \\ as such, other bytes below 0x20 and 0x7f as
// \xNN, C1 controls and U+2028/U+2029 as \uNNNN, bytes outside well-formed UTF-8 as \xNN.
// Longer texts end with "...(+N bytes)" inside the quotes.
std::string LogQuoted(std::string_view text, size_t max_bytes = kMaxLoggedTextBytes);

}  // namespace ptxbench::api

#endif  // PTXBENCH_SERVER_API_LOG_TEXT_H_
