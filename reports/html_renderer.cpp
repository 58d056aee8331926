// The run report as one self-contained HTML page: inline CSS and SVG, no script, no external
// resource. The Content-Security-Policy makes the browser refuse (and log) anything else, which
// is what the headless-Chromium test listens for.
#include <fmt/format.h>

#include "detmoe/report.h"
#include "html_text.h"
#include "report_views.h"
#include "svg_charts.h"

namespace detmoe::report {
namespace {

constexpr const char* kStyle = R"css(
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1b1b1b; margin: 24px auto; max-width: 1120px; padding: 0 16px; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 18px; border-bottom: 1px solid #ddd; padding-bottom: 4px; margin-top: 32px; }
h3 { font-size: 15px; margin-top: 20px; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { border: 1px solid #d0d0d0; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.verdict { text-align: center; min-width: 52px; }
.v-Pass { background: #c8efd0; }
.v-Fail { background: #f5b5b5; font-weight: 700; }
.v-Skip { background: #e8e8e8; color: #555; }
.v-Warn { background: #fde3a0; }
.none { background: #fafafa; }
.banner { padding: 8px 12px; border-radius: 4px; margin: 10px 0; font-weight: 600; }
.banner.fail { background: #f5b5b5; }
.banner.warn { background: #fde3a0; }
.banner.pass { background: #c8efd0; }
.empty { color: #666; font-style: italic; }
.muted { color: #666; }
code { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12.5px; }
svg.plot { max-width: 100%; height: auto; display: block; margin: 12px 0; border: 1px solid #eee; }
)css";

std::string esc(std::string_view s) { return html_escape(s); }

std::string join_details(const std::vector<std::string>& details) {
  std::string s;
  for (const std::string& d : details) s += (s.empty() ? "" : "\n") + d;
  return s;
}

std::string verdict_td(const std::optional<VerdictCell>& cell) {
  if (!cell) return "<td class=\"verdict none\"></td>";
  const char* v = to_string(cell->verdict);
  const std::string runs = cell->runs > 1 ? fmt::format(" ×{}", cell->runs) : "";
  return fmt::format("<td class=\"verdict v-{}\" title=\"{}\">{}{}</td>", v, esc(join_details(cell->details)), v, runs);
}

std::string command_line(const RunInfo& r) {
  std::string s;
  for (const std::string& a : r.command_line) s += (s.empty() ? "" : " ") + a;
  return s;
}

std::string summary_banner(const RunReport& r) {
  const VerdictCounts n = count_verdicts(r.checks);
  std::string counts = fmt::format("{} checks: {} Pass, {} Fail, {} Warn, {} Skip", n.total(), n.pass, n.fail, n.warn, n.skip);
  std::string o;
  if (r.run.state == RunState::kRunning)
    o += "<p class=\"banner warn\">This run did not finish: the report was last written while it was running "
         "(it crashed, was killed, or is still going).</p>\n";
  if (r.run.state == RunState::kAborted) o += "<p class=\"banner fail\">This run was aborted.</p>\n";
  if (n.total() == 0) return o + "<p class=\"empty\">No checks in this run.</p>\n";
  const char* cls = n.fail ? "fail" : n.warn ? "warn" : "pass";
  const char* word = n.fail ? "FAIL" : n.warn ? "PASS with warnings" : "PASS (for the checks that ran)";
  return o + fmt::format("<p class=\"banner {}\" id=\"overall\">{} — {}</p>\n", cls, word, esc(counts));
}

std::string run_section(const RunReport& r) {
  const RunInfo& i = r.run;
  std::string o = "<section id=\"run\"><h2>Run</h2><table class=\"kv\">\n";
  auto row = [&](const char* k, const std::string& v, bool code = false) {
    o += fmt::format("<tr><th>{}</th><td>{}{}{}</td></tr>\n", k, code ? "<code>" : "", esc(v), code ? "</code>" : "");
  };
  row("command", command_line(i), true);
  row("tool version", i.tool_version);
  row("git", i.git_sha.empty() ? "(not given)" : i.git_sha, !i.git_sha.empty());
  row("host", i.host);
  row("started", i.started_at);
  row("finished", i.finished_at.empty() ? "—" : i.finished_at);
  row("state", to_string(i.state));
  row("driver / runtime", (r.inventory.driver_version.empty() ? "—" : r.inventory.driver_version) + " / " +
                              (r.inventory.runtime_version.empty() ? "—" : r.inventory.runtime_version));
  return o + "</table></section>\n";
}

std::string gpu_section(const RunReport& r) {
  std::string o = "<section id=\"gpus\"><h2>GPUs</h2>\n";
  if (r.inventory.gpus.empty()) {
    const std::string why = r.inventory.unavailable_reason.empty() ? "" : ": " + r.inventory.unavailable_reason;
    return o + fmt::format("<p class=\"empty\">No GPUs in this run{}.</p></section>\n", esc(why));
  }
  o += "<table><tr><th>#</th><th>name</th><th>UUID</th><th>PCI bus</th><th>SMs</th><th>CC</th><th>memory</th></tr>\n";
  for (const GpuRecord& g : r.inventory.gpus)
    o += fmt::format("<tr><td class=\"num\">{}</td><td>{}</td><td><code>{}</code></td><td><code>{}</code></td><td class=\"num\">{}</td>"
                     "<td>{}</td><td class=\"num\">{:.1f} GiB</td></tr>\n",
                     g.index, esc(g.name), esc(g.uuid), esc(g.pci_bus_id), g.sm_count, esc(g.compute_capability),
                     static_cast<double>(g.memory_bytes) / (1024.0 * 1024 * 1024));
  return o + "</table></section>\n";
}

std::string verdict_section(const RunReport& r) {
  std::string o = "<section id=\"verdicts\"><h2>Verdicts</h2>\n" + summary_banner(r);
  if (r.checks.empty()) return o + "</section>\n";
  const VerdictGrid g = per_target_grid(r);
  if (!g.rows.empty()) {
    o += "<h3>Per target</h3>\n<table class=\"verdicts\" id=\"verdict-grid\"><tr><th>check</th>";
    for (const std::string& c : g.columns) o += fmt::format("<th>{}</th>", esc(c));
    o += "</tr>\n";
    for (std::size_t i = 0; i < g.rows.size(); ++i) {
      o += fmt::format("<tr><th>{}</th>", esc(g.rows[i]));
      for (const auto& cell : g.cells[i]) o += verdict_td(cell);
      o += "</tr>\n";
    }
    o += "</table>\n";
  }
  for (const PairGrid& p : pair_grids(r)) {
    o += fmt::format("<h3>Per GPU pair: {}</h3>\n<table class=\"verdicts pairs\"><tr><th>from \\ to</th>", esc(p.check));
    for (int gpu : p.gpus) o += fmt::format("<th>gpu{}</th>", gpu);
    o += "</tr>\n";
    for (std::size_t i = 0; i < p.gpus.size(); ++i) {
      o += fmt::format("<tr><th>gpu{}</th>", p.gpus[i]);
      for (const auto& cell : p.cells[i]) o += verdict_td(cell);
      o += "</tr>\n";
    }
    o += "</table>\n";
  }
  o += "<h3>All checks</h3>\n<table id=\"checks\"><tr><th>check</th><th>target</th><th>verdict</th><th>severity</th><th>time</th>"
       "<th>detail</th></tr>\n";
  for (const CheckResult& c : r.checks)
    o += fmt::format("<tr><td>{}</td><td>{}</td><td class=\"verdict v-{}\">{}</td><td>{}</td><td class=\"num\">{} s</td><td>{}</td></tr>\n",
                     esc(c.name), esc(c.target.to_string()), to_string(c.verdict), to_string(c.verdict),
                     c.severity ? to_string(*c.severity) : "", format_value(c.duration_s), esc(c.detail));
  return o + "</table></section>\n";
}

std::string benchmark_section(const RunReport& r) {
  std::string o = "<section id=\"benchmarks\"><h2>Benchmarks</h2>\n";
  if (r.benchmarks.empty()) return o + "<p class=\"empty\">No benchmarks in this run.</p></section>\n";
  const std::optional<double> ceiling = r.perf_ceiling ? std::optional(r.perf_ceiling->tflops) : std::nullopt;
  const std::string ceiling_label = r.perf_ceiling ? fmt::format("ceiling {} TFLOP/s", format_value(r.perf_ceiling->tflops)) : "";
  for (BenchPass pass : {BenchPass::kForward, BenchPass::kForwardBackward}) {
    PlotData data = throughput_plot(r, pass);
    if (data.empty()) continue;
    const bool fwd = pass == BenchPass::kForward;
    o += bar_chart_svg({fwd ? "throughput-fwd" : "throughput-fwd-bwd",
                        fwd ? "Forward: TFLOP/s per shape" : "Forward + backward: TFLOP/s per shape", "TFLOP/s", "",
                        std::move(data), ceiling, ceiling_label});
  }
  if (PlotData data = ceiling_plot(r); !data.empty())
    o += bar_chart_svg({"fraction-of-ceiling", "Fraction of the dense-GEMM ceiling", "% of ceiling", "%", std::move(data), 100.0,
                        "100 %"});
  if (r.perf_ceiling)
    o += fmt::format("<p class=\"muted\">Ceiling: {} = {} TFLOP/s.</p>\n", esc(r.perf_ceiling->name),
                     format_value(r.perf_ceiling->tflops));
  o += "<table id=\"benchmark-table\"><tr><th>impl</th><th>shape</th><th>routing</th><th>pass</th><th>EP</th><th>median ms</th>"
       "<th>p25–p75 ms</th><th>TFLOP/s</th><th>vs baseline</th><th>of ceiling</th><th>J/step</th><th>reps</th></tr>\n";
  for (const BenchmarkResult& b : r.benchmarks) {
    const std::string ratio = b.ratio_to_baseline ? fmt::format("{}× {}", format_value(*b.ratio_to_baseline), b.baseline) : "";
    const std::string frac = b.fraction_of_ceiling ? fmt::format("{:.0f} %", *b.fraction_of_ceiling * 100) : "";
    o += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
                     "<td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td><td class=\"num\">{}</td>"
                     "<td class=\"num\">{}</td><td class=\"num\">{}</td></tr>\n",
                     esc(b.impl), esc(b.shape), esc(b.routing), to_string(b.pass), b.ep_ranks, format_value(b.median_ms),
                     quartile_range(b), format_value(b.tflops), esc(ratio), frac,
                     b.joules_per_step ? format_value(*b.joules_per_step) : "", b.repetitions);
  }
  return o + "</table></section>\n";
}

std::string bandwidth_section(const RunReport& r) {
  std::string o = "<section id=\"bandwidth\"><h2>GPU-to-GPU bandwidth</h2>\n";
  if (!r.bandwidth) return o + "<p class=\"empty\">No bandwidth measurement in this run.</p></section>\n";
  const BandwidthMatrix& m = *r.bandwidth;
  HeatMap map{"bandwidth", "Bandwidth GB/s (row sends to column)", "GB/s", {}, m.gbps, m.link_rate_gbps,
              m.link_rate_gbps ? "link rate" : "best measured"};
  for (int g : m.gpus) map.labels.push_back(fmt::format("gpu{}", g));
  o += heat_map_svg(map);
  o += fmt::format("<p class=\"muted\">Method: {}.{}</p>\n", esc(m.method.empty() ? "not stated" : m.method),
                   m.link_rate_gbps ? fmt::format(" Nominal link rate {} GB/s per direction.", format_value(*m.link_rate_gbps)) : "");
  return o + "</section>\n";
}

std::string golden_section(const RunReport& r) {
  std::string o = "<section id=\"golden\"><h2>Golden results</h2>\n";
  if (r.golden.empty()) return o + "<p class=\"empty\">No golden comparisons in this run.</p></section>\n";
  o += "<table id=\"golden-table\"><tr><th>case</th><th>output</th><th>bits</th><th>expected hash</th><th>actual hash</th>"
       "<th>first difference</th></tr>\n";
  for (const GoldenResult& g : r.golden) {
    std::string diff;
    if (g.first_difference) {
      const GoldenDifference& d = *g.first_difference;
      std::string coords;
      for (std::int64_t c : d.coords) coords += (coords.empty() ? "" : ", ") + std::to_string(c);
      diff = fmt::format("element {}{}: expected {}, got {}", d.index, coords.empty() ? "" : " [" + coords + "]", d.expected, d.actual);
    }
    o += fmt::format("<tr><td>{}</td><td>{}</td><td class=\"verdict v-{}\">{}</td><td><code>{}</code></td><td><code>{}</code></td>"
                     "<td>{}</td></tr>\n",
                     esc(g.case_name), esc(g.output), g.match ? "Pass" : "Fail", g.match ? "same" : "changed", esc(g.expected_hash),
                     esc(g.actual_hash), esc(diff));
  }
  return o + "</table></section>\n";
}

}  // namespace

std::string render_html(const RunReport& r) {
  const std::string title = fmt::format("DetMoE {} on {} — {}", r.run.command, r.run.host, r.run.started_at);
  std::string o;
  o += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  o += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n";
  o += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  o += fmt::format("<meta name=\"generator\" content=\"detmoe report ({})\">\n", kRunSchemaId);
  o += fmt::format("<title>{}</title>\n<style>{}</style>\n</head>\n<body>\n", esc(title), kStyle);
  o += fmt::format("<header><h1>DetMoE run report: <code>{}</code></h1><p class=\"muted\">{} · {} · {}</p></header>\n",
                   esc(r.run.command), esc(r.run.host), esc(r.run.started_at), esc(r.run.tool_version));
  o += verdict_section(r);
  o += run_section(r);
  o += gpu_section(r);
  o += benchmark_section(r);
  o += bandwidth_section(r);
  o += golden_section(r);
  o += fmt::format("<footer><p class=\"muted\">Rendered by <code>detmoe report render</code> from a {} document.</p></footer>\n",
                   kRunSchemaId);
  return o + "</body>\n</html>\n";
}

}  // namespace detmoe::report
