#include "megakernel/host/layer_trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>

#include "megakernel/layer/device_error.h"

namespace detmoe::mk {

TraceSummary summarize_trace(const std::vector<LayerTaskTrace>& trace) {
  TraceSummary s;
  if (trace.empty()) return s;
  static constexpr std::array<const char*, 8> kNames = {"?",          "plan",         "dispatch",
                                                        "GEMM1",      "shared GEMM1", "GEMM2+combine",
                                                        "shared GEMM2", "weighted sum"};
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
  for (const LayerTaskTrace& r : trace) {
    const auto kind = std::min<size_t>(static_cast<size_t>(task_kind(r.task)), kNames.size() - 1);
    TracePhase& ph = by_kind[kind];
    const double start = static_cast<double>(r.start_ns - t0) * 1e-3, end = static_cast<double>(r.end_ns - t0) * 1e-3;
    ph.first_us = ph.tasks == 0 ? start : std::min(ph.first_us, start);
    ph.last_us = ph.tasks == 0 ? end : std::max(ph.last_us, end);
    ph.busy_us += (end - start) / s.ctas;
    ++ph.tasks;
  }
  for (size_t k = 1; k < kNames.size(); ++k)
    if (by_kind[k].tasks > 0) {
      by_kind[k].name = kNames[k];
      s.phases.push_back(by_kind[k]);
    }
  return s;
}

std::string format_trace_summary(const TraceSummary& s) {
  std::string out = fmt::format("task timeline: {:.1f} µs from the first task start to the last end, {} CTAs\n",
                                s.span_us, s.ctas);
  out += fmt::format("  {:<14} {:>8} {:>11} {:>11} {:>13}\n", "kind", "tasks", "first µs", "last µs", "busy µs/CTA");
  double busy = 0;
  for (const TracePhase& p : s.phases) {
    out += fmt::format("  {:<14} {:>8} {:>11.1f} {:>11.1f} {:>13.1f}\n", p.name, p.tasks, p.first_us, p.last_us, p.busy_us);
    busy += p.busy_us;
  }
  out += fmt::format("  busy {:.1f} of {:.1f} µs per CTA ({:.0f} %); the rest is waiting between tasks\n", busy,
                     s.span_us, s.span_us > 0 ? 100 * busy / s.span_us : 0.0);
  return out;
}

}  // namespace detmoe::mk
