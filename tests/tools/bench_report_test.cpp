// `detmoe bench --report`: the Google Benchmark and pipeline JSON turned into run-report rows
// that validate against detmoe.run/1, with the pipeline as the baseline of the cases it ran.
#include "bench_report.h"

#include <gtest/gtest.h>

namespace detmoe::cli {
namespace {

nlohmann::json gbench() {
  return nlohmann::json::parse(R"({"benchmarks": [
    {"name": "megakernel/qwen3-30b-a3b/balanced/fwd/iterations:20/manual_time", "median_ms": 3.0, "tflops": 412.0,
     "p25_ms": 2.9, "p75_ms": 3.1, "joules_per_step": 2.2, "avg_watts": 640.0},
    {"name": "reference/qwen3-30b-a3b/balanced/fwd/iterations:20/manual_time", "median_ms": 3.5, "tflops": 353.0},
    {"name": "reference/qwen3-30b-a3b/balanced/fwd+bwd/bf16-grads/iterations:20/manual_time", "median_ms": 10.3, "tflops": 360.0},
    {"name": "reference/qwen3-30b-a3b/zipf1/fwd/grouped/iterations:20/manual_time", "median_ms": 3.9, "tflops": 317.0},
    {"name": "reference/qwen3-30b-a3b/zipf1/fwd/iterations:20/manual_time_mean", "real_time": 1.0},
    {"name": "not/a/bench", "median_ms": 1.0, "tflops": 1.0}]})");
}

nlohmann::json torch() {
  return nlohmann::json::parse(R"({"schema": "detmoe.torch_pipeline/1", "results": [
    {"shape": "qwen3-30b-a3b", "routing": "balanced", "pass": "fwd", "median_ms": 4.8, "tflops": 257.5, "timed": 20},
    {"shape": "qwen3-30b-a3b", "routing": "balanced", "pass": "fwd+bwd", "median_ms": 12.5, "tflops": 296.7, "timed": 20}]})");
}

TEST(BenchReport, RowsNameTheirImplCaseAndBaseline) {
  const auto rows = bench_results(gbench(), torch(), 20);
  ASSERT_EQ(rows.size(), 6u);  // 4 DetMoE rows (the mean aggregate and the foreign name skipped) + 2 pipeline rows
  EXPECT_EQ(rows[0].impl, "megakernel");
  EXPECT_EQ(rows[0].baseline, "torch-pipeline");
  ASSERT_TRUE(rows[0].ratio_to_baseline.has_value());
  EXPECT_NEAR(*rows[0].ratio_to_baseline, 412.0 / 257.5, 1e-12);
  EXPECT_EQ(rows[0].p25_ms, 2.9);  // the spread and energy counters travel
  EXPECT_EQ(rows[0].p75_ms, 3.1);
  EXPECT_EQ(rows[0].joules_per_step, 2.2);
  EXPECT_EQ(rows[0].avg_watts, 640.0);
  EXPECT_FALSE(rows[1].joules_per_step.has_value());  // not measured: absent, not zero
  EXPECT_EQ(rows[2].impl, "reference (bf16-grads)");
  EXPECT_EQ(rows[2].pass, report::BenchPass::kForwardBackward);
  EXPECT_NEAR(*rows[2].ratio_to_baseline, 360.0 / 296.7, 1e-12);
  EXPECT_EQ(rows[3].impl, "reference (grouped)");
  EXPECT_EQ(rows[3].routing, "zipf1");
  EXPECT_TRUE(rows[3].baseline.empty());  // the pipeline did not run zipf1 here
  EXPECT_FALSE(rows[3].ratio_to_baseline.has_value());
  EXPECT_EQ(rows[4].impl, "torch-pipeline");
  EXPECT_EQ(rows[4].repetitions, 20);
}

TEST(BenchReport, TheReportValidates) {
  report::RunReport rep;
  rep.run = report::current_run_info("bench", {"detmoe", "bench"});
  rep.run.state = report::RunState::kFinished;
  rep.run.finished_at = report::utc_now_iso8601();
  rep.inventory.unavailable_reason = "test";
  rep.benchmarks = bench_results(gbench(), torch(), 20);
  EXPECT_TRUE(report::validate_run_json(report::to_json(rep)).empty());
  EXPECT_TRUE(report::check_consistency(rep).empty());
}

