// The run report as GitHub-flavoured Markdown: the same tables as the HTML page, no plots.
#include <fmt/format.h>

#include "detmoe/report.h"
#include "html_text.h"
#include "report_views.h"

namespace detmoe::report {
namespace {

std::string md(std::string_view s) { return markdown_escape(s); }

std::string verdict_cell(const std::optional<VerdictCell>& cell) {
  if (!cell) return " ";
  const std::string runs = cell->runs > 1 ? fmt::format(" ×{}", cell->runs) : "";
  // Bold Fail so it stands out in plain text too.
  return cell->verdict == Verdict::kFail ? "**Fail**" + runs : to_string(cell->verdict) + runs;
}

std::string header_row(const std::vector<std::string>& names) {
  std::string o = "|", rule = "|";
  for (const std::string& n : names) {
    o += " " + n + " |";
    rule += "---|";
  }
  return o + "\n" + rule + "\n";
}

}  // namespace

std::string render_markdown(const RunReport& r) {
  std::string o;
  std::string cmd;
  for (const std::string& a : r.run.command_line) cmd += (cmd.empty() ? "" : " ") + a;
  o += fmt::format("# DetMoE run report: {}\n\n", md(r.run.command));
  o += fmt::format("- command: {}\n- tool version: {}\n- git: {}\n- host: {}\n- started: {}, finished: {}, state: {}\n"
                   "- driver / runtime: {} / {}\n\n",
                   md(cmd), md(r.run.tool_version), r.run.git_sha.empty() ? "(not given)" : md(r.run.git_sha), md(r.run.host),
                   md(r.run.started_at), r.run.finished_at.empty() ? "—" : md(r.run.finished_at), to_string(r.run.state),
                   r.inventory.driver_version.empty() ? "—" : md(r.inventory.driver_version),
                   r.inventory.runtime_version.empty() ? "—" : md(r.inventory.runtime_version));
  if (r.run.state == RunState::kRunning)
    o += "> **This run did not finish**: the report was last written while it was running (it crashed, was killed, or is still going).\n\n";
  if (r.run.state == RunState::kAborted) o += "> **This run was aborted.**\n\n";

  o += "## Verdicts\n\n";
  const VerdictCounts n = count_verdicts(r.checks);
  if (n.total() == 0) {
    o += "No checks in this run.\n\n";
  } else {
    const char* word = n.fail ? "**FAIL**" : n.warn ? "PASS with warnings" : "PASS (for the checks that ran)";
    o += fmt::format("{}: {} checks — {} Pass, {} Fail, {} Warn, {} Skip\n\n", word, n.total(), n.pass, n.fail, n.warn, n.skip);
    const VerdictGrid g = per_target_grid(r);
    if (!g.rows.empty()) {
      std::vector<std::string> head{"check"};
      for (const std::string& c : g.columns) head.push_back(md(c));
      o += header_row(head);
      for (std::size_t i = 0; i < g.rows.size(); ++i) {
        o += fmt::format("| {} |", md(g.rows[i]));
        for (const auto& cell : g.cells[i]) o += fmt::format(" {} |", verdict_cell(cell));
        o += "\n";
      }
      o += "\n";
    }
    for (const PairGrid& p : pair_grids(r)) {
      o += fmt::format("Per GPU pair, {} (row sends to column):\n\n", md(p.check));
      std::vector<std::string> head{"from \\\\ to"};
      for (int gpu : p.gpus) head.push_back(fmt::format("gpu{}", gpu));
      o += header_row(head);
      for (std::size_t i = 0; i < p.gpus.size(); ++i) {
        o += fmt::format("| gpu{} |", p.gpus[i]);
        for (const auto& cell : p.cells[i]) o += fmt::format(" {} |", verdict_cell(cell));
        o += "\n";
      }
      o += "\n";
    }
    o += header_row({"check", "target", "verdict", "severity", "time", "detail"});
    for (const CheckResult& c : r.checks)
      o += fmt::format("| {} | {} | {} | {} | {} s | {} |\n", md(c.name), md(c.target.to_string()),
                       c.verdict == Verdict::kFail ? "**Fail**" : to_string(c.verdict), c.severity ? to_string(*c.severity) : "",
                       format_value(c.duration_s), md(c.detail));
    o += "\n";
  }

  o += "## GPUs\n\n";
  if (r.inventory.gpus.empty()) {
    o += fmt::format("No GPUs in this run{}.\n\n", r.inventory.unavailable_reason.empty() ? "" : ": " + md(r.inventory.unavailable_reason));
  } else {
    o += header_row({"#", "name", "UUID", "PCI bus", "SMs", "CC", "memory"});
    for (const GpuRecord& g : r.inventory.gpus)
      o += fmt::format("| {} | {} | {} | {} | {} | {} | {:.1f} GiB |\n", g.index, md(g.name), md(g.uuid), md(g.pci_bus_id), g.sm_count,
                       md(g.compute_capability), static_cast<double>(g.memory_bytes) / (1024.0 * 1024 * 1024));
    o += "\n";
  }

  o += "## Benchmarks\n\n";
  if (r.benchmarks.empty()) {
    o += "No benchmarks in this run.\n\n";
  } else {
    if (r.perf_ceiling)
      o += fmt::format("Ceiling: {} = {} TFLOP/s.\n\n", md(r.perf_ceiling->name), format_value(r.perf_ceiling->tflops));
    o += header_row({"impl", "shape", "routing", "pass", "EP", "median ms", "p25–p75 ms", "TFLOP/s", "vs baseline", "of ceiling",
                     "J/step", "reps"});
    for (const BenchmarkResult& b : r.benchmarks)
      o += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", md(b.impl), md(b.shape), md(b.routing),
                       md(to_string(b.pass)), b.ep_ranks, format_value(b.median_ms), quartile_range(b), format_value(b.tflops),
                       b.ratio_to_baseline ? fmt::format("{}× {}", format_value(*b.ratio_to_baseline), md(b.baseline)) : "",
                       b.fraction_of_ceiling ? fmt::format("{:.0f} %", *b.fraction_of_ceiling * 100) : "",
                       b.joules_per_step ? format_value(*b.joules_per_step) : "", b.repetitions);
    o += "\n";
  }

