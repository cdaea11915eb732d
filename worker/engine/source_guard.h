// The include gate. NVRTC resolves an #include it is not given by reading the file system
// (measured with NVRTC 13.0: `#include </etc/passwd>` compiled the file and echoed its first line
// in the log), so before NVRTC sees a source, every include-like directive of the source and of
// the headers must name one of the headers passed with it, with a clear refusal otherwise.
#ifndef PTXBENCH_WORKER_ENGINE_SOURCE_GUARD_H_
#define PTXBENCH_WORKER_ENGINE_SOURCE_GUARD_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace ptxbench {

// A header name a caller may pass: a relative name without "..", NUL or backslash.
// InvalidArgument otherwise (a bug of the caller, not of the submission).
absl::Status CheckHeaderName(const std::string& name);

// Refusal message for the first offending directive ("submission.cu:3: #include </etc/passwd>
// is refused: ..."), or nullopt when every #include names one of `headers`. Refused: includes of
// anything else, computed includes (#include MACRO), #include_next, #import, #embed,
// __has_include, directives other than the usual ones (#ident, ...), and lines NVRTC would read
// differently in compiled and skipped code (source_lexer.h), in the source and in every header,
// also inside #if 0 regions.
//
// This is the second line. The first is the compile jail (compile_jail.h): NVRTC runs where no
// host file exists, so that what this gate misses (a __has_include spelled by token pasting,
// say) finds nothing.
std::optional<std::string> CheckIncludes(std::string_view source, std::string_view source_name,
                                         const std::map<std::string, std::string>& headers);

}  // namespace ptxbench

#endif  // PTXBENCH_WORKER_ENGINE_SOURCE_GUARD_H_
