#include "client/report/render.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace ptxbench::client::report {
namespace {

constexpr const char* kUnverifiedNote =
    "runtime_unverified verdicts: the runtime stages (correctness, target instructions, timing) "
    "did not run for this arch on this service (no sm_100a GPU). Such a verdict never counts as "
    "TIC or correct, so a marked row's TIC, correctness and fast_p figures count only verified "
    "turns (all of them 0 when every verdict is unverified); 'compiled' counts every turn.";

std::string Percent(const Rate& rate) { return absl::StrFormat("%.1f%%", 100 * rate.value()); }

std::string PercentWithCounts(const Rate& rate) {
  return absl::StrFormat("%.1f%% (%d/%d)", 100 * rate.value(), rate.hits, rate.total);
}

std::string Speedup(const std::optional<double>& value) {
  return value.has_value() ? absl::StrFormat("%.3f", *value) : "-";
}

std::string ArchCell(const GroupMetrics& g) {
  return g.runtime_unverified_turns > 0 ? absl::StrCat(g.key.arch, kUnverifiedMarker) : g.key.arch;
}

bool AnyUnverified(const Report& report) {
  return std::any_of(report.groups.begin(), report.groups.end(),
                     [](const GroupMetrics& g) { return g.runtime_unverified_turns > 0; });
}

// Where the verdicts come from, and the turns the server judged otherwise than their files,
// each as one line: a figure in a paper must say whether it reflects re-judging.
std::vector<std::string> VerdictSourceLines(const VerdictSource& source) {
  if (!source.from_server) {
    return {
        "verdicts: as recorded in the trajectory files, not checked against the server: a "
        "re-judged submission shows the verdict it had when its turn ran and a submission marked "
        "hacked is counted (ptxbench report --server HOST:PORT uses the current verdicts)"};
  }
  std::vector<std::string> lines = {absl::StrFormat(
      "verdicts: the current verdicts on %s: %d turns' verdicts changed since their files were "
      "written (counted as they are now), %d turns marked hacked and %d turns without a current "
      "verdict (each left out of every figure: it keeps its place as a charged turn and credits "
      "nothing)",
      source.server, source.changed.size(), source.hacked.size(),
      source.without_current_verdict.size())};
  auto list = [&lines](const std::vector<ReportedTurn>& turns, const char* label) {
    for (const ReportedTurn& t : turns) {
      lines.push_back(absl::StrCat(label, ": ", t.file, " turn ", t.turn,
                                   t.submission_id.empty() ? "" : " (submission ", t.submission_id,
                                   t.submission_id.empty() ? "" : ")", ": ", t.what));
    }
  };
  list(source.changed, "changed");
  list(source.hacked, "marked hacked");
  list(source.without_current_verdict, "no current verdict");
  return lines;
}

// The groups with TIC turns whose speedup is no clean figure, one line each after a heading
// line; empty when there are none.
std::vector<std::string> UnstableSpeedupLines(const Report& report) {
  std::vector<std::string> lines;
  for (const GroupMetrics& g : report.groups) {
    if (g.tic_turns_unstable_speedup == 0) continue;
    lines.push_back(absl::StrFormat("%s %s %s %s: %d TIC turns", g.key.model, g.key.task,
                                    g.key.arch, g.key.knowledge, g.tic_turns_unstable_speedup));
  }
  if (!lines.empty()) {
    lines.insert(lines.begin(),
                 "unstable speedups (the candidate's timing samples scatter more than 4x the "
                 "library's): such a TIC turn counts as TIC, but its speedup is not counted (not "
                 "in geomean or best, never fast, no SOL):");
  }
  return lines;
}

std::string SpeedOfLightCell(const std::optional<double>& fraction) {
  return fraction.has_value() ? absl::StrFormat("%.1f%%", 100 * *fraction) : "-";
}

std::vector<std::string> HeaderCells(const Report& report) {
  std::vector<std::string> cells = {"model", "task", "arch", "knowledge", "n"};
  for (int limit : report.options.turn_limits) cells.push_back(absl::StrCat("TIC@", limit));
  cells.push_back("correct");
  cells.push_back("compiled");
  for (double p : report.options.fast_p) cells.push_back(FastPLabel(p));
  cells.insert(cells.end(),
               {"geomean", "SOL", "best", "in tok/turn", "out tok/turn", "reason tok/turn"});
  return cells;
}

std::vector<std::string> RowCells(const Report& report, const GroupMetrics& g, bool counts) {
  auto rate = [counts](const Rate& r) { return counts ? PercentWithCounts(r) : Percent(r); };
  std::vector<std::string> cells = {g.key.model, g.key.task, ArchCell(g), g.key.knowledge,
                                    absl::StrCat(g.trajectories)};
  for (size_t i = 0; i < report.options.turn_limits.size(); ++i) {
    cells.push_back(g.tic_at_limit[i].has_value() ? rate(*g.tic_at_limit[i]) : "n/a");
  }
  cells.push_back(rate(g.correct));
  cells.push_back(rate(g.compiled));
  for (const Rate& r : g.fast_p) cells.push_back(rate(r));
  cells.push_back(Speedup(g.geomean_speedup));
  cells.push_back(SpeedOfLightCell(g.geomean_speed_of_light));
  cells.push_back(Speedup(g.best_speedup));
  cells.push_back(absl::StrFormat("%.0f", g.input_tokens_per_turn));
  cells.push_back(absl::StrFormat("%.0f", g.output_tokens_per_turn));
  cells.push_back(g.reasoning_tokens_per_turn.has_value()
                      ? absl::StrFormat("%.0f", *g.reasoning_tokens_per_turn)
                      : std::string("not reported"));
  return cells;
}

// Compile-only groups: compile figures only (their submissions never ran on a GPU).
std::vector<std::string> CompileHeaderCells(const Report& report) {
  std::vector<std::string> cells = {"model", "task", "arch", "knowledge", "n"};
  for (int limit : report.options.turn_limits) cells.push_back(absl::StrCat("compiled@", limit));
  cells.insert(cells.end(), {"compiled", "compile repairs", "turns to compile"});
  return cells;
}

std::vector<std::string> CompileRowCells(const Report& report, const GroupMetrics& g, bool counts) {
  auto rate = [counts](const Rate& r) { return counts ? PercentWithCounts(r) : Percent(r); };
  std::vector<std::string> cells = {g.key.model, g.key.task, g.key.arch, g.key.knowledge,
                                    absl::StrCat(g.trajectories)};
  for (size_t i = 0; i < report.options.turn_limits.size(); ++i) {
    cells.push_back(g.compiled_at_limit[i].has_value() ? rate(*g.compiled_at_limit[i]) : "n/a");
  }
  cells.push_back(rate(g.compiled));
  cells.push_back(g.compile_repairs.total > 0 ? rate(g.compile_repairs) : "-");
  cells.push_back(g.mean_turns_to_compile.has_value()
                      ? absl::StrFormat("%.2f", *g.mean_turns_to_compile)
                      : "-");
  return cells;
}

std::string TextTable(const std::vector<std::vector<std::string>>& rows);

// Display width of UTF-8 text: one column per code point (the table holds no wide glyphs).
size_t Width(const std::string& text) {
  return static_cast<size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

std::string EscapeHtml(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string EscapeMarkdown(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|' || c == '\\') out += '\\';
    out += c == '\n' ? ' ' : c;
  }
  return out;
}

// Distinguishable colours for the plots' series (the Okabe-Ito palette, colour-blind safe),
// each also with its own dash pattern and marker, so that series stay apart in grey print.
constexpr const char* kPalette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                    "#E69F00", "#56B4E9", "#000000", "#999933"};
constexpr const char* kDashes[] = {"", "6 3", "2 2", "8 3 2 3", "4 4", "1 3", "10 4", "3 6"};

std::string Colour(size_t i) { return kPalette[i % std::size(kPalette)]; }
std::string Dash(size_t i) { return kDashes[(i / std::size(kPalette) + i) % std::size(kDashes)]; }

// Marker i at (x, y): circle, square, triangle, diamond, in turn.
std::string Marker(size_t i, double x, double y, const std::string& colour,
                   const std::string& title) {
  const std::string tip = absl::StrCat("<title>", EscapeHtml(title), "</title>");
  switch (i % 4) {
    case 0:
      return absl::StrFormat("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\">%s</circle>", x,
                             y, colour, tip);
    case 1:
      return absl::StrFormat(
          "<rect x=\"%.1f\" y=\"%.1f\" width=\"8\" height=\"8\" fill=\"%s\">%s</rect>", x - 4,
          y - 4, colour, tip);
    case 2:
      return absl::StrFormat("<path d=\"M%.1f %.1fl5 8.5h-10z\" fill=\"%s\">%s</path>", x, y - 5.5,
                             colour, tip);
    default:
      return absl::StrFormat("<path d=\"M%.1f %.1fl5 5l-5 5l-5 -5z\" fill=\"%s\">%s</path>", x,
                             y - 5, colour, tip);
  }
}

std::string SeriesName(const GroupMetrics& g) {
  return absl::StrCat(g.key.model, " / ", ArchCell(g), " / ", g.key.knowledge);
}

// Groups of one scope and one task, in report order.
std::map<std::string, std::vector<const GroupMetrics*>> ByTask(const Report& report,
                                                               bool compile_only) {
  std::map<std::string, std::vector<const GroupMetrics*>> tasks;
  for (const GroupMetrics* g : GroupsOfScope(report, compile_only)) tasks[g->key.task].push_back(g);
  return tasks;
}

std::string Slug(const std::string& text) {
  std::string out;
  for (char c : text) {
    out += std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '-';
  }
  return out;
}

// A legend below a plot: as wide as the page, one entry per series, wrapping as needed, so
// that long model names never squeeze the plot.
std::string Legend(const std::vector<const GroupMetrics*>& groups) {
  std::ostringstream out;
  out << "<ul class=\"legend\">";
  for (size_t i = 0; i < groups.size(); ++i) {
    out << absl::StrFormat(
        "<li><svg width=\"34\" height=\"12\" aria-hidden=\"true\"><line x1=\"1\" y1=\"6\" "
        "x2=\"33\" y2=\"6\" stroke=\"%s\" stroke-width=\"2.5\" stroke-dasharray=\"%s\"/>%s</svg>"
        "%s</li>",
        Colour(i), Dash(i), Marker(i, 17, 6, Colour(i), ""), EscapeHtml(SeriesName(*groups[i])));
  }
  out << "</ul>\n";
  return out.str();
}

// A rate (y, 0..1) against the turn limit (x, 1..longest curve), one line per group with its
// 95 % Wilson interval as a bar at each point. Series that coincide are drawn side by side
// (dodged by a fraction of a turn), so that no curve hides another.
std::string CurveSvg(const std::vector<const GroupMetrics*>& groups, bool compile,
                     const std::string& label) {
  constexpr double kWidth = 1300, kHeight = 360, kLeft = 64, kRight = 20, kTop = 16, kBottom = 46;
  const double plot_w = kWidth - kLeft - kRight;
  const double plot_h = kHeight - kTop - kBottom;
  auto curve_of = [compile](const GroupMetrics* g) -> const std::vector<Rate>& {
    return compile ? g->compile_curve : g->tic_curve;
  };
  size_t max_k = 1;
  for (const GroupMetrics* g : groups) max_k = std::max(max_k, curve_of(g).size());
  const double step = plot_w / static_cast<double>(max_k);
  const double dodge = std::min(10.0, 0.5 * step / static_cast<double>(groups.size() + 1));
  auto x_of = [&](size_t k, size_t series) {
    const double centre = kLeft + step * (static_cast<double>(k) - 0.5);
    return centre +
           dodge * (static_cast<double>(series) - 0.5 * (static_cast<double>(groups.size()) - 1.0));
  };
  auto y_of = [&](double rate) { return kTop + plot_h * (1 - rate); };
  std::ostringstream svg;
  svg << absl::StrFormat(
      "<svg class=\"plot\" viewBox=\"0 0 %.0f %.0f\" role=\"img\" aria-label=\"%s\">\n", kWidth,
      kHeight, EscapeHtml(label));
  for (double rate : {0.0, 0.25, 0.5, 0.75, 1.0}) {
    svg << absl::StrFormat(
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
        "<text x=\"%.1f\" y=\"%.1f\" font-size=\"14\" text-anchor=\"end\">%.0f%%</text>\n",
        kLeft, y_of(rate), kLeft + plot_w, y_of(rate), kLeft - 8, y_of(rate) + 5, 100 * rate);
  }
  const size_t tick_step = max_k <= 16 ? 1 : (max_k + 15) / 16;
  for (size_t k = 1; k <= max_k; k += tick_step) {
    svg << absl::StrFormat(
        "<text x=\"%.1f\" y=\"%.1f\" font-size=\"14\" text-anchor=\"middle\">%d</text>\n",
        kLeft + step * (static_cast<double>(k) - 0.5), kTop + plot_h + 20, k);
  }
  svg << absl::StrFormat(
      "<text x=\"%.1f\" y=\"%.1f\" font-size=\"14\" text-anchor=\"middle\">turn limit L "
      "(charged turns, 1-based)</text>\n",
      kLeft + plot_w / 2, kHeight - 6);
  for (size_t i = 0; i < groups.size(); ++i) {
    const std::vector<Rate>& curve = curve_of(groups[i]);
    const std::string colour = Colour(i);
    std::vector<std::string> points;
    for (size_t k = 1; k <= curve.size(); ++k) {
      points.push_back(absl::StrFormat("%.1f,%.1f", x_of(k, i), y_of(curve[k - 1].value())));
    }
    svg << absl::StrFormat(
        "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2.5\" stroke-dasharray=\"%s\" "
        "points=\"%s\"/>\n",
        colour, Dash(i), absl::StrJoin(points, " "));
    for (size_t k = 1; k <= curve.size(); ++k) {
      const Interval ci = WilsonInterval(curve[k - 1]);
      svg << absl::StrFormat(
          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
          "stroke-opacity=\"0.45\" stroke-width=\"1.5\"/>",
          x_of(k, i), y_of(ci.low), x_of(k, i), y_of(ci.high), colour);
      svg << Marker(i, x_of(k, i), y_of(curve[k - 1].value()), colour,
                    absl::StrFormat("%s: %s@%d = %s (95%% CI %.0f-%.0f%%)", SeriesName(*groups[i]),
                                    compile ? "compiled" : "TIC", k,
                                    PercentWithCounts(curve[k - 1]), 100 * ci.low, 100 * ci.high))
          << "\n";
    }
  }
  svg << "</svg>\n";
  return svg.str();
}

// The shared speedup axis: every task's strip uses the same log-scaled range, so that a task
// with one fast kernel does not look like one with many slow ones. Powers of two bound it.
struct LogAxis {
  double low = 0.25;
  double high = 4;
};

LogAxis SharedSpeedupAxis(const Report& report) {
  LogAxis axis;
  for (const GroupMetrics& g : report.groups) {
    for (double s : g.tic_speedups) {
      axis.low = std::min(axis.low, std::pow(2.0, std::floor(std::log2(s))));
      axis.high = std::max(axis.high, std::pow(2.0, std::ceil(std::log2(s))));
    }
  }
  if (axis.high <= axis.low) axis.high = axis.low * 2;
  return axis;
}

// One row per group: a dot per TIC turn's speedup on the shared log axis, a bar at the
// geometric mean, the library's speed (1) dashed, and beside each row its geometric-mean
// speedup and fraction of the speed of light.
std::string SpeedupStripSvg(const std::vector<const GroupMetrics*>& groups, const LogAxis& axis,
                            const std::string& label) {
  constexpr double kWidth = 1300, kLeft = 40, kRight = 250, kTop = 12, kRow = 30, kBottom = 46;
  const double plot_w = kWidth - kLeft - kRight;
  const double height = kTop + kRow * static_cast<double>(groups.size()) + kBottom;
  const double span = std::log2(axis.high) - std::log2(axis.low);
  auto x_of = [&](double s) {
    return kLeft +
           plot_w * (std::log2(std::clamp(s, axis.low, axis.high)) - std::log2(axis.low)) / span;
  };
  const double axis_y = kTop + kRow * static_cast<double>(groups.size());
  std::ostringstream svg;
  svg << absl::StrFormat(
      "<svg class=\"plot\" viewBox=\"0 0 %.0f %.0f\" role=\"img\" aria-label=\"%s\">\n", kWidth,
      height, EscapeHtml(label));
  for (double s = axis.low; s <= axis.high * 1.0001; s *= 2) {
    svg << absl::StrFormat(
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>"
        "<text x=\"%.1f\" y=\"%.1f\" font-size=\"14\" text-anchor=\"middle\">%g</text>\n",
        x_of(s), kTop, x_of(s), axis_y, x_of(s), axis_y + 20, s);
  }
  svg << absl::StrFormat(
      "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#666\" "
      "stroke-dasharray=\"5 4\"/>\n",
      x_of(1.0), kTop, x_of(1.0), axis_y);
  svg << absl::StrFormat(
      "<text x=\"%.1f\" y=\"%.1f\" font-size=\"14\" text-anchor=\"middle\">speedup over the "
      "library, log scale shared by every task (dots: TIC turns; bar: geometric mean; dashed: "
      "the library)</text>\n",
      kLeft + plot_w / 2, height - 6);
  for (size_t i = 0; i < groups.size(); ++i) {
    const GroupMetrics& g = *groups[i];
    const std::string colour = Colour(i);
    const double y = kTop + kRow * (static_cast<double>(i) + 0.5);
    svg << absl::StrFormat(
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#f3f3f3\"/>", kLeft, y,
        kLeft + plot_w, y);
    std::string side = "no TIC turn";
    if (g.geomean_speedup.has_value()) {
      side = absl::StrFormat("%.3fx", *g.geomean_speedup);
      if (g.geomean_speed_of_light.has_value()) {
        absl::StrAppend(&side, absl::StrFormat(", %.0f%% of SOL", 100 * *g.geomean_speed_of_light));
      }
    }
    svg << Marker(i, kLeft + plot_w + 16, y, colour, SeriesName(g))
        << absl::StrFormat("<text x=\"%.1f\" y=\"%.1f\" font-size=\"14\">%s</text>\n",
                           kLeft + plot_w + 28, y + 5, EscapeHtml(side));
    for (double s : g.tic_speedups) {
      svg << absl::StrFormat(
          "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"%s\" fill-opacity=\"0.55\">"
          "<title>%s: %.3f</title></circle>\n",
          x_of(s), y, colour, EscapeHtml(SeriesName(g)), s);
    }
    if (g.geomean_speedup.has_value()) {
      svg << absl::StrFormat(
          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
          "stroke-width=\"4\"><title>geometric mean %.3f</title></line>\n",
          x_of(*g.geomean_speedup), y - 11, x_of(*g.geomean_speedup), y + 11, colour,
          *g.geomean_speedup);
    }
  }
  svg << "</svg>\n";
  return svg.str();
}

constexpr const char* kDefinitions =
    "TIC@L: fraction of trajectories with a TIC turn (pass, target instructions executed, "
    "runtime verified) among their first L charged turns (infrastructure-failed turns are not "
    "charged); n/a when a trajectory's budget is below L. correct / compiled: fraction of "
    "trajectories with a correct / compiled charged turn. fast_p: fraction of trajectories "
    "with a TIC turn whose speedup is at least p. geomean / best: geometric mean / maximum of "
    "the speedups of all TIC turns. SOL: geometric mean over TIC turns of the roofline floor "
    "over the kernel's median time (the speed of light reached). A TIC turn whose timing "
    "samples were unstable (scatter > 4x the library's) has no speedup in fast_p, geomean, best "
    "or SOL. Bracketed ranges: 95 % Wilson "
    "intervals. tok/turn: mean tokens per charged turn. Compile-only runs (never evaluated on a "
    "GPU) have compile figures only: compiled@L, compiled, compile repairs (of the trajectories "
    "whose first turn did not compile, those that compiled later) and the mean turn of the first "
    "compiling turn. Formulas: docs/metrics.md.";

std::string TextTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], Width(row[c]));
  }
  std::ostringstream out;
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) {
      out << row[c];
      if (c + 1 < row.size()) out << std::string(widths[c] - Width(row[c]) + 2, ' ');
    }
    out << "\n";
  }
  return out.str();
}

