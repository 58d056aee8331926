// The tolerance and bitwise comparisons used against the oracle (CPU only).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "detmoe/compare.h"

namespace detmoe {
namespace {

NamedTensor tensor(const char* name, std::vector<double> v, DType d = DType::kFP32) {
  return make_tensor(name, d, {static_cast<int64_t>(v.size()) / 2, 2}, v);
}

TEST(CompareTolerance, PassesRoundingSizedDifferences) {
  const NamedTensor ref = tensor("y", {1.0, -2.0, 0.5, 4.0});
  const NamedTensor got = tensor("y", {1.0 + 1.0 / 256, -2.0, 0.5, 4.0 - 4.0 / 256});
  const CompareResult r = compare_with_tolerance(got, ref);
  EXPECT_TRUE(r.ok()) << format_tolerance_table({r});
  EXPECT_EQ(r.violations, 0);
  EXPECT_NEAR(r.max_abs_err, 4.0 / 256, 1e-12);
}

TEST(CompareTolerance, NamesTheFirstViolation) {
  const NamedTensor ref = tensor("out", {1.0, 2.0, 3.0, 4.0});
  const NamedTensor got = tensor("out", {1.0, 2.0, 3.5, 5.0});
  const CompareResult r = compare_with_tolerance(got, ref);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.violations, 2);
  EXPECT_EQ(r.first_bad, 2);
  EXPECT_EQ(r.first_bad_index, "[1,0]");
  EXPECT_DOUBLE_EQ(r.first_bad_got, 3.5);
  EXPECT_NE(format_tolerance_table({r}).find("FAIL"), std::string::npos);
}

TEST(CompareTolerance, NanNeverPasses) {
  const NamedTensor ref = tensor("d_x", {1.0, 2.0, 3.0, 4.0});
  const NamedTensor got = tensor("d_x", {1.0, std::numeric_limits<double>::quiet_NaN(), 3.0, 4.0});
  const CompareResult r = compare_with_tolerance(got, ref, {1.0, 1.0});
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.nan_count, 1);
  EXPECT_EQ(count_nan(got), 1);
}

TEST(CompareTolerance, MissingOrMisshapenIsAFailure) {
  const std::vector<NamedTensor> ref = {tensor("out", {1, 2}), tensor("y", {1, 2})};
  const std::vector<NamedTensor> got = {make_tensor("out", DType::kFP32, {2, 1}, {1, 2})};
  const auto r = compare_all_with_tolerance(got, ref);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_FALSE(r[0].ok());  // shape
  EXPECT_FALSE(r[1].ok());  // missing
}

TEST(CompareBitwise, FindsTheFirstDifferingElement) {
  const NamedTensor a = tensor("dw_gate", {1, 2, 3, 4}, DType::kBF16);
  NamedTensor b = a;
  EXPECT_TRUE(compare_bitwise(a, b).equal);
  b = tensor("dw_gate", {1, 2, 3, 4.03125}, DType::kBF16);
  const BitwiseResult r = compare_bitwise(a, b);
  EXPECT_FALSE(r.equal);
  EXPECT_EQ(r.differing, 1);
  EXPECT_EQ(r.first_diff_index, "[1,1]");
  const auto all = compare_all_bitwise({a}, {b}, {"dw_gate"});
  EXPECT_TRUE(all.empty());
}

}  // namespace
}  // namespace detmoe
