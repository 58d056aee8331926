// The golden comparison must report a planted change with the case, the output, the first
// differing element (both values, from the store) and the count — or the chunk without a store.
// And it is symmetric: a record that lacks outputs (or holds none) never passes.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "golden/golden.h"

namespace detmoe::golden {
namespace {

NamedTensor ramp(int64_t rows, int64_t cols) {
  std::vector<double> v(rows * cols);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.25 * static_cast<double>(i % 97);
  return make_tensor("out", DType::kFP32, {rows, cols}, v);
}

void set_fp32(NamedTensor& t, int64_t i, float f) { std::memcpy(&t.bytes[i * 4], &f, 4); }

std::vector<Difference> compare(const CaseRecord& rec, const std::vector<NamedTensor>& fresh, const std::string& store = "") {
  return check_case(rec.name, &rec, fresh, store, "oracle", "cpu").differences;
}

TEST(Golden, UnchangedOutputsPassAndCountRecordedOutputs) {
  const NamedTensor t = ramp(64, 100);
  const CaseRecord rec{"c", {make_output_record(t)}};
  const CaseVerdict v = check_case("c", &rec, {t}, "", "oracle", "cpu");
  EXPECT_TRUE(v.pass());
  EXPECT_EQ(v.recorded, 1);
  EXPECT_EQ(v.matched, 1);
  EXPECT_EQ(v.summary(), "1 recorded outputs bitwise equal");
  ASSERT_EQ(v.outputs.size(), 1u);
  EXPECT_TRUE(v.outputs[0].match);
}

NamedTensor renamed(NamedTensor t, const std::string& name) {
  t.name = name;
  return t;
}

TEST(Golden, CaseRecordedWithNoOutputsFails) {
  const NamedTensor t = ramp(4, 4);
  const CaseRecord empty{"c", {}};
  const CaseVerdict v = check_case("c", &empty, {t, renamed(t, "d_x")}, "", "oracle", "cpu");
  EXPECT_FALSE(v.pass());
  EXPECT_EQ(v.matched, 0);
  EXPECT_NE(v.summary().find("no outputs"), std::string::npos) << v.summary();
  // Even when nothing is produced either: zero recorded outputs is never a pass.
  EXPECT_FALSE(check_case("c", &empty, {}, "", "oracle", "cpu").pass());
}

TEST(Golden, OutputProducedButNotRecordedFails) {
  const NamedTensor out = ramp(4, 4), dx = renamed(ramp(2, 8), "d_x");
  const CaseRecord rec{"c", {make_output_record(out)}};
  const CaseVerdict v = check_case("c", &rec, {out, dx}, "", "oracle", "cpu");
  EXPECT_FALSE(v.pass());
  EXPECT_EQ(v.recorded, 1);
  EXPECT_EQ(v.matched, 1);
  ASSERT_EQ(v.differences.size(), 1u);
  EXPECT_EQ(v.differences[0].output, "d_x");
  EXPECT_NE(v.differences[0].summary.find("not recorded"), std::string::npos) << v.differences[0].summary;
  ASSERT_EQ(v.outputs.size(), 2u);
  EXPECT_EQ(v.outputs[1].output, "d_x");
  EXPECT_TRUE(v.outputs[1].expected_hash.empty());
  EXPECT_FALSE(v.outputs[1].match);
}

TEST(Golden, CaseNotRecordedFails) {
  const CaseVerdict v = check_case("c", nullptr, {ramp(4, 4)}, "", "oracle", "cpu");
  EXPECT_FALSE(v.pass());
  EXPECT_NE(v.summary().find("not recorded"), std::string::npos) << v.summary();
}

TEST(Golden, PlantedChangeIsLocalisedToItsChunkWithoutStore) {
  NamedTensor t = ramp(64, 100);  // 25600 bytes: two 16 KiB chunks
  const CaseRecord rec{"c", {make_output_record(t)}};
  set_fp32(t, 5000, 1234.5f);  // in chunk 1 (bytes 20000..)
  const auto d = compare(rec, {t});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].output, "out");
  EXPECT_NE(d[0].summary.find("1 of 2 chunks"), std::string::npos) << d[0].summary;
  EXPECT_NE(d[0].summary.find("[40,96]"), std::string::npos) << d[0].summary;  // chunk 1 starts at element 4096
}