std::string MarkdownTable(const std::vector<std::string>& header,
                          const std::vector<std::vector<std::string>>& rows) {
  std::ostringstream out;
  out << "| " << absl::StrJoin(header, " | ") << " |\n|";
  for (size_t c = 0; c < header.size(); ++c) out << (c < 4 ? "---|" : "--:|");
  out << "\n";
  for (std::vector<std::string> cells : rows) {
    for (std::string& cell : cells) cell = EscapeMarkdown(cell);
    out << "| " << absl::StrJoin(cells, " | ") << " |\n";
  }
  return out.str();
}

std::string ProvenanceLines(const Provenance& p, const std::string& bullet) {
  std::ostringstream out;
  auto line = [&](const std::string& what, const std::string& value) {
    out << bullet << what << ": " << value << "\n";
  };
  auto list = [](const std::vector<std::string>& values) {
    return values.empty() ? std::string("not recorded") : absl::StrJoin(values, "; ");
  };
  line("report generated", p.generated_at);
  line("trajectories started", p.first_started_at == p.last_started_at
                                   ? p.first_started_at
                                   : p.first_started_at + " to " + p.last_started_at);
  line("ptxbench (client) version", list(p.client_versions));
  line("evaluation harness", list(p.harness_versions));
  line("GPUs", list(p.gpus));
  line("server", list(p.servers));
  line("task versions", list(p.task_versions));
  line("model settings", list(p.model_settings));
  return out.str();
}