TEST(BenchReport, NoPipelineMeansNoBaseline) {
  const auto rows = bench_results(gbench(), nlohmann::json(), 20);
  ASSERT_EQ(rows.size(), 4u);
  for (const auto& r : rows) EXPECT_TRUE(r.baseline.empty()) << r.impl;
}

// The console table and JSON rows of `detmoe bench`: the implementation under test beside the
// reference and the pipeline, per case, whatever its name.
TEST(BenchTable, AnImplementationBesideTheReferenceAndThePipeline) {
  const nlohmann::json gb = nlohmann::json::parse(R"({"benchmarks": [
    {"name": "megakernel/qwen3-30b-a3b/balanced/fwd/iterations:20/manual_time", "median_ms": 3.0, "tflops": 412.0,
     "joules_per_step": 2.2, "avg_watts": 640.0},
    {"name": "reference/qwen3-30b-a3b/balanced/fwd/iterations:20/manual_time", "median_ms": 3.6, "tflops": 343.0},
    {"name": "megakernel/gpt-oss-120b/balanced/fwd/iterations:20/manual_time", "median_ms": 6.5, "tflops": 500.0}]})");
  const nlohmann::json tp = nlohmann::json::parse(R"({"results": [
    {"shape": "qwen3-30b-a3b", "routing": "balanced", "pass": "fwd", "median_ms": 4.8, "tflops": 257.5, "timed": 20,
     "joules_per_step": 3.3, "avg_watts": 600.0},
    {"shape": "deepseek-v3", "routing": "balanced", "pass": "fwd", "median_ms": 12.0, "tflops": 500.0, "timed": 20}]})");
  const BenchTable t = bench_table(bench_results(gb, tp, 20), "megakernel");
  ASSERT_EQ(t.rows.size(), 2u);  // deepseek ran only in the pipeline: no row
  const auto& q = t.rows[0];
  EXPECT_EQ(q["case"], "qwen3-30b-a3b/balanced/fwd");
  EXPECT_EQ(q["megakernel_ms"], 3.0);
  EXPECT_EQ(q["reference_ms"], 3.6);
  EXPECT_NEAR(q["torch_over_megakernel"].get<double>(), 4.8 / 3.0, 1e-12);
  EXPECT_EQ(q["megakernel_joules_per_step"], 2.2);
  EXPECT_EQ(q["torch_joules_per_step"], 3.3);
  EXPECT_FALSE(t.rows[1].contains("reference_ms"));  // gpt-oss: no reference row, no pipeline row
  EXPECT_FALSE(t.rows[1].contains("torch_ms"));
  EXPECT_NE(t.text.find("1.20"), std::string::npos) << t.text;  // ref/mega = 3.6 / 3.0
  EXPECT_NE(t.text.find("1.60"), std::string::npos) << t.text;  // torch/mega = 4.8 / 3.0
  EXPECT_NE(t.text.find("2.200 (640)"), std::string::npos) << t.text;
}

TEST(BenchTable, TheReferenceAloneWithItsGroupedVariant) {
  const BenchTable t = bench_table(bench_results(gbench(), torch(), 20), "reference");
  // reference/balanced/fwd, reference (bf16-grads) fwd+bwd, reference (grouped) zipf1 fwd, and
  // the megakernel's row of the first case is not the reference's.
  ASSERT_EQ(t.rows.size(), 3u);
  EXPECT_EQ(t.rows[0]["reference_ms"], 3.5);
  EXPECT_NEAR(t.rows[0]["reference_over_torch"].get<double>(), 3.5 / 4.8, 1e-12);
  EXPECT_EQ(t.rows[2]["case"], "qwen3-30b-a3b/zipf1/fwd");
  EXPECT_EQ(t.rows[2]["reference_grouped_ms"], 3.9);
  EXPECT_NE(t.text.find("grouped ms"), std::string::npos) << t.text;
}

}  // namespace
}  // namespace detmoe::cli