  o += "## GPU-to-GPU bandwidth\n\n";
  if (!r.bandwidth) {
    o += "No bandwidth measurement in this run.\n\n";
  } else {
    const BandwidthMatrix& m = *r.bandwidth;
    o += fmt::format("GB/s, row sends to column. Method: {}.{}\n\n", m.method.empty() ? "not stated" : md(m.method),
                     m.link_rate_gbps ? fmt::format(" Nominal link rate {} GB/s per direction.", format_value(*m.link_rate_gbps)) : "");
    std::vector<std::string> head{"from \\\\ to"};
    for (int g : m.gpus) head.push_back(fmt::format("gpu{}", g));
    o += header_row(head);
    for (std::size_t i = 0; i < m.gbps.size() && i < m.gpus.size(); ++i) {
      o += fmt::format("| gpu{} |", m.gpus[i]);
      for (const auto& v : m.gbps[i]) o += fmt::format(" {} |", v ? format_value(*v) : std::string("—"));
      o += "\n";
    }
    o += "\n";
  }

  o += "## Golden results\n\n";
  if (r.golden.empty()) {
    o += "No golden comparisons in this run.\n";
  } else {
    o += header_row({"case", "output", "bits", "expected hash", "actual hash", "first difference"});
    for (const GoldenResult& g : r.golden) {
      std::string diff;
      if (g.first_difference) {
        const GoldenDifference& d = *g.first_difference;
        std::string coords;
        for (std::int64_t c : d.coords) coords += (coords.empty() ? "" : ", ") + std::to_string(c);
        diff = fmt::format("element {}{}: expected {}, got {}", d.index, coords.empty() ? "" : " (" + coords + ")", md(d.expected),
                           md(d.actual));
      }
      o += fmt::format("| {} | {} | {} | {} | {} | {} |\n", md(g.case_name), md(g.output), g.match ? "same" : "**changed**",
                       md(g.expected_hash), md(g.actual_hash), diff);
    }
  }
  return o;
}

}  // namespace detmoe::report
