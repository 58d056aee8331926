// The task-timeline summary (host only): phases by task kind, spans relative to the launch's
// first start, busy time averaged over the CTAs.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "megakernel/host/layer_trace.h"
#include "megakernel/layer/device_error.h"

namespace detmoe::mk {
namespace {

uint64_t id(TaskKind kind, uint32_t index) { return make_task_id(kind, 0, index); }

TEST(LayerTrace, SummarisesPhasesByKind) {
  // Two CTAs; times in ns, the launch starts at 1'000'000.
  // GEMM1 tasks: mainloops of 36 and 30 µs, signals of 0 and 2, epilogues of 4 and 8, 60'000 and 80'000 SM
  // cycles over their 40 µs each (the phase's clock: 140'000 cycles in 80 µs, 1750 MHz; the other
  // kinds recorded none). Plan records: CTA 0 ran
  // 140'000 cycles over its 70 µs (2000 MHz), CTA 1 108'000 over its 64 µs (1687.5 MHz).
  const std::vector<LayerTaskTrace> trace = {
      {.cta = 0, .task = id(TaskKind::kPlan, 0), .start_ns = 1'000'000, .end_ns = 1'010'000, .sm_cycles = 140'000},
      {.cta = 1, .task = id(TaskKind::kPlan, 0), .start_ns = 1'000'000, .end_ns = 1'012'000, .sm_cycles = 108'000},
      {.cta = 0, .task = id(TaskKind::kPlaceDispatch, 0), .start_ns = 1'010'000, .end_ns = 1'030'000},
      {.cta = 1,
       .task = id(TaskKind::kGemm1, 3),
       .start_ns = 1'012'000,
       .end_ns = 1'052'000,
       .mainloop_end_ns = 1'048'000,
       .epilogue_start_ns = 1'048'000,
       .task_cycles = 60'000},
      {.cta = 0,
       .task = id(TaskKind::kGemm1, 0),
       .start_ns = 1'030'000,
       .end_ns = 1'070'000,
       .mainloop_end_ns = 1'060'000,
       .epilogue_start_ns = 1'062'000,
       .tile_shape = 3,
       .task_cycles = 80'000},
      {.cta = 1, .task = id(TaskKind::kWeightedSum, 0), .start_ns = 1'060'000, .end_ns = 1'064'000},
  };
  const TraceSummary s = summarize_trace(trace);
  EXPECT_EQ(s.ctas, 2);
  EXPECT_DOUBLE_EQ(s.span_us, 70.0);
  ASSERT_EQ(s.phases.size(), 4u);
  EXPECT_EQ(s.phases[0].name, "plan");
  EXPECT_DOUBLE_EQ(s.phases[0].busy_us, 11.0);  // (10 + 12) / 2
  EXPECT_EQ(s.phases[1].name, "dispatch");
  EXPECT_EQ(s.phases[2].name, "GEMM1");
  EXPECT_EQ(s.phases[2].tasks, 2);
  EXPECT_DOUBLE_EQ(s.phases[2].first_us, 12.0);
  EXPECT_DOUBLE_EQ(s.phases[2].last_us, 70.0);
  EXPECT_DOUBLE_EQ(s.phases[2].busy_us, 40.0);
  EXPECT_DOUBLE_EQ(s.phases[2].task_us, 40.0);
  EXPECT_DOUBLE_EQ(s.phases[2].mainloop_us, 33.0);
  EXPECT_DOUBLE_EQ(s.phases[2].signal_us, 1.0);
  EXPECT_DOUBLE_EQ(s.phases[2].epilogue_us, 6.0);
  EXPECT_DOUBLE_EQ(s.phases[2].sm_mhz, 1750.0);
  EXPECT_DOUBLE_EQ(s.phases[1].sm_mhz, 0.0);
  EXPECT_DOUBLE_EQ(s.phases[1].mainloop_us, 0.0);  // dispatch: no mainloop
  EXPECT_DOUBLE_EQ(s.sm_clock_mhz, (2000.0 + 1687.5) / 2);
  EXPECT_EQ(s.phases[3].name, "weighted sum");
  const std::string text = format_trace_summary(s);
  EXPECT_NE(text.find("GEMM1"), std::string::npos);
  EXPECT_NE(text.find("70.0 µs"), std::string::npos);
  EXPECT_NE(text.find("1844 MHz"), std::string::npos);
  EXPECT_NE(text.find("  1750 "), std::string::npos) << text;  // GEMM1's own clock column
  EXPECT_NE(format_trace_line(s).find("GEMM1 busy 40 (33.0+1.0+6.0 µs/task)"), std::string::npos);
  // Per wgmma form: CTA 1's tile is full (mainloop 36, epilogue 4), CTA 0's half rows (30, 8).
  ASSERT_EQ(s.forms.size(), 2u);
  EXPECT_EQ(s.forms[0].shape, 0);
  EXPECT_DOUBLE_EQ(s.forms[0].mainloop_us, 36.0);
  EXPECT_EQ(s.forms[1].shape, 3);
  EXPECT_DOUBLE_EQ(s.forms[1].epilogue_us, 8.0);
  EXPECT_NE(text.find("half rows"), std::string::npos);
}

// Per form, the median beside the mean: one tile that waited 100 µs for its inputs moves the full
// form's mean mainloop to 40.67 µs and leaves its median at 12; an even count takes the middle two.
TEST(LayerTrace, FormMediansIgnoreATileThatWaitedForItsInputs) {
  auto gemm1 = [](uint32_t index, int64_t start, int64_t mainloop_us, int64_t epilogue_us, int32_t shape) {
    const int64_t mainloop_end = start + mainloop_us * 1000, end = mainloop_end + epilogue_us * 1000;
    return LayerTaskTrace{.cta = 0,
                          .task = id(TaskKind::kGemm1, index),
                          .start_ns = start,
                          .end_ns = end,
                          .mainloop_end_ns = mainloop_end,
                          .epilogue_start_ns = mainloop_end,
                          .tile_shape = shape};
  };
  const std::vector<LayerTaskTrace> trace = {
      gemm1(0, 0, 10, 2, 0),         gemm1(1, 20'000, 100, 4, 0),   gemm1(2, 200'000, 12, 3, 0),
      gemm1(3, 300'000, 5, 1, 3),    gemm1(4, 310'000, 11, 1, 3),   gemm1(5, 330'000, 7, 2, 3),
      gemm1(6, 340'000, 9, 2, 3),
  };
  const TraceSummary s = summarize_trace(trace);
  ASSERT_EQ(s.forms.size(), 2u);
  EXPECT_EQ(s.forms[0].tasks, 3);
  EXPECT_NEAR(s.forms[0].mainloop_us, 122.0 / 3, 1e-9);
  EXPECT_DOUBLE_EQ(s.forms[0].mainloop_median_us, 12.0);
  EXPECT_DOUBLE_EQ(s.forms[0].epilogue_median_us, 3.0);
  EXPECT_EQ(s.forms[1].shape, 3);
  EXPECT_DOUBLE_EQ(s.forms[1].mainloop_median_us, 8.0);  // (7 + 9) / 2
  EXPECT_DOUBLE_EQ(s.forms[1].epilogue_median_us, 1.5);  // (1 + 2) / 2
  const std::string text = format_trace_summary(s);
  EXPECT_NE(text.find("mainloop 40.67 µs (median 12.00), epilogue 3.00 µs (median 3.00)"), std::string::npos) << text;
}

// The Chrome trace export: a track name per CTA, then one complete event per task in µs after the
// launch's first start, GEMM tiles with their form and marks.
TEST(LayerTrace, ChromeJsonHasOneEventPerTaskOnItsCtasTrack) {
  const std::vector<LayerTaskTrace> trace = {
      {.cta = 0, .task = id(TaskKind::kPlan, 0), .start_ns = 1'000'000, .end_ns = 1'010'000, .sm_cycles = 140'000},
      {.cta = 1,
       .task = make_task_id(TaskKind::kGemm2, 2, 7),
       .start_ns = 1'012'000,
       .end_ns = 1'052'000,
       .mainloop_end_ns = 1'048'000,
       .epilogue_start_ns = 1'049'500,
       .tile_shape = 1},
  };
  const auto j = nlohmann::json::parse(trace_chrome_json(trace));
  const auto& ev = j.at("traceEvents");
  ASSERT_EQ(ev.size(), 4u);  // two track names, two tasks
  EXPECT_EQ(ev[0].at("ph"), "M");
  EXPECT_EQ(ev[1].at("args").at("name"), "CTA 1");
  const auto& plan = ev[2];
  EXPECT_EQ(plan.at("ph"), "X");
  EXPECT_EQ(plan.at("cat"), "plan");
  EXPECT_DOUBLE_EQ(plan.at("ts").get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(plan.at("dur").get<double>(), 10.0);
  EXPECT_EQ(plan.at("args").at("sm_cycles"), 140'000);
  const auto& tile = ev[3];
  EXPECT_EQ(tile.at("name"), "GEMM2+combine 7");
  EXPECT_EQ(tile.at("tid"), 1);
  EXPECT_DOUBLE_EQ(tile.at("ts").get<double>(), 12.0);
  EXPECT_DOUBLE_EQ(tile.at("dur").get<double>(), 40.0);
  EXPECT_EQ(tile.at("args").at("rank"), 2);
  EXPECT_EQ(tile.at("args").at("index"), 7);
  EXPECT_EQ(tile.at("args").at("tile_shape"), 1);
  EXPECT_DOUBLE_EQ(tile.at("args").at("mainloop_end_us").get<double>(), 48.0);
  EXPECT_DOUBLE_EQ(tile.at("args").at("epilogue_start_us").get<double>(), 49.5);
  EXPECT_EQ(nlohmann::json::parse(trace_chrome_json({})).at("traceEvents").size(), 0u);
}

TEST(LayerTrace, EmptyTraceIsAnEmptySummary) {
  const TraceSummary s = summarize_trace({});
  EXPECT_EQ(s.ctas, 0);
  EXPECT_TRUE(s.phases.empty());
}

}  // namespace
}  // namespace detmoe::mk
