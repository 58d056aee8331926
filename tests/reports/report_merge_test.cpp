// merge_run_reports: shards of one campaign become one valid report; mismatched or overlapping
// shards are refused with the reason.
#include <gtest/gtest.h>

#include "detmoe/report.h"
#include "sample_report.h"

namespace detmoe::report {
namespace {

// The full sample split in two: checks, benchmarks and golden results by halves.
std::vector<RunReport> halves() {
  const RunReport all = testing::full_sample();
  RunReport a = all, b = all;
  const size_t nc = all.checks.size() / 2, nb = all.benchmarks.size() / 2, ng = all.golden.size() / 2;
  a.checks.assign(all.checks.begin(), all.checks.begin() + static_cast<std::ptrdiff_t>(nc));
  b.checks.assign(all.checks.begin() + static_cast<std::ptrdiff_t>(nc), all.checks.end());
  a.benchmarks.assign(all.benchmarks.begin(), all.benchmarks.begin() + static_cast<std::ptrdiff_t>(nb));
  b.benchmarks.assign(all.benchmarks.begin() + static_cast<std::ptrdiff_t>(nb), all.benchmarks.end());
  a.golden.assign(all.golden.begin(), all.golden.begin() + static_cast<std::ptrdiff_t>(ng));
  b.golden.assign(all.golden.begin() + static_cast<std::ptrdiff_t>(ng), all.golden.end());
  a.run.started_at = "2026-12-03T10:00:00Z", a.run.finished_at = "2026-12-03T10:05:00Z";
  b.run.started_at = "2026-12-03T09:58:00Z", b.run.finished_at = "2026-12-03T10:04:00Z";
  a.run.state = b.run.state = RunState::kFinished;
  return {a, b};
}

TEST(ReportMerge, HalvesGiveTheWholeBackValid) {
  const auto shards = halves();
  auto merged = merge_run_reports(shards);
  ASSERT_TRUE(merged.ok()) << merged.status().to_string();
  const RunReport all = testing::full_sample();
  EXPECT_EQ(merged->checks, all.checks);
  EXPECT_EQ(merged->benchmarks, all.benchmarks);
  EXPECT_EQ(merged->golden, all.golden);
  EXPECT_EQ(merged->run.started_at, "2026-12-03T09:58:00Z");
  EXPECT_EQ(merged->run.finished_at, "2026-12-03T10:05:00Z");
  EXPECT_EQ(merged->run.state, RunState::kFinished);
  EXPECT_TRUE(parse_run_report(to_json_text(*merged)).ok());
}

TEST(ReportMerge, StateIsTheWorstOfTheShards) {
  auto shards = halves();
  shards[1].run.state = RunState::kRunning;
  shards[1].run.finished_at.clear();
  auto merged = merge_run_reports(shards);
  ASSERT_TRUE(merged.ok());
  EXPECT_EQ(merged->run.state, RunState::kRunning);
  EXPECT_TRUE(merged->run.finished_at.empty());
  shards[0].run.state = RunState::kAborted;
  EXPECT_EQ(merge_run_reports(shards)->run.state, RunState::kAborted);
}

TEST(ReportMerge, MismatchedOrOverlappingShardsAreRefused) {
  auto expect_refused = [](std::vector<RunReport> shards, const std::string& words) {
    auto merged = merge_run_reports(shards);
    ASSERT_FALSE(merged.ok());
    EXPECT_EQ(merged.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(merged.status().message().find(words), std::string::npos) << merged.status().message();
  };
  auto shards = halves();
  shards[1].run.git_sha = "fedcba9876543210fedcba9876543210fedcba98";
  expect_refused(shards, "commit");
  shards = halves();
  shards[1].run.command = "gate";
  expect_refused(shards, "report 1 is of `gate`");
  shards = halves();
  shards[1].inventory.gpus.pop_back();
  expect_refused(shards, "other GPUs");
  shards = halves();
  shards[1].checks.push_back(shards[0].checks.front());
  expect_refused(shards, "the shards overlap");
  EXPECT_FALSE(merge_run_reports(std::vector<RunReport>{}).ok());
}

}  // namespace
}  // namespace detmoe::report
