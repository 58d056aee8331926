#include "megakernel/host/layer_trace.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <limits>
#include <vector>

#include "detmoe/median.h"
#include "megakernel/layer/device_error.h"
#include "megakernel/layer/tile_form.h"

namespace detmoe::mk {
namespace {

// Task kind names, indexed by TaskKind (0: unknown).
constexpr std::array<const char*, 19> kNames = {
    "?",              "plan",            "dispatch",       "GEMM1",          "shared GEMM1",
    "GEMM2+combine",  "shared GEMM2",    "weighted sum",   "bwd start",      "bwd dy dispatch",
    "bwd shared da",  "bwd da+dSwiGLU",  "bwd shared dx",  "bwd dx+scatter", "bwd d_x sum",
    "bwd dW_down",    "bwd dWs_down",    "bwd dW_gate_up", "bwd dWs_gate_up"};
static_assert(kNames.size() == static_cast<size_t>(TaskKind::kSharedWgradGateUp) + 1, "a name per task kind");

const char* kind_name(uint64_t task) {
  return kNames[std::min<size_t>(static_cast<size_t>(task_kind(task)), kNames.size() - 1)];
}

double mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

}  // namespace

TraceSummary summarize_trace(const std::vector<LayerTaskTrace>& trace) {
  TraceSummary s;
  if (trace.empty()) return s;
  int64_t t0 = std::numeric_limits<int64_t>::max(), t1 = std::numeric_limits<int64_t>::min();
  int32_t max_cta = -1;
  for (const LayerTaskTrace& r : trace) {
    t0 = std::min(t0, r.start_ns);
    t1 = std::max(t1, r.end_ns);
    max_cta = std::max(max_cta, r.cta);
  }
  s.ctas = max_cta + 1;
  s.span_us = static_cast<double>(t1 - t0) * 1e-3;
  std::array<TracePhase, kNames.size()> by_kind{};
  std::array<double, kNames.size()> clocked_cycles{}, clocked_ns{};  // tasks with cycles recorded
  constexpr int kForms = 16;
  // Per kind and wgmma form: each tile's mainloop and epilogue µs (their means and medians).
  std::array<std::array<std::vector<double>, kForms>, kNames.size()> mainloops{}, epilogues{};
  // Per CTA: its plan record's start and SM cycles, and its last end.
  std::vector<int64_t> cta_start(static_cast<size_t>(s.ctas), -1), cta_end(static_cast<size_t>(s.ctas), 0),
      cta_cycles(static_cast<size_t>(s.ctas), 0);
  for (const LayerTaskTrace& r : trace) {
    const auto kind = std::min<size_t>(static_cast<size_t>(task_kind(r.task)), kNames.size() - 1);
    TracePhase& ph = by_kind[kind];
    const double start = static_cast<double>(r.start_ns - t0) * 1e-3, end = static_cast<double>(r.end_ns - t0) * 1e-3;
    ph.first_us = ph.tasks == 0 ? start : std::min(ph.first_us, start);
    ph.last_us = ph.tasks == 0 ? end : std::max(ph.last_us, end);
    ph.busy_us += (end - start) / s.ctas;
    ph.task_us += end - start;
    ++ph.tasks;
    if (r.task_cycles > 0 && r.end_ns > r.start_ns) {
      clocked_cycles[kind] += static_cast<double>(r.task_cycles);
      clocked_ns[kind] += static_cast<double>(r.end_ns - r.start_ns);
    }
    if (r.mainloop_end_ns > 0 && r.start_ns <= r.mainloop_end_ns && r.mainloop_end_ns <= r.epilogue_start_ns &&
        r.epilogue_start_ns <= r.end_ns) {
      ph.mainloop_us += static_cast<double>(r.mainloop_end_ns - r.start_ns) * 1e-3;
      ph.signal_us += static_cast<double>(r.epilogue_start_ns - r.mainloop_end_ns) * 1e-3;
      ph.epilogue_us += static_cast<double>(r.end_ns - r.epilogue_start_ns) * 1e-3;
      const auto form = static_cast<size_t>(r.tile_shape & (kForms - 1));
      mainloops[kind][form].push_back(static_cast<double>(r.mainloop_end_ns - r.start_ns) * 1e-3);
      epilogues[kind][form].push_back(static_cast<double>(r.end_ns - r.epilogue_start_ns) * 1e-3);
    }
    const auto c = static_cast<size_t>(r.cta);
    if (starts_launch(task_kind(r.task))) {
      cta_start[c] = r.start_ns;
      cta_cycles[c] = r.sm_cycles;
    }
    cta_end[c] = std::max(cta_end[c], r.end_ns);
  }
  for (size_t k = 1; k < kNames.size(); ++k) {
    TracePhase& ph = by_kind[k];
    if (ph.tasks == 0) continue;
    ph.name = kNames[k];
    ph.task_us /= static_cast<double>(ph.tasks);
    if (clocked_ns[k] > 0) ph.sm_mhz = clocked_cycles[k] * 1e3 / clocked_ns[k];
    int64_t split = 0;  // tiles with mainloop / signal / epilogue marks: those of every form
    for (const std::vector<double>& tiles : mainloops[k]) split += static_cast<int64_t>(tiles.size());
    if (split > 0) {
      ph.mainloop_us /= static_cast<double>(split);
      ph.signal_us /= static_cast<double>(split);
      ph.epilogue_us /= static_cast<double>(split);
    }
    s.phases.push_back(ph);
  }
  for (size_t k = 1; k < kNames.size(); ++k)
    for (int f = 0; f < kForms; ++f) {
      const std::vector<double>& mainloop = mainloops[k][static_cast<size_t>(f)];
      const std::vector<double>& epilogue = epilogues[k][static_cast<size_t>(f)];
      if (mainloop.empty()) continue;
      s.forms.push_back({kNames[k], f, static_cast<int64_t>(mainloop.size()), mean(mainloop), mean(epilogue),
                         median(mainloop), median(epilogue)});
    }
  double mhz = 0;
  int32_t clocked = 0;
  for (size_t c = 0; c < cta_start.size(); ++c)
    if (cta_start[c] >= 0 && cta_cycles[c] > 0 && cta_end[c] > cta_start[c]) {
      mhz += static_cast<double>(cta_cycles[c]) * 1e3 / static_cast<double>(cta_end[c] - cta_start[c]);
      ++clocked;
    }
  s.sm_clock_mhz = clocked > 0 ? mhz / clocked : 0;
  return s;
}

std::string format_trace_summary(const TraceSummary& s) {
  std::string out = fmt::format(
      "task timeline: {:.1f} µs from the first task start to the last end, {} CTAs, SM clock {:.0f} MHz\n", s.span_us,
      s.ctas, s.sm_clock_mhz);
  out += fmt::format("  {:<14} {:>8} {:>11} {:>11} {:>13} {:>10} {:>6} {:>12} {:>10} {:>12}\n", "kind", "tasks",
                     "first µs", "last µs", "busy µs/CTA", "µs/task", "MHz", "mainloop µs", "signal µs", "epilogue µs");
  double busy = 0;
  for (const TracePhase& p : s.phases) {
    out += fmt::format("  {:<14} {:>8} {:>11.1f} {:>11.1f} {:>13.1f} {:>10.2f} {:>6}", p.name, p.tasks, p.first_us,
                       p.last_us, p.busy_us, p.task_us, p.sm_mhz > 0 ? fmt::format("{:.0f}", p.sm_mhz) : "-");
    out += p.mainloop_us > 0 ? fmt::format(" {:>12.2f} {:>10.2f} {:>12.2f}\n", p.mainloop_us, p.signal_us, p.epilogue_us)
                             : std::string("\n");
    busy += p.busy_us;
  }
  static constexpr std::array<const char*, 6> kForms = {"full",   "split columns",    "narrow",
                                                         "half rows", "narrow gate/up", "half rows, n g/u"};
  static_assert(kForms.size() == kTileShapes, "a name for every TileShape");
  for (const TraceTileForm& f : s.forms)
    out += fmt::format("    {:<14} {:<13} {:>8} tiles, mainloop {:.2f} µs (median {:.2f}), epilogue {:.2f} µs (median {:.2f})\n",
                       f.kind, f.shape < static_cast<int32_t>(kForms.size()) ? kForms[static_cast<size_t>(f.shape)] : "?",
                       f.tasks, f.mainloop_us, f.mainloop_median_us, f.epilogue_us, f.epilogue_median_us);
  out += fmt::format("  busy {:.1f} of {:.1f} µs per CTA ({:.0f} %); the rest is waiting between tasks\n", busy,
                     s.span_us, s.span_us > 0 ? 100 * busy / s.span_us : 0.0);
  return out;
}

std::string format_trace_line(const TraceSummary& s) {
  std::string out = fmt::format("span {:.1f} µs, SM {:.0f} MHz", s.span_us, s.sm_clock_mhz);
  for (const TracePhase& p : s.phases) {
    if (p.name == "plan") continue;
    out += fmt::format("; {} busy {:.0f}", p.name, p.busy_us);
    if (p.mainloop_us > 0)
      out += fmt::format(" ({:.1f}+{:.1f}+{:.1f} µs/task)", p.mainloop_us, p.signal_us, p.epilogue_us);
  }
  return out;
}

std::string trace_chrome_json(const std::vector<LayerTaskTrace>& trace) {
  using nlohmann::json;
  int64_t t0 = std::numeric_limits<int64_t>::max();
  int32_t ctas = 0;
  for (const LayerTaskTrace& r : trace) {
    t0 = std::min(t0, r.start_ns);
    ctas = std::max(ctas, r.cta + 1);
  }
  auto us = [&](int64_t ns) { return static_cast<double>(ns - t0) * 1e-3; };
  json events = json::array();
  for (int32_t c = 0; c < ctas; ++c)
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", c},
                      {"args", {{"name", fmt::format("CTA {}", c)}}}});
  for (const LayerTaskTrace& r : trace) {
    json args = {{"task", fmt::format("0x{:x}", r.task)}, {"rank", task_rank(r.task)}, {"index", task_index(r.task)}};
    if (r.mainloop_end_ns > 0) {
      args["tile_shape"] = r.tile_shape;
      args["mainloop_end_us"] = us(r.mainloop_end_ns);
      args["epilogue_start_us"] = us(r.epilogue_start_ns);
    }
    if (r.sm_cycles > 0) args["sm_cycles"] = r.sm_cycles;
    if (r.gated_tiles > 0) args["gated_tiles"] = r.gated_tiles;
    if (r.task_cycles > 0) args["task_cycles"] = r.task_cycles;
    events.push_back({{"name", fmt::format("{} {}", kind_name(r.task), task_index(r.task))},
                      {"cat", kind_name(r.task)},
                      {"ph", "X"},
                      {"pid", 0},
                      {"tid", r.cta},
                      {"ts", us(r.start_ns)},
                      {"dur", static_cast<double>(r.end_ns - r.start_ns) * 1e-3},
                      {"args", std::move(args)}});
  }
  return json{{"displayTimeUnit", "ns"}, {"traceEvents", std::move(events)}}.dump() + "\n";
}

}  // namespace detmoe::mk
