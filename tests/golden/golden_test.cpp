// The golden comparison must report a planted change with the case, the output, the first
// differing element (both values, from the store) and the count — or the chunk without a store.
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

TEST(Golden, UnchangedOutputsGiveNoDifference) {
  const NamedTensor t = ramp(64, 100);
  const CaseRecord rec{"c", {make_output_record(t)}};
  EXPECT_TRUE(compare_case(rec, {t}, "", "oracle", "cpu").empty());
}

TEST(Golden, PlantedChangeIsLocalisedToItsChunkWithoutStore) {
  NamedTensor t = ramp(64, 100);  // 25600 bytes: two 16 KiB chunks
  const CaseRecord rec{"c", {make_output_record(t)}};
  set_fp32(t, 5000, 1234.5f);  // in chunk 1 (bytes 20000..)
  const auto d = compare_case(rec, {t}, "", "oracle", "cpu");
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
  const auto d = compare_case(rec, {t}, dir, "oracle", "cpu");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_NE(d[0].summary.find("[2,50]"), std::string::npos) << d[0].summary;
  EXPECT_NE(d[0].summary.find("recorded 14, now"), std::string::npos) << d[0].summary;  // 0.25 * (250 % 97) = 14
  EXPECT_NE(d[0].summary.find("now -7"), std::string::npos) << d[0].summary;
  EXPECT_NE(d[0].summary.find("2 of 6400 elements differ"), std::string::npos) << d[0].summary;
}

TEST(Golden, MissingOutputAndShapeChangeAreReported) {
  const NamedTensor t = ramp(4, 4);
  const CaseRecord rec{"c", {make_output_record(t)}};
  EXPECT_EQ(compare_case(rec, {}, "", "oracle", "cpu").size(), 1u);
  const NamedTensor other = ramp(2, 8);
  const auto d = compare_case(rec, {NamedTensor{"out", other.dtype, other.shape, other.bytes}}, "", "oracle", "cpu");
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
