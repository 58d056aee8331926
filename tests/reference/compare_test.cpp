// The tolerance and bitwise comparisons used against the oracle (CPU only).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "detmoe/compare.h"
#include "detmoe/numeric.h"

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

// One weight-gradient element Σ_r a_r·b_r over a few rows as the oracle and a GPU form it: b_r is
// an input (bf16), a_r a computed operand (dg, du, a or dy) whose exact value lies just short of
// a bf16 rounding midpoint. The oracle rounds it once (fp64 → bf16); the GPU's fp32 value is a
// few fp32 ulps off and rounds to the neighbouring bf16 value (a flip, docs/NUMERICS.md §3),
// then it sums in fp32. Each flip moves its term by one bf16 ulp of a_r; `toward` picks the
// side of each flip, so a test can line them all up (the worst case) with the signs of b.
struct TermSum {
  double oracle = 0, gpu = 0, magnitude = 0;
};

TermSum term_sum(const std::vector<double>& a_bf16, const std::vector<double>& b, const std::vector<int>& toward) {
  TermSum t;
  float acc = 0.0f;
  for (size_t r = 0; r < b.size(); ++r) {
    const double ulp = std::ldexp(1.0, std::ilogb(a_bf16[r]) - 7);
    // 2⁻¹⁴ ulp short of the midpoint (4 fp32 ulps); the GPU's value is about 12 fp32 ulps further out.
    const double exact = a_bf16[r] + toward[r] * ulp * (0.5 - std::ldexp(1.0, -14));
    const double oracle_a = round_to_bf16(exact);
    const double gpu_a = round_bf16(static_cast<float>(exact * (1.0 + toward[r] * std::ldexp(1.0, -20))));
    EXPECT_EQ(oracle_a, a_bf16[r]);
    EXPECT_EQ(std::fabs(gpu_a - oracle_a), ulp) << "not a flip";
    t.oracle += oracle_a * b[r];
    acc += static_cast<float>(gpu_a * b[r]);
    t.magnitude += std::fabs(oracle_a) * std::fabs(b[r]);
  }
  t.gpu = acc;
  return t;
}

// Eight elements of dw_gate, each a sum over four rows: seven ordinary ones (terms of 0.6 to 3.3,
// no cancellation) and, at [2,1], one whose terms of ±5 to ±7.5 nearly cancel (sum 0.5): the
// shape of the qwen3-30b-a3b@T64 finding (about 4 rows per expert). `drop_row` ≥ 0 leaves that
// row of the cancelling sum out of the GPU's value, `wrong_b_row` ≥ 0 gives that row another
// row's input operand.
struct FewRowGradient {
  NamedTensor oracle, gpu, magnitude;
};

FewRowGradient few_row_gradient(int drop_row = -1, int wrong_b_row = -1) {
  const std::vector<double> a = {1.5, 1.25, 1.75, 1.5};
  std::vector<double> o, g, m;
  for (int e = 0; e < 8; ++e) {
    const bool cancelling = e == 5;
    const double scale = cancelling ? 1.0 : 0.125 * ((e % 3) + 1) * (e % 2 ? -1 : 1);
    std::vector<double> b = {4 * scale, -4 * scale, 4 * scale, -5 * scale};
    if (!cancelling) b[1] = -b[1];  // no cancellation: all but the last term share a sign
    // Every flip on the side that moves Σ one way: the largest error four flips can make.
    std::vector<int> toward;
    for (double v : b) toward.push_back(v > 0 ? 1 : -1);
    TermSum t = term_sum(a, b, toward);
    if (cancelling && (drop_row >= 0 || wrong_b_row >= 0)) {
      std::vector<double> b_bug = b;
      if (drop_row >= 0) b_bug[drop_row] = 0.0;
      if (wrong_b_row >= 0) b_bug[wrong_b_row] = b[(wrong_b_row + 1) % 4];
      t.gpu = term_sum(a, b_bug, toward).gpu;
    }
    o.push_back(t.oracle);
    g.push_back(t.gpu);
    m.push_back(t.magnitude);
  }
  return {make_tensor("dw_gate", DType::kFP32, {4, 2}, o), make_tensor("dw_gate", DType::kFP32, {4, 2}, g),
          make_tensor("dw_gate", DType::kFP32, {4, 2}, m)};
}

