// The fuzz campaign's problem draws (tools/detmoe/fuzz_cases.h): a pure function of (seed,
// index), always valid, within the limits, covering every routing distribution, EP size and
// option; and shrinking only ever proposes smaller valid problems.
#include "fuzz_cases.h"

#include <gtest/gtest.h>

#include <set>

#include "detmoe/host_problem.h"

namespace detmoe::cli {
namespace {

double size_of(const FuzzCase& c) {
  const Shape& s = c.shape;
  return static_cast<double>(s.T * s.P) * s.k * s.E * s.H * s.F * (s.Fs + 1) * (c.backward ? 2 : 1);
}

TEST(FuzzCases, AreAPureFunctionOfSeedAndIndex) {
  const FuzzLimits limits;
  for (int64_t i = 0; i < 50; ++i) {
    EXPECT_EQ(draw_case(7, i, limits).describe(), draw_case(7, i, limits).describe());
    EXPECT_EQ(draw_case(7, i, limits).index, i);
  }
  EXPECT_NE(draw_case(7, 0, limits).describe(), draw_case(7, 1, limits).describe());
  EXPECT_NE(draw_case(7, 0, limits).describe(), draw_case(8, 0, limits).describe());
}

TEST(FuzzCases, AreValidWithinTheLimitsAndCoverEveryKind) {
  const FuzzLimits limits;
  std::set<int> kinds;
  std::set<int64_t> ranks;
  int shared = 0, backward = 0, bf16 = 0;
  int64_t max_tokens = 0, max_e = 0;
  const int n = 4000;
  for (int64_t i = 0; i < n; ++i) {
    const FuzzCase c = draw_case(11, i, limits);
    const Shape& s = c.shape;
    ASSERT_TRUE(validate(s).ok()) << c.describe() << ": " << validate(s).to_string();
    ASSERT_LE(s.T * s.P, limits.max_tokens) << c.describe();
    ASSERT_LE(s.T * s.P * s.k, limits.max_rows) << c.describe();
    ASSERT_LE(s.E, limits.max_experts);
    ASSERT_LE(s.k, std::min(limits.max_k, s.E));
    ASSERT_EQ(s.E % s.P, 0);
    auto parsed = parse_routing(c.spec.to_string());
    ASSERT_TRUE(parsed.ok()) << c.spec.to_string();
    ASSERT_EQ(parsed->to_string(), c.spec.to_string());
    kinds.insert(static_cast<int>(c.spec.kind));
    ranks.insert(s.P);
    shared += s.Fs > 0;
    backward += c.backward;
    bf16 += c.grad_precision == GradPrecision::kBF16;
    max_tokens = std::max(max_tokens, s.T * s.P);
    max_e = std::max(max_e, s.E);
  }
  EXPECT_EQ(kinds.size(), 5u);  // balanced, zipf, hot expert, all-to-one, empty experts
  EXPECT_EQ(ranks, (std::set<int64_t>{1, 2, 4, 8}));
  EXPECT_GT(shared, n / 4);
  EXPECT_GT(backward, n / 2);
  EXPECT_GT(bf16, n / 4);
  EXPECT_GT(max_tokens, limits.max_tokens / 4);  // the large end is reached
  EXPECT_GT(max_e, limits.max_experts / 4);
}

TEST(FuzzCases, MakeProblemsTheGeneratorAccepts) {
  FuzzLimits small;
  small.max_tokens = 300, small.max_experts = 64, small.max_hidden = 128, small.max_intermediate = 128;
  small.max_shared = 64;
  for (int64_t i = 0; i < 300; ++i) {
    const FuzzCase c = draw_case(3, i, small);
    auto p = make_seeded_problem(c.shape, c.spec, c.data_seed, c.backward, c.grad_precision);
    ASSERT_TRUE(p.ok()) << c.describe() << ": " << p.status().to_string();
  }
}

TEST(FuzzCases, ShrinkingProposesOnlySmallerValidProblems) {
  const FuzzLimits limits;
  int proposed = 0;
  for (int64_t i = 0; i < 500; ++i) {
    const FuzzCase c = draw_case(5, i, limits);
    for (const FuzzCase& s : shrink_candidates(c)) {
      ++proposed;
      ASSERT_TRUE(validate(s.shape).ok()) << s.describe();
      ASSERT_LT(size_of(s), size_of(c)) << c.describe() << " -> " << s.describe();
      ASSERT_TRUE(parse_routing(s.spec.to_string()).ok()) << s.spec.to_string();
    }
  }
  EXPECT_GT(proposed, 1000);
  // The smallest problem has nothing left to shrink.
  FuzzCase tiny = draw_case(5, 0, limits);
  tiny.shape = Shape{1, 64, 64, 1, 1, 1, 0};
  tiny.backward = false;
  tiny.spec = RoutingSpec{};
  EXPECT_TRUE(shrink_candidates(tiny).empty());
}

}  // namespace
}  // namespace detmoe::cli
