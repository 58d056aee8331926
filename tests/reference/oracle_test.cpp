// Contract-mode properties of the CPU oracle: agreement with a loop-by-loop implementation,
// rounding points, exact zeros for idle experts, row independence (D3), thread invariance.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "oracle_naive.h"
#include "oracle_test_problem.h"

namespace detmoe::testing {
namespace {

rc::Gen<Shape> small_shapes() {
  return rc::gen::exec([] {
    const int64_t k = *rc::gen::inRange<int64_t>(1, 9);
    const int64_t P = *rc::gen::element<int64_t>(1, 2);
    int64_t E = *rc::gen::inRange<int64_t>(k, k + 5);
    E += E % P;  // experts split evenly over ranks
    return Shape{.T = *rc::gen::inRange<int64_t>(1, 13),
                 .H = 64 * *rc::gen::inRange<int64_t>(1, 4),
                 .F = 64 * *rc::gen::inRange<int64_t>(1, 3),
                 .E = E,
                 .k = k,
                 .P = P,
                 .Fs = *rc::gen::element<int64_t>(0, 64, 128)};
  });
}

rc::Gen<RoutingSpec> routing_specs(const Shape& s) {
  return rc::gen::exec([s] {
    RoutingSpec r;
    r.kind = *rc::gen::element(RoutingKind::kBalanced, RoutingKind::kZipf, RoutingKind::kHotExpert,
                               RoutingKind::kAllToOne, RoutingKind::kEmptyExperts);
    r.hot_expert = *rc::gen::inRange<int64_t>(0, s.E);
    r.empty_experts = *rc::gen::inRange<int64_t>(0, s.E - s.k + 1);
    return r;
  });
}

bool is_bf16(double v) { return round_to_bf16(v) == v; }
bool is_fp32(double v) { return round_to_fp32(v) == v; }

// ||a − b|| / ||b|| over all elements.
double relative_l2(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

TEST(OracleContract, MatchesNaiveImplementationBitwise) {
  struct Case {
    Shape shape;
    OracleMode mode;
    GradPrecision grad;
  };
  const Case cases[] = {
      // Weight-gradient sums over more rows than one K slab (256).
      {{.T = 300, .H = 64, .F = 64, .E = 2, .k = 2, .P = 1, .Fs = 64}, OracleMode::kContract, GradPrecision::kFP32},
      // x·Wᵀ over H > 256 and a down projection with F > 256.
      {{.T = 6, .H = 320, .F = 320, .E = 3, .k = 2, .P = 1, .Fs = 0}, OracleMode::kContract, GradPrecision::kBF16},
      {{.T = 7, .H = 128, .F = 64, .E = 8, .k = 8, .P = 2, .Fs = 128}, OracleMode::kExact, GradPrecision::kFP32},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.shape.to_string());
    const OracleInputs in = make_problem(c.shape, 5);
    EXPECT_TRUE(same_bits(run_checked(in, c.mode, 2, c.grad), naive_oracle(in, c.mode, c.grad)));
  }
}

RC_GTEST_PROP(OracleContract, AnyProblemMatchesNaiveImplementationBitwise, ()) {
  const Shape s = *small_shapes();
  const RoutingSpec routing = *routing_specs(s);
  const OracleMode mode = *rc::gen::element(OracleMode::kContract, OracleMode::kExact);
  const GradPrecision grad = *rc::gen::element(GradPrecision::kFP32, GradPrecision::kBF16);
  const OracleInputs in = make_problem(s, *rc::gen::arbitrary<uint64_t>(), routing);
  RC_ASSERT(same_bits(run_checked(in, mode, 1, grad), naive_oracle(in, mode, grad)));
}

RC_GTEST_PROP(OracleContract, OutputsHoldTheirStorageDtypes, ()) {
  const Shape s = *small_shapes();
  const GradPrecision grad = *rc::gen::element(GradPrecision::kFP32, GradPrecision::kBF16);
  const OracleOutputs o =
      run_checked(make_problem(s, *rc::gen::arbitrary<uint64_t>(), *routing_specs(s)), OracleMode::kContract, 1, grad);
  RC_ASSERT(std::all_of(o.out.begin(), o.out.end(), is_bf16));
  RC_ASSERT(std::all_of(o.y.begin(), o.y.end(), is_bf16));
  RC_ASSERT(std::all_of(o.d_x.begin(), o.d_x.end(), is_bf16));
  RC_ASSERT(std::all_of(o.d_topk_w.begin(), o.d_topk_w.end(), is_fp32));
  const auto grad_ok = grad == GradPrecision::kFP32 ? is_fp32 : is_bf16;
  for (const auto* w : {&o.dw_gate, &o.dw_up, &o.dw_down, &o.dws_gate, &o.dws_up, &o.dws_down})
    RC_ASSERT(std::all_of(w->begin(), w->end(), grad_ok));
  // The outputs are not trivially representable: bf16 values would also pass the fp32 checks.
  if (grad == GradPrecision::kFP32)
    RC_ASSERT(std::any_of(o.dw_down.begin(), o.dw_down.end(), [](double v) { return !is_bf16(v); }));
}

TEST(OracleContract, ExpertsWithoutTokensGetExactZeroGradients) {
  const Shape s{.T = 24, .H = 64, .F = 64, .E = 8, .k = 2, .P = 1, .Fs = 0};
  RoutingSpec routing;
  routing.kind = RoutingKind::kEmptyExperts;
  routing.empty_experts = 3;
  const OracleInputs in = make_problem(s, 9, routing);
  const OracleOutputs o = run_checked(in);
  std::vector<int> rows(s.E, 0);
  for (int32_t e : in.topk_idx) ++rows[e];
  ASSERT_EQ(std::count(rows.begin(), rows.end(), 0), 3);
  const int64_t FH = s.F * s.H;
  for (int64_t e = 0; e < s.E; ++e) {
    SCOPED_TRACE("expert " + std::to_string(e) + " with " + std::to_string(rows[e]) + " rows");
    for (const auto* w : {&o.dw_gate, &o.dw_up, &o.dw_down}) {
      const auto begin = w->begin() + e * FH, end = begin + FH;
      if (rows[e] == 0)
        EXPECT_TRUE(std::all_of(begin, end, [](double v) { return v == 0.0 && !std::signbit(v); }));
      else
        EXPECT_TRUE(std::any_of(begin, end, [](double v) { return v != 0.0; }));
    }
  }
}

TEST(OracleContract, ForwardOnlyGivesTheSameForwardBits) {
  const Shape s{.T = 10, .H = 128, .F = 64, .E = 4, .k = 2, .P = 1, .Fs = 64};
  const OracleInputs in = make_problem(s, 4);
  OracleInputs fwd = in;
  fwd.dout.clear();
  const OracleOutputs a = run_checked(in), b = run_checked(fwd);
  EXPECT_TRUE(same_bits("out", a.out, b.out));
  EXPECT_TRUE(same_bits("y", a.y, b.y));
  EXPECT_TRUE(b.d_x.empty() && b.d_topk_w.empty() && b.dw_gate.empty() && b.dws_gate.empty());
}

// D3: out[t], y[t], d_x[t] and d_topk_w[t] depend only on token t.
RC_GTEST_PROP(OracleContract, PermutingTokensPermutesRowsBitwise, ()) {
  const Shape s = *small_shapes();
  const OracleInputs in = make_problem(s, *rc::gen::arbitrary<uint64_t>(), *routing_specs(s));
  std::vector<int64_t> perm(s.tokens_global());
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937_64 rng(*rc::gen::arbitrary<uint64_t>());
  std::shuffle(perm.begin(), perm.end(), rng);
  OracleInputs permuted = take_tokens(in, perm);
  permuted.shape = in.shape;  // same P·T tokens, so keep the original P
  const OracleOutputs a = run_checked(in), b = run_checked(permuted);
  RC_ASSERT(same_bits("out", take_rows(a.out, s.H, perm), b.out));
  RC_ASSERT(same_bits("y", take_rows(a.y, s.k * s.H, perm), b.y));
  RC_ASSERT(same_bits("d_x", take_rows(a.d_x, s.H, perm), b.d_x));
  RC_ASSERT(same_bits("d_topk_w", take_rows(a.d_topk_w, s.k, perm), b.d_topk_w));
}

RC_GTEST_PROP(OracleContract, ATokenSubsetReproducesItsRowsBitwise, ()) {
  const Shape s = *small_shapes();
  const OracleInputs in = make_problem(s, *rc::gen::arbitrary<uint64_t>(), *routing_specs(s));
  const int64_t N = s.tokens_global();
  const auto keep = *rc::gen::container<std::vector<bool>>(N, rc::gen::arbitrary<bool>());
  std::vector<int64_t> subset;
  for (int64_t t = 0; t < N; ++t)
    if (keep[t]) subset.push_back(t);
  RC_PRE(!subset.empty());
  std::mt19937_64 rng(*rc::gen::arbitrary<uint64_t>());
  std::shuffle(subset.begin(), subset.end(), rng);  // any order, not only increasing
  const OracleOutputs a = run_checked(in), b = run_checked(take_tokens(in, subset));
  RC_ASSERT(same_bits("out", take_rows(a.out, s.H, subset), b.out));
  RC_ASSERT(same_bits("y", take_rows(a.y, s.k * s.H, subset), b.y));
  RC_ASSERT(same_bits("d_x", take_rows(a.d_x, s.H, subset), b.d_x));
  RC_ASSERT(same_bits("d_topk_w", take_rows(a.d_topk_w, s.k, subset), b.d_topk_w));
}

TEST(OracleContract, ThreadCountNeverChangesBits) {
  // Big enough that every GEMM is split over threads (about a million multiply-adds each).
  const Shape s{.T = 256, .H = 256, .F = 128, .E = 4, .k = 2, .P = 1, .Fs = 128};
  const OracleInputs in = make_problem(s, 17);
  const OracleOutputs one = run_checked(in, OracleMode::kContract, 1);
  for (int threads : {2, 3, 4, 0}) {
    SCOPED_TRACE("threads = " + std::to_string(threads));
    EXPECT_TRUE(same_bits(one, run_checked(in, OracleMode::kContract, threads)));
  }
}

TEST(OracleContract, StaysCloseToTheUnroundedLayer) {
  // Sanity of the rounding points: bf16 rounding at each contract point moves the results by
  // about 2^-8 relative (0.3-0.4 % observed), never by a per cent.
  const Shape s{.T = 64, .H = 256, .F = 128, .E = 4, .k = 2, .P = 1, .Fs = 64};
  const OracleInputs in = make_problem(s, 23);
  const OracleOutputs c = run_checked(in, OracleMode::kContract), e = run_checked(in, OracleMode::kExact);
  const auto fc = output_fields(c), fe = output_fields(e);
  for (size_t i = 0; i < fc.size(); ++i) {
    const double rel = relative_l2(*fc[i].second, *fe[i].second);
    EXPECT_LT(rel, 0.01) << fc[i].first;
    EXPECT_GT(rel, 0.0) << fc[i].first << " is not rounded at all";
  }
}

}  // namespace
}  // namespace detmoe::testing
