// The JSON model: round trips, and validation that names the offending path.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <functional>

#include "detmoe/report.h"
#include "sample_report.h"

namespace detmoe::report {
namespace {

using nlohmann::json;

TEST(ReportJson, FullReportRoundTrips) {
  const RunReport r = testing::full_sample();
  const StatusOr<RunReport> back = parse_run_report(to_json_text(r));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, r);
}

TEST(ReportJson, EmptyReportRoundTrips) {
  const RunReport r = testing::empty_sample();
  const StatusOr<RunReport> back = parse_run_report(to_json_text(r));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, r);
}

TEST(ReportJson, SerialisedFormIsStable) {
  const json j = to_json(testing::full_sample());
  EXPECT_EQ(j["schema"], "detmoe.run/1");
  EXPECT_EQ(j["checks"][2]["verdict"], "Fail");
  EXPECT_EQ(j["checks"][2]["severity"], "isolate");
  EXPECT_EQ(j["checks"][4]["target"], json({{"kind", "pair"}, {"gpus", {0, 1}}}));
  EXPECT_EQ(j["benchmarks"][3]["pass"], "fwd+bwd");
  EXPECT_TRUE(j["bandwidth"]["gbps"][0][0].is_null());
  EXPECT_EQ(j["golden"][1]["first_difference"]["actual"], "nan");
}

TEST(ReportJson, AbsentOptionalsAreOmittedNotNull) {
  const json j = to_json(testing::empty_sample());
  EXPECT_FALSE(j.contains("bandwidth"));
  EXPECT_FALSE(j.contains("perf_ceiling"));
  EXPECT_FALSE(j["run"].contains("git_sha"));
  EXPECT_TRUE(j["checks"].is_array() && j["checks"].empty());
}

TEST(ReportJson, InvalidUtf8IsReplacedNotThrown) {
  RunReport r = testing::empty_sample();
  r.run.host = "bad\xff host";
  std::string text;
  ASSERT_NO_THROW(text = to_json_text(r));
  const StatusOr<RunReport> back = parse_run_report(text);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->run.host, "bad\xEF\xBF\xBD host");
}

TEST(ReportJson, NotJsonIsInvalidArgument) {
  const StatusOr<RunReport> r = parse_run_report("{\"schema\": ");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("not JSON"), std::string::npos);
}

struct BadCase {
  const char* what;
  std::function<void(json&)> mutate;
  const char* path;
  const char* message;
};

