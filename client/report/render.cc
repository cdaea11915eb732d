#include "client/report/render.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

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

std::vector<std::string> HeaderCells(const Report& report) {
  std::vector<std::string> cells = {"model", "task", "arch", "knowledge", "n"};
  for (int limit : report.options.turn_limits) cells.push_back(absl::StrCat("TIC@", limit));
  cells.push_back("correct");
  cells.push_back("compiled");
  for (double p : report.options.fast_p) cells.push_back(FastPLabel(p));
  cells.insert(cells.end(), {"geomean", "best", "in tok/turn", "out tok/turn", "reason tok/turn"});
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
  cells.push_back(Speedup(g.best_speedup));
  cells.push_back(absl::StrFormat("%.0f", g.input_tokens_per_turn));
  cells.push_back(absl::StrFormat("%.0f", g.output_tokens_per_turn));
  cells.push_back(g.reasoning_tokens_per_turn.has_value()
                      ? absl::StrFormat("%.0f", *g.reasoning_tokens_per_turn)
                      : std::string("not reported"));
  return cells;
}

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

// Distinguishable colours for the plots' series (the Okabe-Ito palette, colour-blind safe).
constexpr const char* kPalette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                    "#E69F00", "#56B4E9", "#000000", "#F0E442"};

std::string SeriesName(const GroupMetrics& g) {
  return absl::StrCat(g.key.model, " / ", ArchCell(g), " / ", g.key.knowledge);
}

// Groups of one task, in report order.
std::map<std::string, std::vector<const GroupMetrics*>> ByTask(const Report& report) {
  std::map<std::string, std::vector<const GroupMetrics*>> tasks;
  for (const GroupMetrics& g : report.groups) tasks[g.key.task].push_back(&g);
  return tasks;
}

// TIC rate (y, 0..1) against the turn limit (x, 1..longest curve): one line per group.
std::string TicCurveSvg(const std::vector<const GroupMetrics*>& groups) {
  constexpr double kWidth = 760, kHeight = 300, kLeft = 50, kRight = 300, kTop = 15, kBottom = 40;
  const double plot_w = kWidth - kLeft - kRight;
  const double plot_h = kHeight - kTop - kBottom;
  size_t max_k = 1;
  for (const GroupMetrics* g : groups) max_k = std::max(max_k, g->tic_curve.size());
  const double span = max_k > 1 ? static_cast<double>(max_k - 1) : 1.0;
  auto x_of = [&](size_t k) { return kLeft + plot_w * static_cast<double>(k - 1) / span; };
  auto y_of = [&](double rate) { return kTop + plot_h * (1 - rate); };
  std::ostringstream svg;
  svg << absl::StrFormat(
      "<svg class=\"plot\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" role=\"img\">"
      "\n",
      kWidth, kHeight, kWidth, kHeight);
  for (double rate : {0.0, 0.25, 0.5, 0.75, 1.0}) {
    svg << absl::StrFormat(
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
        "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%.0f%%</text>\n",
        kLeft, y_of(rate), kLeft + plot_w, y_of(rate), kLeft - 6, y_of(rate) + 4, 100 * rate);
  }
  const size_t tick_step = max_k <= 16 ? 1 : (max_k + 15) / 16;
  for (size_t k = 1; k <= max_k; k += tick_step) {
    svg << absl::StrFormat(
        "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%d</text>\n", x_of(k),
        kTop + plot_h + 16, k);
  }
  svg << absl::StrFormat(
      "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\">turn limit (charged "
      "turns)</text>\n",
      kLeft + plot_w / 2, kHeight - 6);
  for (size_t i = 0; i < groups.size(); ++i) {
    const GroupMetrics& g = *groups[i];
    const char* colour = kPalette[i % std::size(kPalette)];
    std::vector<std::string> points;
    for (size_t k = 1; k <= g.tic_curve.size(); ++k) {
      points.push_back(absl::StrFormat("%.1f,%.1f", x_of(k), y_of(g.tic_curve[k - 1].value())));
    }
    svg << absl::StrFormat(
        "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"%s\"/>\n", colour,
        absl::StrJoin(points, " "));
    for (size_t k = 1; k <= g.tic_curve.size(); ++k) {
      svg << absl::StrFormat(
          "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>%s: TIC@%d = %s</title>"
          "</circle>\n",
          x_of(k), y_of(g.tic_curve[k - 1].value()), colour, EscapeHtml(SeriesName(g)), k,
          PercentWithCounts(g.tic_curve[k - 1]));
    }
    const double legend_y = kTop + 14 + 18 * static_cast<double>(i);
    svg << absl::StrFormat(
        "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/>"
        "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">%s</text>\n",
        kLeft + plot_w + 14, legend_y - 10, colour, kLeft + plot_w + 32, legend_y,
        EscapeHtml(SeriesName(g)));
  }
  svg << "</svg>\n";
  return svg.str();
}

