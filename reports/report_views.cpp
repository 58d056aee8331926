#include "report_views.h"

#include "html_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <set>

namespace detmoe::report {
namespace {

int rank(Verdict v) {
  switch (v) {
    case Verdict::kPass: return 0;
    case Verdict::kSkip: return 1;
    case Verdict::kWarn: return 2;
    case Verdict::kFail: return 3;
  }
  return 3;
}

std::size_t index_of(std::vector<std::string>& names, const std::string& name) {
  auto it = std::find(names.begin(), names.end(), name);
  if (it != names.end()) return it - names.begin();
  names.push_back(name);
  return names.size() - 1;
}

void merge(std::optional<VerdictCell>& cell, const CheckResult& c) {
  if (!cell) cell = VerdictCell{c.verdict, 0, {}};
  cell->verdict = worse(cell->verdict, c.verdict);
  cell->runs += 1;
  if (!c.detail.empty()) cell->details.push_back(c.detail);
}

std::set<std::string> baseline_names(const RunReport& r) {
  std::set<std::string> names;
  for (const BenchmarkResult& b : r.benchmarks)
    if (!b.baseline.empty()) names.insert(b.baseline);
  return names;
}

// Categories and series in first-seen order; later rows for the same cell replace earlier ones.
PlotData grouped(const RunReport& r, const std::function<std::optional<std::pair<std::string, double>>(const BenchmarkResult&)>& pick) {
  PlotData p;
  std::vector<std::string> series_names;
  struct Point { std::size_t cat, ser; double v; };
  std::vector<Point> points;
  for (const BenchmarkResult& b : r.benchmarks) {
    const auto cv = pick(b);
    if (!cv) continue;
    points.push_back({index_of(p.categories, cv->first), index_of(series_names, b.impl), cv->second});
  }
  const std::set<std::string> baselines = baseline_names(r);
  for (const std::string& name : series_names)
    p.series.push_back({name, baselines.count(name) > 0, std::vector<std::optional<double>>(p.categories.size())});
  for (const Point& pt : points) p.series[pt.ser].values[pt.cat] = pt.v;
  return p;
}

}  // namespace

Verdict worse(Verdict a, Verdict b) { return rank(a) >= rank(b) ? a : b; }

VerdictCounts count_verdicts(const std::vector<CheckResult>& checks) {
  VerdictCounts n;
  for (const CheckResult& c : checks) {
    switch (c.verdict) {
      case Verdict::kPass: ++n.pass; break;
      case Verdict::kFail: ++n.fail; break;
      case Verdict::kSkip: ++n.skip; break;
      case Verdict::kWarn: ++n.warn; break;
    }
  }
  return n;
}

VerdictGrid per_target_grid(const RunReport& r) {
  VerdictGrid g;
  bool any_cpu = false, any_node = false;
  std::set<int> gpus;
  for (const GpuRecord& gpu : r.inventory.gpus) gpus.insert(gpu.index);
  for (const CheckResult& c : r.checks) {
    any_cpu |= c.target.kind == TargetKind::kCpu;
    any_node |= c.target.kind == TargetKind::kNode;
    if (c.target.kind == TargetKind::kGpu) gpus.insert(c.target.gpus.begin(), c.target.gpus.end());
  }
  if (any_cpu) g.columns.push_back("cpu");
  if (any_node) g.columns.push_back("node");
  for (int i : gpus) g.columns.push_back(fmt::format("gpu{}", i));
  for (const CheckResult& c : r.checks) {
    if (c.target.kind == TargetKind::kPair) continue;
    const std::size_t row = index_of(g.rows, c.name);
    if (g.cells.size() <= row) g.cells.emplace_back(g.columns.size());
    const std::string col = c.target.kind == TargetKind::kGpu && c.target.gpus.size() == 1 ? fmt::format("gpu{}", c.target.gpus[0])
                                                                                            : to_string(c.target.kind);
    const auto it = std::find(g.columns.begin(), g.columns.end(), col);
    if (it != g.columns.end()) merge(g.cells[row][it - g.columns.begin()], c);
  }
  return g;
}

std::vector<PairGrid> pair_grids(const RunReport& r) {
  std::vector<PairGrid> grids;
  std::vector<std::string> names;
  std::set<int> gpu_set;
  for (const GpuRecord& gpu : r.inventory.gpus) gpu_set.insert(gpu.index);
  for (const CheckResult& c : r.checks)
    if (c.target.kind == TargetKind::kPair) gpu_set.insert(c.target.gpus.begin(), c.target.gpus.end());
  const std::vector<int> gpus(gpu_set.begin(), gpu_set.end());
  for (const CheckResult& c : r.checks) {
    if (c.target.kind != TargetKind::kPair || c.target.gpus.size() != 2) continue;
    const std::size_t k = index_of(names, c.name);
    if (grids.size() <= k)
      grids.push_back({c.name, gpus, std::vector<std::vector<std::optional<VerdictCell>>>(gpus.size(),
                                                                                          std::vector<std::optional<VerdictCell>>(gpus.size()))});
    const auto from = std::find(gpus.begin(), gpus.end(), c.target.gpus[0]) - gpus.begin();
    const auto to = std::find(gpus.begin(), gpus.end(), c.target.gpus[1]) - gpus.begin();
    merge(grids[k].cells[from][to], c);
  }
  return grids;
}

std::string benchmark_category(const BenchmarkResult& b) {
  std::string s = b.shape;
  if (b.routing != "balanced") s += " " + b.routing;
  if (b.ep_ranks > 1) s += fmt::format(" EP{}", b.ep_ranks);
  return s;
}

std::string quartile_range(const BenchmarkResult& b) {
  if (!b.p25_ms || !b.p75_ms) return "";
  return format_value(*b.p25_ms) + "–" + format_value(*b.p75_ms);
}

PlotData throughput_plot(const RunReport& r, BenchPass pass) {
  return grouped(r, [pass](const BenchmarkResult& b) -> std::optional<std::pair<std::string, double>> {
    if (b.pass != pass) return std::nullopt;
    return std::pair{benchmark_category(b), b.tflops};
  });
}

PlotData ceiling_plot(const RunReport& r) {
  return grouped(r, [](const BenchmarkResult& b) -> std::optional<std::pair<std::string, double>> {
    if (!b.fraction_of_ceiling) return std::nullopt;
    return std::pair{benchmark_category(b) + " " + to_string(b.pass), *b.fraction_of_ceiling * 100.0};
  });
}

}  // namespace detmoe::report
