// The oracle GEMM promises plain left-to-right fp64 sums whatever its blocking, vector width or
// thread split: a naive triple loop must give the same bits.
#include "host/oracle_gemm.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <bit>
#include <random>
#include <vector>

namespace detmoe::testing {
namespace {

using oracle_detail::gemm_fp64;
using oracle_detail::StridedMatrix;

struct GemmCase {
  int64_t M, N, K;
  bool a_transposed, b_transposed, accumulate;
  int64_t ldc_pad;
  int threads;
};

std::vector<double> random_values(int64_t n, std::mt19937_64& rng) {
  // Full-precision values (not bf16): products are inexact, so a fused or reordered sum would
  // show up in the bits.
  std::uniform_real_distribution<double> d(-1.0, 1.0);
  std::vector<double> v(n);
  for (double& x : v) x = d(rng);
  return v;
}

::testing::AssertionResult gemm_matches_naive(const GemmCase& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::vector<double> a = random_values(c.M * c.K, rng), b = random_values(c.K * c.N, rng);
  const int64_t ldc = c.N + c.ldc_pad;
  const std::vector<double> c0 = random_values(c.M * ldc, rng);
  const StridedMatrix A = c.a_transposed ? StridedMatrix{a.data(), 1, c.M} : StridedMatrix{a.data(), c.K, 1};
  const StridedMatrix B = c.b_transposed ? StridedMatrix{b.data(), 1, c.K} : StridedMatrix{b.data(), c.N, 1};

  std::vector<double> fast = c0;
  gemm_fp64(c.M, c.N, c.K, A, B, fast.data(), ldc, c.accumulate, c.threads);
  std::vector<double> naive = c0;
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = 0; j < c.N; ++j) {
      double acc = c.accumulate ? naive[i * ldc + j] : 0.0;
      for (int64_t p = 0; p < c.K; ++p) acc += A.at(i, p) * B.at(p, j);
      naive[i * ldc + j] = acc;
    }
  for (size_t i = 0; i < fast.size(); ++i)
    if (std::bit_cast<uint64_t>(fast[i]) != std::bit_cast<uint64_t>(naive[i]))
      return ::testing::AssertionFailure() << "C[" << i / ldc << "," << i % ldc << "] = " << fast[i] << ", naive "
                                           << naive[i] << " (M=" << c.M << " N=" << c.N << " K=" << c.K << ")";
  return ::testing::AssertionSuccess();
}

TEST(OracleGemm, MatchesNaiveAcrossBlockEdges) {
  // Sizes straddling the register tile (4×8), the K slab (256), the row block (64) and the
  // column block (1024); the padding columns of C must stay untouched.
  const GemmCase cases[] = {
      {1, 1, 1, false, false, false, 0, 1},     {5, 9, 3, true, false, true, 3, 1},
      {67, 33, 257, false, true, false, 1, 1},  {64, 1025, 300, true, true, true, 0, 1},
      {130, 70, 513, false, false, true, 5, 3}, {7, 2100, 300, false, true, false, 0, 4},
      {300, 40, 100, true, false, false, 2, 4}, {3, 3, 0, false, false, false, 0, 1},
  };
  for (const GemmCase& c : cases) EXPECT_TRUE(gemm_matches_naive(c, static_cast<uint64_t>(c.M * 7 + c.N)));
}

TEST(OracleGemm, KZeroClearsOrKeepsC) {
  std::vector<double> c{1.0, 2.0, 3.0, 4.0};
  gemm_fp64(2, 2, 0, {nullptr, 0, 0}, {nullptr, 0, 0}, c.data(), 2, true, 1);
  EXPECT_EQ(c, (std::vector<double>{1.0, 2.0, 3.0, 4.0}));
  gemm_fp64(2, 2, 0, {nullptr, 0, 0}, {nullptr, 0, 0}, c.data(), 2, false, 1);
  EXPECT_EQ(c, (std::vector<double>{0.0, 0.0, 0.0, 0.0}));
}

RC_GTEST_PROP(OracleGemm, AnyShapeLayoutAndThreadCountGivesNaiveBits, ()) {
  const GemmCase c{*rc::gen::inRange<int64_t>(1, 150), *rc::gen::inRange<int64_t>(1, 150),
                   *rc::gen::inRange<int64_t>(1, 600), *rc::gen::arbitrary<bool>(),
                   *rc::gen::arbitrary<bool>(),        *rc::gen::arbitrary<bool>(),
                   *rc::gen::inRange<int64_t>(0, 4),   *rc::gen::inRange(1, 5)};
  RC_ASSERT(gemm_matches_naive(c, *rc::gen::arbitrary<uint64_t>()));
}

}  // namespace
}  // namespace detmoe::testing