// One row per group: a dot per TIC turn's speedup, a bar at the geometric mean, a dashed line
// at 1.0 (the library's speed).
std::string SpeedupStripSvg(const std::vector<const GroupMetrics*>& groups) {
  constexpr double kWidth = 760, kLeft = 300, kRight = 20, kTop = 10, kRow = 26, kBottom = 40;
  const double plot_w = kWidth - kLeft - kRight;
  const double height = kTop + kRow * static_cast<double>(groups.size()) + kBottom;
  double x_max = 1.5;
  for (const GroupMetrics* g : groups) {
    if (g->best_speedup.has_value()) x_max = std::max(x_max, *g->best_speedup * 1.1);
  }
  // Tick spacing of 1, 2 or 5 times a power of ten, about six ticks across.
  const double raw_step = x_max / 6;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw_step)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * magnitude >= raw_step) {
      step = m * magnitude;
      break;
    }
  }
  auto x_of = [&](double s) { return kLeft + plot_w * s / x_max; };
  const double axis_y = kTop + kRow * static_cast<double>(groups.size());
  std::ostringstream svg;
  svg << absl::StrFormat(
      "<svg class=\"plot\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" role=\"img\">"
      "\n",
      kWidth, height, kWidth, height);
  for (double s = 0; s <= x_max + 1e-9; s += step) {
    svg << absl::StrFormat(
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>"
        "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%g</text>\n",
        x_of(s), kTop, x_of(s), axis_y, x_of(s), axis_y + 16, s);
  }
  svg << absl::StrFormat(
      "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\" "
      "stroke-dasharray=\"4 3\"/>\n",
      x_of(1.0), kTop, x_of(1.0), axis_y);
  svg << absl::StrFormat(
      "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\">speedup over the "
      "library (TIC turns; dashed: 1.0, bar: geometric mean)</text>\n",
      kLeft + plot_w / 2, height - 6);
  for (size_t i = 0; i < groups.size(); ++i) {
    const GroupMetrics& g = *groups[i];
    const char* colour = kPalette[i % std::size(kPalette)];
    const double y = kTop + kRow * (static_cast<double>(i) + 0.5);
    svg << absl::StrFormat(
        "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%s</text>\n", kLeft - 8,
        y + 4, EscapeHtml(SeriesName(g)));
    if (g.tic_speedups.empty()) {
      svg << absl::StrFormat(
          "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" fill=\"#888\">no TIC turn</text>\n",
          kLeft + 6, y + 4);
      continue;
    }
    for (double s : g.tic_speedups) {
      svg << absl::StrFormat(
          "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\" fill-opacity=\"0.6\">"
          "<title>%.3f</title></circle>\n",
          x_of(s), y, colour, s);
    }
    svg << absl::StrFormat(
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"3\">"
        "<title>geometric mean %.3f</title></line>\n",
        x_of(*g.geomean_speedup), y - 9, x_of(*g.geomean_speedup), y + 9, colour,
        *g.geomean_speedup);
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
    "the speedups of all TIC turns. tok/turn: mean tokens per charged turn. Formulas: "
    "docs/metrics.md.";

}  // namespace

std::string RenderTable(const Report& report) {
  std::vector<std::vector<std::string>> rows = {HeaderCells(report)};
  for (const GroupMetrics& g : report.groups) rows.push_back(RowCells(report, g, false));
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
  if (report.groups.empty()) out << "(no trajectories)\n";
  if (AnyUnverified(report)) out << kUnverifiedMarker << " " << kUnverifiedNote << "\n";
  for (const std::string& warning : report.warnings) out << "warning: " << warning << "\n";
  return out.str();
}

std::string RenderMarkdown(const Report& report) {
  std::ostringstream out;
  out << "# PTXBench report\n\n"
      << report.files << " trajectory files, " << report.groups.size()
      << " (model, task, arch, knowledge) groups.\n\n";
  const std::vector<std::string> header = HeaderCells(report);
  out << "| " << absl::StrJoin(header, " | ") << " |\n|";
  for (size_t c = 0; c < header.size(); ++c) out << (c < 4 ? "---|" : "--:|");
  out << "\n";
  for (const GroupMetrics& g : report.groups) {
    std::vector<std::string> cells = RowCells(report, g, true);
    for (std::string& cell : cells) cell = EscapeMarkdown(cell);
    out << "| " << absl::StrJoin(cells, " | ") << " |\n";
  }
  out << "\n";
  if (AnyUnverified(report)) out << kUnverifiedMarker << " " << kUnverifiedNote << "\n\n";
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
  out << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      << "<title>PTXBench report</title>\n<style>\n"
      << "body{font-family:sans-serif;margin:2em;color:#222}"
      << "table{border-collapse:collapse;font-size:13px}"
      << "th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}"
      << "th{background:#f3f3f3}td.k{text-align:left}"
      << ".unverified{background:#fff4e0}.note{font-size:13px;color:#555;max-width:60em}\n"
      << "</style>\n</head>\n<body>\n<h1>PTXBench report</h1>\n";
  out << "<p>" << report.files << " trajectory files, " << report.groups.size()
      << " (model, task, arch, knowledge) groups.</p>\n<table>\n<tr>";
  for (const std::string& cell : HeaderCells(report)) out << "<th>" << EscapeHtml(cell) << "</th>";
  out << "</tr>\n";
  for (const GroupMetrics& g : report.groups) {
    out << (g.runtime_unverified_turns > 0 ? "<tr class=\"unverified\">" : "<tr>");
    std::vector<std::string> cells = RowCells(report, g, true);
    for (size_t c = 0; c < cells.size(); ++c) {
      out << (c < 4 ? "<td class=\"k\">" : "<td>") << EscapeHtml(cells[c]) << "</td>";
    }
    out << "</tr>\n";
  }
  out << "</table>\n";
  if (AnyUnverified(report)) {
    out << "<p class=\"note\">" << kUnverifiedMarker << " " << EscapeHtml(kUnverifiedNote)
        << "</p>\n";
  }
  out << "<p class=\"note\">" << EscapeHtml(kDefinitions) << "</p>\n";
  const auto tasks = ByTask(report);
  out << "<h2>TIC rate against turn limit</h2>\n";
  for (const auto& [task, groups] : tasks) {
    out << "<h3>" << EscapeHtml(task) << "</h3>\n" << TicCurveSvg(groups);
  }
  out << "<h2>Speedup distribution of TIC turns</h2>\n";
  for (const auto& [task, groups] : tasks) {
    out << "<h3>" << EscapeHtml(task) << "</h3>\n" << SpeedupStripSvg(groups);
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