// Each edit of a valid document must be reported at exactly this path.
const BadCase kBadCases[] = {
    {"missing verdict", [](json& j) { j["checks"][0].erase("verdict"); }, "$.checks[0].verdict", "required property is missing"},
    {"unknown verdict", [](json& j) { j["checks"][1]["verdict"] = "Maybe"; }, "$.checks[1].verdict",
     "\"Maybe\" is not one of \"Pass\", \"Fail\", \"Skip\", \"Warn\""},
    {"host is a number", [](json& j) { j["run"]["host"] = 3; }, "$.run.host", "expected string, got integer 3"},
    {"negative time", [](json& j) { j["benchmarks"][0]["median_ms"] = -1.5; }, "$.benchmarks[0].median_ms", "-1.5 is below the minimum 0"},
    {"fractional repetitions", [](json& j) { j["benchmarks"][2]["repetitions"] = 2.5; }, "$.benchmarks[2].repetitions",
     "expected integer"},
    {"memory as text", [](json& j) { j["inventory"]["gpus"][1]["memory_bytes"] = "150G"; }, "$.inventory.gpus[1].memory_bytes",
     "expected integer, got string"},
    {"misspelt property", [](json& j) { j["run"]["hots"] = "x"; }, "$.run.hots", "not in the schema"},
    {"odd property name", [](json& j) { j["run"]["a b"] = 1; }, "$.run[\"a b\"]", "not in the schema"},
    {"missing section", [](json& j) { j.erase("golden"); }, "$.golden", "required property is missing"},
    {"bandwidth cell is text", [](json& j) { j["bandwidth"]["gbps"][0][1] = "fast"; }, "$.bandwidth.gbps[0][1]",
     "expected number or null"},
    {"unknown target kind", [](json& j) { j["checks"][0]["target"]["kind"] = "rack"; }, "$.checks[0].target.kind", "is not one of"},
    {"unknown pass", [](json& j) { j["benchmarks"][0]["pass"] = "bwd"; }, "$.benchmarks[0].pass", "\"bwd\" is not one of"},
    {"match is a string", [](json& j) { j["golden"][0]["match"] = "yes"; }, "$.golden[0].match", "expected boolean"},
    {"newer schema", [](json& j) { j["schema"] = "detmoe.run/2"; }, "$.schema", "not a schema this build reads"},
    {"no schema", [](json& j) { j.erase("schema"); }, "$.schema", "required property is missing"},
    {"checks is an object", [](json& j) { j["checks"] = json::object(); }, "$.checks", "expected array, got object"},
    {"document is an array", [](json& j) { j = json::array(); }, "$", "expected object, got array"},
    // Cross-field rules, after the schema.
    {"unknown GPU", [](json& j) { j["checks"][1]["target"]["gpus"] = {7}; }, "$.checks[1].target.gpus[0]",
     "GPU 7 is not in $.inventory.gpus"},
    {"pair of one", [](json& j) { j["checks"][4]["target"]["gpus"] = {0}; }, "$.checks[4].target.gpus",
     "a pair target must list 2 GPU(s), not 1"},
    {"cpu with a GPU", [](json& j) { j["checks"][0]["target"]["gpus"] = {0}; }, "$.checks[0].target.gpus",
     "a cpu target must list 0 GPU(s), not 1"},
    {"matrix not square", [](json& j) { j["bandwidth"]["gbps"] = {{nullptr}}; }, "$.bandwidth.gbps", "has 1 rows for 2 GPUs"},
    {"match with a difference", [](json& j) { j["golden"][0]["first_difference"] = {{"index", 0}, {"expected", "1"}, {"actual", "2"}}; },
     "$.golden[0].first_difference", "cannot have a first difference"},
    {"GPU listed twice", [](json& j) { j["inventory"]["gpus"][1]["index"] = 0; }, "$.inventory.gpus[1].index", "listed twice"},
    {"ratio without baseline", [](json& j) { j["benchmarks"][1].erase("baseline"); }, "$.benchmarks[1].ratio_to_baseline",
     "without a baseline"},
};

TEST(ReportJson, ValidDocumentHasNoViolations) {
  const auto v = validate_run_json(to_json(testing::full_sample()));
  EXPECT_TRUE(v.empty()) << v.front().path << ": " << v.front().message;
}

TEST(ReportJson, EachBadDocumentIsRejectedAtItsPath) {
  for (const BadCase& c : kBadCases) {
    SCOPED_TRACE(c.what);
    json j = to_json(testing::full_sample());
    c.mutate(j);
    const auto v = validate_run_json(j);
    ASSERT_FALSE(v.empty()) << "accepted";
    EXPECT_EQ(v.front().path, c.path) << v.front().message;
    EXPECT_NE(v.front().message.find(c.message), std::string::npos) << v.front().message;
    // The Status a caller sees carries the same path.
    const StatusOr<RunReport> r = run_report_from_json(j);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.path), std::string::npos) << r.status().message();
  }
}

TEST(ReportJson, EveryViolationIsListedUpToTheLimit) {
  json j = to_json(testing::full_sample());
  for (json& c : j["checks"]) c["verdict"] = "Maybe";
  EXPECT_EQ(validate_run_json(j).size(), j["checks"].size());
  EXPECT_EQ(validate_run_json(j, 3).size(), 3u);
}

TEST(ReportJson, NonFiniteNumbersAreRefusedBeforeWriting) {
  RunReport r = testing::full_sample();
  r.benchmarks[0].tflops = std::nan("");
  const auto v = check_consistency(r);
  ASSERT_FALSE(v.empty());
  EXPECT_EQ(v.front().path, "$.benchmarks[0].tflops");
  EXPECT_NE(v.front().message.find("not a finite number"), std::string::npos);
}

}  // namespace
}  // namespace detmoe::report