// A rate cell of the HTML table: the percentage, then the counts and the 95 % interval small.
std::string HtmlRateCell(const std::optional<Rate>& rate) {
  if (!rate.has_value()) return "<td>n/a</td>";
  const Interval ci = WilsonInterval(*rate);
  return absl::StrFormat(
      "<td title=\"%d/%d; 95%% Wilson interval %.1f&ndash;%.1f%%\">%s<span class=\"ci\">"
      "%.0f&ndash;%.0f%%</span></td>",
      rate->hits, rate->total, 100 * ci.low, 100 * ci.high, Percent(*rate), 100 * ci.low,
      100 * ci.high);
}

std::string HtmlKeyCells(const GroupMetrics& g) {
  return absl::StrCat("<td class=\"k model\">", EscapeHtml(g.key.model), "</td><td class=\"k\">",
                      EscapeHtml(g.key.task), "</td><td class=\"k\">", EscapeHtml(ArchCell(g)),
                      "</td><td class=\"k\">", EscapeHtml(g.key.knowledge), "</td><td>",
                      g.trajectories, "</td>");
}

}  // namespace

std::string RenderTable(const Report& report) {
  std::ostringstream out;
  const auto full = GroupsOfScope(report, /*compile_only=*/false);
  const auto compile = GroupsOfScope(report, /*compile_only=*/true);
  if (!full.empty()) {
    std::vector<std::vector<std::string>> rows = {HeaderCells(report)};
    for (const GroupMetrics* g : full) rows.push_back(RowCells(report, *g, false));
    out << TextTable(rows);
  }
  if (!compile.empty()) {
    if (!full.empty()) out << "\n";
    out << "compile-only runs (no GPU evaluation: compile figures only)\n";
    std::vector<std::vector<std::string>> rows = {CompileHeaderCells(report)};
    for (const GroupMetrics* g : compile) rows.push_back(CompileRowCells(report, *g, false));
    out << TextTable(rows);
  }
  if (report.groups.empty()) out << "(no trajectories)\n";
  if (AnyUnverified(report)) out << kUnverifiedMarker << " " << kUnverifiedNote << "\n";
  for (const std::string& line : UnstableSpeedupLines(report)) out << line << "\n";
  for (const std::string& line : VerdictSourceLines(report.verdicts)) out << line << "\n";
  for (const std::string& warning : report.warnings) out << "warning: " << warning << "\n";
  return out.str();
}

