// The report as a terminal table, as Markdown, and as one self-contained HTML page whose plots
// are inline SVG drawn here (no script, no stylesheet or font fetched from anywhere).
#ifndef PTXBENCH_CLIENT_REPORT_RENDER_H_
#define PTXBENCH_CLIENT_REPORT_RENDER_H_

#include <string>

#include "client/report/metrics.h"

namespace ptxbench::client::report {

// The marker appended to the arch of a group with runtime_unverified verdicts.
inline constexpr const char* kUnverifiedMarker = "\xE2\x80\xA0";  // U+2020 DAGGER.

std::string RenderTable(const Report& report);
std::string RenderMarkdown(const Report& report);
std::string RenderHtml(const Report& report);

}  // namespace ptxbench::client::report

#endif  // PTXBENCH_CLIENT_REPORT_RENDER_H_
