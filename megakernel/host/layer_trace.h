// Summary of the fused kernel's task timeline (LayerOptions::trace_tasks_per_cta): per task
// kind, how many tasks ran, when the first started and the last ended (µs after the earliest
// start of the launch), how busy the grid was with them and, for GEMM tiles, mainloop against
// epilogue time; plus the launch span and the SM clock the launch ran at. Host only.
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
  double task_us = 0;    // mean task duration
  // GEMM kinds: mean time from the task's start to its mainloop's end (input waits included),
  // from there to the previous tile's signal being sent, and from there to the task's end (the
  // epilogue); 0 for other kinds.
  double mainloop_us = 0;
  double signal_us = 0;
  double epilogue_us = 0;
  // The SM clock while this kind's tasks ran: Σ task cycles / Σ task time (0: none recorded).
  double sm_mhz = 0;
};

// GEMM tiles of one kind and wgmma form (megakernel TileShape).
struct TraceTileForm {
  std::string kind;   // "GEMM1", …
  int32_t shape = 0;  // 0 full, 1 split columns, 2 narrow, 3 half rows
  int64_t tasks = 0;
  double mainloop_us = 0;  // means per tile, as in TracePhase
  double epilogue_us = 0;
  // Medians per tile: a tile's fixed cost apart from the few that waited long for their inputs
  // (a phase's first tiles wait for the phase before; the mean carries those waits).
  double mainloop_median_us = 0;
  double epilogue_median_us = 0;
};

struct TraceSummary {
  double span_us = 0;    // earliest start → latest end
  int32_t ctas = 0;
  double sm_clock_mhz = 0;  // mean over CTAs of SM cycles / ns from its plan start to its last end
  std::vector<TracePhase> phases;  // in task-kind order, kinds that ran only
  std::vector<TraceTileForm> forms;  // GEMM kinds × wgmma forms that ran, in that order
};

TraceSummary summarize_trace(const std::vector<LayerTaskTrace>& trace);
std::string format_trace_summary(const TraceSummary& s);
// One line: span, SM clock, busy time per kind and mainloop+epilogue per GEMM task.
std::string format_trace_line(const TraceSummary& s);

// The timeline as Chrome trace-event JSON (open in Perfetto or chrome://tracing): one complete
// event per task on its CTA's track, µs after the launch's first start, with the task id, rank,
// index and, for GEMM tiles, the wgmma form and the mainloop-end / epilogue-start marks.
std::string trace_chrome_json(const std::vector<LayerTaskTrace>& trace);

}  // namespace detmoe::mk