std::string RenderMarkdown(const Report& report) {
  std::ostringstream out;
  out << "# PTXBench report\n\n"
      << report.files << " trajectory files, " << report.groups.size()
      << " (model, task, arch, knowledge, scope) groups.\n\n## Provenance\n\n"
      << ProvenanceLines(report.provenance, "- ") << "\n## Verdicts\n\n";
  {
    const std::vector<std::string> lines = VerdictSourceLines(report.verdicts);
    out << EscapeMarkdown(lines.front()) << "\n\n";
    for (size_t i = 1; i < lines.size(); ++i) out << "- " << EscapeMarkdown(lines[i]) << "\n";
    if (lines.size() > 1) out << "\n";
  }
  const auto full = GroupsOfScope(report, false);
  const auto compile = GroupsOfScope(report, true);
  if (!full.empty()) {
    out << "## Full scope\n\n";
    std::vector<std::vector<std::string>> rows;
    rows.reserve(full.size());
    for (const GroupMetrics* g : full) rows.push_back(RowCells(report, *g, true));
    out << MarkdownTable(HeaderCells(report), rows) << "\n";
    out << "95 % Wilson intervals of the rates:\n\n";
    for (const GroupMetrics* g : full) {
      std::vector<std::string> parts;
      for (size_t i = 0; i < report.options.turn_limits.size(); ++i) {
        if (!g->tic_at_limit[i].has_value()) continue;
        const Interval ci = WilsonInterval(*g->tic_at_limit[i]);
        parts.push_back(absl::StrFormat("TIC@%d %.1f-%.1f%%", report.options.turn_limits[i],
                                        100 * ci.low, 100 * ci.high));
      }
      const Interval correct = WilsonInterval(g->correct);
      parts.push_back(
          absl::StrFormat("correct %.1f-%.1f%%", 100 * correct.low, 100 * correct.high));
      out << "- " << EscapeMarkdown(SeriesName(*g) + " / " + g->key.task) << ": "
          << absl::StrJoin(parts, ", ") << "\n";
    }
    out << "\n";
  }
  if (!compile.empty()) {
    out << "## Compile-only runs\n\n";
    std::vector<std::vector<std::string>> rows;
    rows.reserve(compile.size());
    for (const GroupMetrics* g : compile) rows.push_back(CompileRowCells(report, *g, true));
    out << MarkdownTable(CompileHeaderCells(report), rows) << "\n";
  }
  if (AnyUnverified(report)) out << kUnverifiedMarker << " " << kUnverifiedNote << "\n\n";
  if (const std::vector<std::string> unstable = UnstableSpeedupLines(report); !unstable.empty()) {
    out << EscapeMarkdown(unstable.front()) << "\n\n";
    for (size_t i = 1; i < unstable.size(); ++i) out << "- " << EscapeMarkdown(unstable[i]) << "\n";
    out << "\n";
  }
  out << kDefinitions << "\n";
  if (!report.warnings.empty()) {
    out << "\n## Warnings\n\n";
    for (const std::string& warning : report.warnings) {
      out << "- " << EscapeMarkdown(warning) << "\n";
    }
  }
  return out.str();
}

