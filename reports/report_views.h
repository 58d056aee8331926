// The tables and plot series both renderers draw, derived once from a RunReport, so the HTML
// page and the Markdown summary cannot disagree.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "detmoe/report.h"

namespace detmoe::report {

struct VerdictCounts {
  int pass = 0, fail = 0, skip = 0, warn = 0;
  int total() const { return pass + fail + skip + warn; }
};
VerdictCounts count_verdicts(const std::vector<CheckResult>& checks);

// The verdict a cell shows when one check ran several times on one target: Fail > Warn > Skip > Pass.
Verdict worse(Verdict a, Verdict b);

struct VerdictCell {
  Verdict verdict = Verdict::kPass;
  int runs = 0;
  std::vector<std::string> details;
};

// Rows: check names (first-seen order); columns: "cpu", "node", then one per GPU.
struct VerdictGrid {
  std::vector<std::string> columns;
  std::vector<std::string> rows;
  std::vector<std::vector<std::optional<VerdictCell>>> cells;  // [row][column]
};
// Every check except pair checks (those get a GPU x GPU grid each).
VerdictGrid per_target_grid(const RunReport& report);

struct PairGrid {
  std::string check;
  std::vector<int> gpus;
  std::vector<std::vector<std::optional<VerdictCell>>> cells;  // [from][to], indices into gpus
};
std::vector<PairGrid> pair_grids(const RunReport& report);

// Grouped bars: one group per category, one bar per series.
struct PlotSeries {
  std::string name;
  bool baseline = false;  // named as another row's baseline: drawn muted
  std::vector<std::optional<double>> values;  // per category
};
struct PlotData {
  std::vector<std::string> categories;
  std::vector<PlotSeries> series;
  bool empty() const { return categories.empty(); }
};
// TFLOP/s per (shape, routing, EP) for one pass, one series per impl.
PlotData throughput_plot(const RunReport& report, BenchPass pass);
// Percent of the ceiling per (shape, pass) for the rows that have it.
PlotData ceiling_plot(const RunReport& report);

std::string benchmark_category(const BenchmarkResult& b);  // "qwen3-30b-a3b", "… zipf1", "… EP8"
std::string quartile_range(const BenchmarkResult& b);      // "2.99–3.01" (p25–p75 ms), "" when not measured

}  // namespace detmoe::report
