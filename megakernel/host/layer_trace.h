// Summary of the fused kernel's task timeline (LayerOptions::trace_tasks_per_cta): per task
// kind, how many tasks ran, when the first started and the last ended (µs after the earliest
// start of the launch) and how busy the grid was with them; plus the launch span. Host only.
#pragma once

#include <string>
#include <vector>

#include "detmoe/layer.h"

namespace detmoe::mk {

struct TracePhase {
  std::string name;      // "plan", "dispatch", "GEMM1", …
  int64_t tasks = 0;
  double first_us = 0;   // first start, after the launch's earliest start
  double last_us = 0;    // last end
  double busy_us = 0;    // Σ task durations / CTAs: the grid's average time in this kind
};

struct TraceSummary {
  double span_us = 0;    // earliest start → latest end
  int32_t ctas = 0;
  std::vector<TracePhase> phases;  // in task-kind order, kinds that ran only
};

TraceSummary summarize_trace(const std::vector<LayerTaskTrace>& trace);
std::string format_trace_summary(const TraceSummary& s);

}  // namespace detmoe::mk