std::string RenderHtml(const Report& report) {
  std::ostringstream out;
  // Laid out for a 1400 px wide window (a slide, a paper figure): the page is at most 1360 px
  // wide, tables are fixed to it and wrap long model names, plots scale to it (viewBox).
  out << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      << "<meta name=\"viewport\" content=\"width=device-width\">\n"
      << "<title>PTXBench report</title>\n<style>\n"
      << "body{font-family:'DejaVu Sans',Arial,sans-serif;margin:0 auto;padding:20px;"
         "max-width:1360px;box-sizing:border-box;color:#222}"
      << "h1{font-size:26px}h2{font-size:20px;margin-top:1.6em}h3{font-size:16px}"
      << "table{border-collapse:collapse;font-size:13px;width:100%;table-layout:fixed;"
         "margin:0.5em 0}"
      << "th,td{border:1px solid #ccc;padding:3px 5px;text-align:right;vertical-align:top;"
         "overflow-wrap:anywhere}"
      << "th{background:#f3f3f3;font-weight:600;font-size:12px;overflow-wrap:normal}"
         "td.k{text-align:left}"
      << "col.model{width:16%}col.task{width:12%}col.arch{width:5%}col.knowledge{width:6%}"
         "col.n{width:3%}"
      << ".ci{display:block;font-size:11px;color:#666}"
      << ".unverified{background:#fff4e0}.note{font-size:13px;color:#555;max-width:80em}"
      << "dl.provenance{display:grid;grid-template-columns:220px 1fr;gap:2px 12px;"
         "font-size:13px}dl.provenance dt{font-weight:600}dl.provenance dd{margin:0;"
         "overflow-wrap:anywhere}"
      << "figure{margin:0.8em 0 1.6em 0}figcaption{font-size:14px;font-weight:600;"
         "margin-bottom:4px}svg.plot{width:100%;height:auto;display:block}"
      << "ul.turns{overflow-wrap:anywhere}"
      << "ul.legend{list-style:none;padding:0;margin:4px 0;font-size:13px;display:flex;"
         "flex-wrap:wrap;gap:4px 18px}ul.legend li{display:flex;align-items:center;gap:6px;"
         "overflow-wrap:anywhere}\n"
      << "</style>\n</head>\n<body>\n<h1>PTXBench report</h1>\n";
  out << "<p>" << report.files << " trajectory files, " << report.groups.size()
      << " (model, task, arch, knowledge, scope) groups.</p>\n";
  out << "<h2>Provenance</h2>\n<dl class=\"provenance\" id=\"provenance\">\n";
  {
    std::istringstream lines(ProvenanceLines(report.provenance, ""));
    for (std::string line; std::getline(lines, line);) {
      const size_t colon = line.find(": ");
      // One value per line: several versions or settings must stand out, not run together.
      out << "<dt>" << EscapeHtml(line.substr(0, colon)) << "</dt><dd>"
          << absl::StrReplaceAll(EscapeHtml(line.substr(colon + 2)), {{"; ", "<br>"}}) << "</dd>\n";
    }
  }
  out << "</dl>\n";
  {
    const std::vector<std::string> lines = VerdictSourceLines(report.verdicts);
    out << "<h2>Verdicts</h2>\n<p class=\"note\" id=\"verdict-source\">"
        << EscapeHtml(lines.front()) << "</p>\n";
    if (lines.size() > 1) {
      out << "<ul class=\"note turns\">\n";
      for (size_t i = 1; i < lines.size(); ++i) out << "<li>" << EscapeHtml(lines[i]) << "</li>\n";
      out << "</ul>\n";
    }
  }

  const auto full = GroupsOfScope(report, false);
  const auto compile = GroupsOfScope(report, true);
  if (!full.empty()) {
    out << "<h2>Full scope</h2>\n<table id=\"figures\">\n<colgroup><col class=\"model\">"
           "<col class=\"task\"><col class=\"arch\"><col class=\"knowledge\"><col class=\"n\">";
    const size_t rest = report.options.turn_limits.size() + 2 + report.options.fast_p.size() + 3;
    for (size_t c = 0; c < rest; ++c) out << "<col>";
    out << "</colgroup>\n<tr>";
    std::vector<std::string> header = {"model", "task", "arch", "knowledge", "n"};
    for (int limit : report.options.turn_limits) header.push_back(absl::StrCat("TIC@", limit));
    header.insert(header.end(), {"correct", "compiled"});
    for (double p : report.options.fast_p) header.push_back(FastPLabel(p));
    header.insert(header.end(), {"geomean speedup", "% of SOL", "best speedup"});
    for (const std::string& cell : header) out << "<th>" << EscapeHtml(cell) << "</th>";
    out << "</tr>\n";
    for (const GroupMetrics* g : full) {
      out << (g->runtime_unverified_turns > 0 ? "<tr class=\"unverified\">" : "<tr>")
          << HtmlKeyCells(*g);
      for (const std::optional<Rate>& r : g->tic_at_limit) out << HtmlRateCell(r);
      out << HtmlRateCell(g->correct) << HtmlRateCell(g->compiled);
      for (const Rate& r : g->fast_p) out << HtmlRateCell(r);
      out << "<td>" << Speedup(g->geomean_speedup) << "</td><td>"
          << SpeedOfLightCell(g->geomean_speed_of_light) << "</td><td>" << Speedup(g->best_speedup)
          << "</td></tr>\n";
    }
    out << "</table>\n";
    out << "<h3>Cost per charged turn</h3>\n<table id=\"tokens\">\n<colgroup><col class=\"model\">"
           "<col class=\"task\"><col class=\"arch\"><col class=\"knowledge\"><col "
           "class=\"n\"><col><col><col><col><col></colgroup>\n<tr>";
    for (const char* cell :
         {"model", "task", "arch", "knowledge", "n", "charged turns", "infra-failed turns",
          "in tok/turn", "out tok/turn", "reason tok/turn"}) {
      out << "<th>" << cell << "</th>";
    }
    out << "</tr>\n";
    for (const GroupMetrics* g : full) {
      out << "<tr>" << HtmlKeyCells(*g)
          << absl::StrFormat("<td>%d</td><td>%d</td><td>%.0f</td><td>%.0f</td><td>%s</td></tr>\n",
                             g->charged_turns, g->infra_failed_turns, g->input_tokens_per_turn,
                             g->output_tokens_per_turn,
                             g->reasoning_tokens_per_turn.has_value()
                                 ? absl::StrFormat("%.0f", *g->reasoning_tokens_per_turn)
                                 : std::string("not reported"));
    }
    out << "</table>\n";
  }
  if (!compile.empty()) {
    out << "<h2>Compile-only runs</h2>\n<p class=\"note\">Never evaluated on a GPU: compile "
           "figures only, never mixed with the full scope.</p>\n<table id=\"compile-figures\">\n"
           "<colgroup><col class=\"model\"><col class=\"task\"><col class=\"arch\"><col "
           "class=\"knowledge\"><col class=\"n\">";
    for (size_t c = 0; c < report.options.turn_limits.size() + 3; ++c) out << "<col>";
    out << "</colgroup>\n<tr>";
    for (const std::string& cell : CompileHeaderCells(report)) {
      out << "<th>" << EscapeHtml(cell) << "</th>";
    }
    out << "</tr>\n";
    for (const GroupMetrics* g : compile) {
      out << "<tr>" << HtmlKeyCells(*g);
      for (const std::optional<Rate>& r : g->compiled_at_limit) out << HtmlRateCell(r);
      out << HtmlRateCell(g->compiled)
          << (g->compile_repairs.total > 0 ? HtmlRateCell(g->compile_repairs) : "<td>-</td>")
          << "<td>"
          << (g->mean_turns_to_compile.has_value()
                  ? absl::StrFormat("%.2f", *g->mean_turns_to_compile)
                  : "-")
          << "</td></tr>\n";
    }
    out << "</table>\n";
  }
  if (AnyUnverified(report)) {
    out << "<p class=\"note\">" << kUnverifiedMarker << " " << EscapeHtml(kUnverifiedNote)
        << "</p>\n";
  }
  if (const std::vector<std::string> unstable = UnstableSpeedupLines(report); !unstable.empty()) {
    out << "<p class=\"note\" id=\"unstable-speedups\">" << EscapeHtml(unstable.front())
        << "</p>\n<ul class=\"note\">\n";
    for (size_t i = 1; i < unstable.size(); ++i) {
      out << "<li>" << EscapeHtml(unstable[i]) << "</li>\n";
    }
    out << "</ul>\n";
  }
  out << "<p class=\"note\">" << EscapeHtml(kDefinitions) << "</p>\n";

  const auto tasks = ByTask(report, false);
  if (!tasks.empty()) {
    out << "<h2>TIC rate against turn limit</h2>\n";
    for (const auto& [task, groups] : tasks) {
      const std::string caption = absl::StrCat(task, ": TIC rate within L turns, 95 % intervals");
      out << "<figure id=\"tic-curve-" << Slug(task) << "\"><figcaption>" << EscapeHtml(caption)
          << "</figcaption>\n"
          << CurveSvg(groups, false, caption) << Legend(groups) << "</figure>\n";
    }
    const LogAxis axis = SharedSpeedupAxis(report);
    out << "<h2>Speedups of TIC turns</h2>\n";
    for (const auto& [task, groups] : tasks) {
      const std::string caption = absl::StrCat(task, ": speedup of every TIC turn");
      out << "<figure id=\"speedups-" << Slug(task) << "\"><figcaption>" << EscapeHtml(caption)
          << "</figcaption>\n"
          << SpeedupStripSvg(groups, axis, caption) << Legend(groups) << "</figure>\n";
    }
  }
  const auto compile_tasks = ByTask(report, true);
  if (!compile_tasks.empty()) {
    out << "<h2>Compile-only: compiled within a turn limit</h2>\n";
    for (const auto& [task, groups] : compile_tasks) {
      const std::string caption = absl::StrCat(task, ": compiled within L turns, compile-only");
      out << "<figure id=\"compile-curve-" << Slug(task) << "\"><figcaption>" << EscapeHtml(caption)
          << "</figcaption>\n"
          << CurveSvg(groups, true, caption) << Legend(groups) << "</figure>\n";
    }
  }
  if (!report.warnings.empty()) {
    out << "<h2>Warnings</h2>\n<ul>\n";
    for (const std::string& warning : report.warnings) {
      out << "<li>" << EscapeHtml(warning) << "</li>\n";
    }
    out << "</ul>\n";
  }
  out << "</body>\n</html>\n";
  return out.str();
}

}  // namespace ptxbench::client::report
