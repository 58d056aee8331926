// The incremental writer: after every step the file on disk is a complete, valid report equal to
// what the writer holds, and nothing else is left in the directory.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "detmoe/report.h"
#include "sample_report.h"

namespace detmoe::report {
namespace {

namespace fs = std::filesystem;

class ReportWriter : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("detmoe-report-" + std::to_string(::getpid()) + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = (dir_ / "run.json").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string file_text() const {
    std::ifstream f(path_, std::ios::binary);
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
  }
  // The file parses, validates, equals the writer's report, and is alone in its directory.
  void expect_on_disk(const RunReportWriter& w) const {
    const StatusOr<RunReport> r = load_run_report(path_);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(*r, w.report());
    EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1) << "temporary file left behind";
  }

  fs::path dir_;
  std::string path_;
};

TEST_F(ReportWriter, FileIsCompleteAfterEveryStep) {
  const RunReport full = testing::full_sample();
  RunReport start = testing::empty_sample();
  start.inventory = full.inventory;
  start.run.state = RunState::kRunning;
  start.run.finished_at.clear();
  StatusOr<RunReportWriter> w = RunReportWriter::open(path_, start);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  expect_on_disk(*w);
  EXPECT_EQ(load_run_report(path_)->run.state, RunState::kRunning);

  for (std::size_t i = 0; i < full.checks.size(); ++i) {
    ASSERT_TRUE(w->add_check(full.checks[i]).ok());
    expect_on_disk(*w);
    EXPECT_EQ(load_run_report(path_)->checks.size(), i + 1);
  }
  for (const BenchmarkResult& b : full.benchmarks) {
    ASSERT_TRUE(w->add_benchmark(b).ok());
    expect_on_disk(*w);
  }
  ASSERT_TRUE(w->set_perf_ceiling(*full.perf_ceiling).ok());
  expect_on_disk(*w);
  ASSERT_TRUE(w->set_bandwidth(*full.bandwidth).ok());
  expect_on_disk(*w);
  for (const GoldenResult& g : full.golden) {
    ASSERT_TRUE(w->add_golden(g).ok());
    expect_on_disk(*w);
  }
  ASSERT_TRUE(w->finish(RunState::kFinished, "2025-12-02T10:01:00Z").ok());
  expect_on_disk(*w);
  const RunReport done = *load_run_report(path_);
  EXPECT_EQ(done.run.state, RunState::kFinished);
  EXPECT_EQ(done.run.finished_at, "2025-12-02T10:01:00Z");
  EXPECT_EQ(done.checks, full.checks);
  EXPECT_EQ(done.benchmarks, full.benchmarks);
  EXPECT_EQ(done.golden, full.golden);
}

// A run that dies after two checks leaves a valid file with both, still marked running.
TEST_F(ReportWriter, AbandonedRunLeavesWhatWasAdded) {
  {
    RunReport start = testing::empty_sample();
    start.run.state = RunState::kRunning;
    start.run.finished_at.clear();
    RunReportWriter w = RunReportWriter::open(path_, start).value();
    ASSERT_TRUE(w.add_check({"a", CheckTarget::cpu(), Verdict::kPass, "", std::nullopt, 0.1}).ok());
    ASSERT_TRUE(w.add_check({"b", CheckTarget::cpu(), Verdict::kFail, "boom", Severity::kRetry, 0.2}).ok());
  }  // no finish()
  const StatusOr<RunReport> r = load_run_report(path_);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->run.state, RunState::kRunning);
  ASSERT_EQ(r->checks.size(), 2u);
  EXPECT_EQ(r->checks[1].detail, "boom");
}

TEST_F(ReportWriter, InvalidAdditionIsRefusedAndTheFileKept) {
  RunReportWriter w = RunReportWriter::open(path_, testing::full_sample()).value();
  const std::string before = file_text();
  const Status s = w.add_check({"ghost", CheckTarget::gpu(9), Verdict::kPass, "", std::nullopt, 0});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("$.checks[7].target.gpus[0]: GPU 9 is not in $.inventory.gpus"), std::string::npos) << s.message();
  EXPECT_EQ(file_text(), before);
  EXPECT_EQ(w.report(), testing::full_sample());

  BenchmarkResult nan_row = testing::full_sample().benchmarks[0];
  nan_row.median_ms = std::nan("");
  const Status n = w.add_benchmark(nan_row);
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.message().find("$.benchmarks[5].median_ms: nan is not a finite number"), std::string::npos) << n.message();
  EXPECT_EQ(file_text(), before);
}

TEST_F(ReportWriter, UnwritableDirectoryIsAnIoErrorNamingThePath) {
  const std::string bad = (dir_ / "no" / "such" / "run.json").string();
  const StatusOr<RunReportWriter> w = RunReportWriter::open(bad, testing::empty_sample());
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), ErrorCode::kIoError);
  EXPECT_NE(w.status().message().find(bad), std::string::npos) << w.status().message();
}

TEST_F(ReportWriter, SaveReplacesAnExistingFile) {
  ASSERT_TRUE(save_run_report(path_, testing::empty_sample()).ok());
  ASSERT_TRUE(save_run_report(path_, testing::full_sample()).ok());
  EXPECT_EQ(*load_run_report(path_), testing::full_sample());
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(ReportWriter, MissingFileIsAnIoError) {
  const StatusOr<RunReport> r = load_run_report((dir_ / "absent.json").string());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kIoError);
}

TEST(ReportRunInfo, CurrentRunInfoIsFilledIn) {
  const RunInfo i = current_run_info("accept", {"detmoe", "accept"});
  EXPECT_FALSE(i.tool_version.empty());
  EXPECT_FALSE(i.host.empty());
  EXPECT_EQ(i.started_at.size(), 20u) << i.started_at;  // 2025-12-02T10:17:36Z
  EXPECT_EQ(i.started_at.back(), 'Z');
  EXPECT_EQ(i.state, RunState::kRunning);
}

}  // namespace
}  // namespace detmoe::report