TEST(CompareTolerance, CancellingSumOfFewRowsFailsTheRmsRuleButNotItsTerms) {
  const FewRowGradient f = few_row_gradient();
  // Without a magnitude (the rule before docs/NUMERICS.md §7 was resolved): four aligned flips
  // in terms of ±5 to ±7.5 exceed 2⁻⁵·rms of a tensor whose other sums are small.
  const CompareResult rms_only = compare_with_tolerance(f.gpu, f.oracle);
  EXPECT_FALSE(rms_only.ok()) << format_tolerance_table({rms_only});
  EXPECT_EQ(rms_only.violations, 1);
  EXPECT_EQ(rms_only.first_bad_index, "[2,1]");
  EXPECT_FALSE(rms_only.has_magnitude);
  EXPECT_EQ(rms_only.worst_bound, ToleranceBound::kRms);
  // With it, the same error is a small part of 4·2⁻⁸·Σ|terms|.
  const CompareResult r = compare_with_tolerance(f.gpu, f.oracle, {}, &f.magnitude);
  EXPECT_TRUE(r.ok()) << format_tolerance_table({r});
  EXPECT_TRUE(r.has_magnitude);
  EXPECT_EQ(r.passed_by_terms, 1);
  EXPECT_EQ(r.worst_bound, ToleranceBound::kTerms);
  EXPECT_LT(r.max_err_ratio, 0.5);
  EXPECT_GT(r.max_err_ratio, 0.1);  // the error is real, not zero
  EXPECT_NE(format_tolerance_table({r}).find("1 passed by Σ|terms| only"), std::string::npos);
}

TEST(CompareTolerance, TermsClauseStillFailsADroppedOrWrongRow) {
  // A bug's error is a whole term: 5 to 7.5 here against 4·2⁻⁸·Σ|terms| = 0.4, so every
  // variant is over ten times outside (the test asks for four).
  for (int row = 0; row < 4; ++row) {
    SCOPED_TRACE("row " + std::to_string(row));
    const FewRowGradient dropped = few_row_gradient(row, -1);
    const CompareResult d = compare_with_tolerance(dropped.gpu, dropped.oracle, {}, &dropped.magnitude);
    EXPECT_FALSE(d.ok());
    EXPECT_EQ(d.violations, 1);
    EXPECT_EQ(d.first_bad_index, "[2,1]");
    EXPECT_GT(d.max_err_ratio, 4.0);
    const FewRowGradient wrong = few_row_gradient(-1, row);
    const CompareResult w = compare_with_tolerance(wrong.gpu, wrong.oracle, {}, &wrong.magnitude);
    EXPECT_FALSE(w.ok());
    EXPECT_GT(w.max_err_ratio, 4.0);
  }
}

TEST(CompareTolerance, MagnitudesApplyByNameAndMustMatchTheShape) {
  const FewRowGradient f = few_row_gradient();
  NamedTensor y = f.gpu, y_ref = f.oracle;
  y.name = y_ref.name = "y";
  // The dw_gate magnitude helps dw_gate only; y keeps the rms rule and fails.
  const auto all = compare_all_with_tolerance({f.gpu, y}, {f.oracle, y_ref}, {}, {f.magnitude});
  ASSERT_EQ(all.size(), 2u);
  EXPECT_TRUE(all[0].ok() && all[0].has_magnitude);
  EXPECT_FALSE(all[1].ok() || all[1].has_magnitude);
  // A magnitude of another shape is a problem, not a silently ignored bound.
  const NamedTensor wrong = make_tensor("dw_gate", DType::kFP32, {8}, std::vector<double>(8, 1e6));
  const CompareResult r = compare_with_tolerance(f.gpu, f.oracle, {}, &wrong);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.problem.find("magnitude"), std::string::npos);
  // NaN or negative magnitudes allow nothing beyond the rms rule.
  const NamedTensor nan =
      make_tensor("dw_gate", DType::kFP32, {4, 2}, std::vector<double>(8, std::numeric_limits<double>::quiet_NaN()));
  EXPECT_FALSE(compare_with_tolerance(f.gpu, f.oracle, {}, &nan).ok());
  const NamedTensor negative = make_tensor("dw_gate", DType::kFP32, {4, 2}, std::vector<double>(8, -1e6));
  EXPECT_FALSE(compare_with_tolerance(f.gpu, f.oracle, {}, &negative).ok());
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
