// Exactness: integer-valued bf16 inputs whose every partial sum is exact in fp32, so the GPU
// must reproduce the CPU product bit for bit, for every layout, odd sizes (M, N, K not
// multiples of the tile; M = 0, 1) and empty groups. Every element outside the groups' rows
// and past C's columns must keep its NaN poison.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "detmoe/numeric.h"
#include "gemm_test_util.h"
#include "support/gpu.h"

namespace detmoe::gemm::testing {
namespace {

bool bf16_is_nan(uint16_t b) { return (b & 0x7fffu) > 0x7f80u; }

// Bitwise comparison of C (pitch d.ldc) with the exact reference; ±0 count as equal (the sign
// of an exact zero depends on the order zeros are summed in). Elements the reference marks NaN
// (outside every group) and padding columns must still be NaN.
void expect_exact(const Problem& p, Epilogue e, const DeviceProblem& d, const std::vector<double>& ref) {
  const int64_t cols = out_cols(p, e), ldc = d.ldc, rows = p.c_rows();
  int64_t mismatches = 0;
  std::string first;
  auto note = [&](int64_t r, int64_t j, double want, double got) {
    if (mismatches++ == 0)
      first = "C[" + std::to_string(r) + "," + std::to_string(j) + "] = " + std::to_string(got) + ", want " +
              std::to_string(want);
  };
  if (e == Epilogue::kStoreFP32) {
    const auto c = download<float>(d.c, static_cast<size_t>(rows * ldc));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < ldc; ++j) {
        const double want = j < cols ? ref[r * p.n + j] : std::nan("");
        const float got = c[r * ldc + j];
        const bool ok = std::isnan(want) ? std::isnan(got)
                                         : (float_bits(got) == float_bits(static_cast<float>(want)) ||
                                            (got == 0.0f && want == 0.0));
        if (!ok) note(r, j, want, got);
      }
  } else {
    const auto c = download<uint16_t>(d.c, static_cast<size_t>(rows * ldc));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < ldc; ++j) {
        const double want = j < cols ? ref[r * p.n + j] : std::nan("");
        const uint16_t got = c[r * ldc + j];
        const uint16_t want_bits = float_to_bf16(static_cast<float>(want));
        const bool ok = std::isnan(want) ? bf16_is_nan(got) : (got == want_bits || (want == 0.0 && (got & 0x7fffu) == 0));
        if (!ok) note(r, j, want, bf16_to_float(got));
      }
  }
  EXPECT_EQ(mismatches, 0) << describe(p) << ", epilogue " << to_string(e) << ": first mismatch " << first;
}

void check_exact(const Problem& p, uint64_t seed) {
  const auto a = integer_bf16(static_cast<size_t>(p.a_rows() * p.pitch_a()), -3, 3, seed);
  const auto b = integer_bf16(static_cast<size_t>(p.b_rows() * p.pitch_b()), -3, 3, seed + 1);
  const auto ref = reference_product(p, a, b);
  for (Epilogue e : {Epilogue::kStoreFP32, Epilogue::kStoreBF16}) {
    DeviceProblem d;
    upload_problem(p, a, b, e, d);
    const Status s = run_problem(p, e, d);
    ASSERT_TRUE(s.ok()) << describe(p) << ": " << s.to_string();
    expect_exact(p, e, d, ref);
  }
}

Problem dense(Layout layout, int64_t rows, int64_t n, int64_t k, int64_t m = 0) {
  Problem p;
  p.layout = layout;
  p.rows = rows;
  p.n = n;
  p.k = k;
  p.m = m;
  p.offsets = {0, static_cast<int32_t>(rows)};
  return p;
}

Problem grouped(Layout layout, const std::vector<int32_t>& sizes, int32_t first, int32_t trailing, int64_t n, int64_t k,
                int64_t m = 0) {
  Problem p;
  p.layout = layout;
  p.offsets = offsets_from_sizes(sizes, first);
  p.rows = p.offsets.back() + trailing;
  p.n = n;
  p.k = k;
  p.m = m;
  return p;
}

class GemmExact : public ::testing::TestWithParam<Layout> {};

TEST_P(GemmExact, DenseOddSizes) {
  DETMOE_REQUIRE_GPU();
  const Layout l = GetParam();
  if (l == Layout::kWeightGrad) {
    // (tokens, m, n): tokens is the reduction, any count.
    for (auto [rows, m, n] : {std::tuple{1, 8, 8}, {63, 136, 264}, {200, 264, 72}, {129, 128, 256}})
      check_exact(dense(l, rows, n, 0, m), 100 + rows);
  } else {
    for (auto [rows, n, k] : {std::tuple{1, 8, 64}, {130, 264, 200}, {257, 520, 72}, {128, 256, 64}, {3, 24, 8}})
      check_exact(dense(l, rows, n, k), 200 + rows);
  }
}

TEST_P(GemmExact, GroupedWithEmptyGroups) {
  DETMOE_REQUIRE_GPU();
  const Layout l = GetParam();
  if (l == Layout::kWeightGrad) {
    // Groups with no rows must get exact zeros.
    check_exact(grouped(l, {0, 65, 1, 0, 130, 64}, 3, 5, /*n=*/72, 0, /*m=*/200), 7);
  } else {
    check_exact(grouped(l, {0, 1, 129, 0, 300, 64, 0}, 5, 7, /*n=*/264, /*k=*/136), 8);
  }
}

TEST_P(GemmExact, PaddedLeadingDimensions) {
  DETMOE_REQUIRE_GPU();
  Problem p = GetParam() == Layout::kWeightGrad ? grouped(GetParam(), {70, 0, 33}, 0, 0, 40, 0, 72)
                                                : grouped(GetParam(), {70, 0, 33}, 2, 1, 40, 72);
  p.lda = p.a_cols() + 24;
  p.ldb = p.b_cols() + 8;
  p.ldc = p.n + 16;  // columns n..ldc must stay poisoned
  check_exact(p, 9);
}

TEST_P(GemmExact, EmptyProblemsLaunchNothing) {
  DETMOE_REQUIRE_GPU();
  const Layout l = GetParam();
  Problem p = l == Layout::kWeightGrad ? dense(l, 0, 64, 0, 64) : dense(l, 0, 64, 64);
  // Weight-grad with no rows still writes its (zero) output; the others have no output at all.
  check_exact(p, 10);
}

TEST_P(GemmExact, ZeroReductionGivesZeros) {
  DETMOE_REQUIRE_GPU();
  if (GetParam() == Layout::kWeightGrad) GTEST_SKIP() << "covered by empty groups";
  check_exact(dense(GetParam(), 70, 40, 0), 11);
}

INSTANTIATE_TEST_SUITE_P(Layouts, GemmExact,
                         ::testing::Values(Layout::kForward, Layout::kDataGrad, Layout::kWeightGrad),
                         layout_param_name<::testing::TestParamInfo<Layout>>);

}  // namespace
}  // namespace detmoe::gemm::testing