TEST(Golden, PlantedChangeNamesElementAndBothValuesWithStore) {
  const std::string dir = ::testing::TempDir() + "/golden_store";
  std::filesystem::remove_all(dir);
  NamedTensor t = ramp(64, 100);
  ASSERT_TRUE(store_tensor(dir, "oracle", "cpu", "c", t).ok());
  const CaseRecord rec{"c", {make_output_record(t)}};
  set_fp32(t, 250, -7.0f);
  set_fp32(t, 6000, 3.0f);
  const auto d = compare(rec, {t}, dir);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_NE(d[0].summary.find("[2,50]"), std::string::npos) << d[0].summary;
  EXPECT_NE(d[0].summary.find("recorded 14, now"), std::string::npos) << d[0].summary;  // 0.25 * (250 % 97) = 14
  EXPECT_NE(d[0].summary.find("now -7"), std::string::npos) << d[0].summary;
  EXPECT_NE(d[0].summary.find("2 of 6400 elements differ"), std::string::npos) << d[0].summary;
}

TEST(Golden, MissingOutputAndShapeChangeAreReported) {
  const NamedTensor t = ramp(4, 4);
  const CaseRecord rec{"c", {make_output_record(t)}};
  const auto missing = compare(rec, {});
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_NE(missing[0].summary.find("recorded but was not produced"), std::string::npos) << missing[0].summary;
  const NamedTensor other = ramp(2, 8);
  const auto d = compare(rec, {NamedTensor{"out", other.dtype, other.shape, other.bytes}});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_NE(d[0].summary.find("shape"), std::string::npos);
}

TEST(Golden, HashFileRoundTrips) {
  const std::string path = ::testing::TempDir() + "/golden_hashes/oracle.cpu.json";
  HashFile f{"oracle", "cpu", {{"c", {make_output_record(ramp(8, 8))}}}};
  ASSERT_TRUE(write_hash_file(path, f).ok());
  auto back = read_hash_file(path);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  ASSERT_EQ(back->cases.size(), 1u);
  EXPECT_EQ(back->cases[0].outputs[0].hash, f.cases[0].outputs[0].hash);
  EXPECT_EQ(back->cases[0].outputs[0].chunk_hashes, f.cases[0].outputs[0].chunk_hashes);
}

TEST(Golden, HashFileWithAnOutputTwiceIsRefused) {
  const std::string path = ::testing::TempDir() + "/golden_hashes/twice.json";
  const OutputRecord r = make_output_record(ramp(2, 2));
  ASSERT_TRUE(write_hash_file(path, {"oracle", "cpu", {{"c", {r, r}}}}).ok());
  auto back = read_hash_file(path);
  ASSERT_FALSE(back.ok());
  EXPECT_NE(back.status().message().find("records output out twice"), std::string::npos) << back.status().message();
}

TEST(Golden, CheckedInCasesLoadAndValidate) {
  auto cases = load_cases(DETMOE_SOURCE_DIR "/golden/cases.json");
  ASSERT_TRUE(cases.ok()) << cases.status().to_string();
  EXPECT_GE(cases->size(), 8u);
}

TEST(Golden, BadCaseFileNamesTheProblem) {
  const std::string path = ::testing::TempDir() + "/bad_cases.json";
  {
    std::ofstream f(path);
    f << R"({"schema": "detmoe.golden-cases/1", "cases": [{"name": "x", "shape": "huge", "impls": ["oracle"]}]})";
  }
  auto cases = load_cases(path);
  ASSERT_FALSE(cases.ok());
  EXPECT_NE(cases.status().message().find("huge"), std::string::npos) << cases.status().message();
}

}  // namespace
}  // namespace detmoe::golden
