// Finite-difference checks of every oracle gradient. In kExact mode nothing is rounded, so the
// backward must be the exact derivative of L = Σ dout·out with respect to each input.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

#include "oracle_test_problem.h"

namespace detmoe::testing {
namespace {

struct InputKind {
  const char* name;
  std::vector<double> OracleInputs::*input;
  std::vector<double> OracleOutputs::*grad;
};

constexpr InputKind kInputKinds[] = {
    {"x", &OracleInputs::x, &OracleOutputs::d_x},
    {"topk_w", &OracleInputs::topk_w, &OracleOutputs::d_topk_w},
    {"w_gate", &OracleInputs::w_gate, &OracleOutputs::dw_gate},
    {"w_up", &OracleInputs::w_up, &OracleOutputs::dw_up},
    {"w_down", &OracleInputs::w_down, &OracleOutputs::dw_down},
    {"ws_gate", &OracleInputs::ws_gate, &OracleOutputs::dws_gate},
    {"ws_up", &OracleInputs::ws_up, &OracleOutputs::dws_up},
    {"ws_down", &OracleInputs::ws_down, &OracleOutputs::dws_down},
};

// Relative step of the central difference (times the tensor's largest magnitude): small enough
// for an O(step²) truncation error far below 1e-6, large enough that fp64 round-off in L stays
// below it too.
constexpr double kRelativeStep = 1e-4;
constexpr double kTolerance = 1e-6;
// Gradients below this fraction of the tensor's largest one are compared absolutely.
constexpr double kFloor = 1e-3;

// L = Σ dout·out of a forward-only exact run.
double loss(const OracleInputs& in, const std::vector<double>& dout) {
  StatusOr<OracleOutputs> o = run_oracle(in, OracleOptions{OracleMode::kExact, GradPrecision::kFP32, 1});
  if (!o.ok()) return std::nan("");
  double l = 0.0;
  for (size_t i = 0; i < dout.size(); ++i) l += dout[i] * o->out[i];
  return l;
}

struct FdResult {
  double worst = 0.0;  // largest relative error seen
  std::string where;   // which element, with both values
  int checked = 0;
};

// Compares the analytic gradient with central differences on `samples` random elements of each
// input tensor (all elements where the tensor has no more than that).
FdResult check_gradients(const OracleInputs& in, int samples, uint64_t seed) {
  FdResult res;
  const OracleOutputs grads = run_checked(in, OracleMode::kExact);
  if (grads.out.empty()) {
    res.worst = INFINITY;
    res.where = "the exact run failed";
    return res;
  }
  OracleInputs probe = in;
  probe.dout.clear();
  std::mt19937_64 rng(seed);
  for (const InputKind& kind : kInputKinds) {
    std::vector<double>& values = probe.*kind.input;
    const std::vector<double>& an = grads.*kind.grad;
    if (values.empty()) continue;
    double scale = 0.0, vmax = 0.0;
    for (double g : an) scale = std::max(scale, std::fabs(g));
    for (double v : values) vmax = std::max(vmax, std::fabs(v));
    const double step = kRelativeStep * vmax;
    std::vector<size_t> idx;
    if (values.size() <= static_cast<size_t>(samples)) {
      for (size_t i = 0; i < values.size(); ++i) idx.push_back(i);
    } else {
      std::uniform_int_distribution<size_t> pick(0, values.size() - 1);
      for (int s = 0; s < samples; ++s) idx.push_back(pick(rng));
    }
    for (size_t i : idx) {
      const double v = values[i];
      values[i] = v + step;
      const double lp = loss(probe, in.dout);
      values[i] = v - step;
      const double lm = loss(probe, in.dout);
      values[i] = v;
      const double fd = (lp - lm) / (2 * step);
      const double err = std::fabs(fd - an[i]) / std::max({std::fabs(fd), std::fabs(an[i]), kFloor * scale});
      ++res.checked;
      if (!(err <= res.worst)) {
        res.worst = err;
        std::ostringstream os;
        os << kind.name << "[" << i << "]: finite difference " << fd << ", analytic " << an[i] << ", relative error "
           << err << " (tensor scale " << scale << ")";
        res.where = os.str();
      }
    }
  }
  return res;
}

TEST(OracleFiniteDifference, EveryElementOfTheSmallestProblem) {
  const Shape s{.T = 1, .H = 64, .F = 64, .E = 1, .k = 1, .P = 1, .Fs = 64};
  const OracleInputs in = make_problem(s, 11);
  const FdResult r = check_gradients(in, 1 << 30, 1);
  EXPECT_EQ(r.checked, 64 + 1 + 6 * 64 * 64);
  EXPECT_LT(r.worst, kTolerance) << r.where;
}

TEST(OracleFiniteDifference, EveryTopKFrom1To8) {
  for (int64_t k = 1; k <= 8; ++k) {
    for (int64_t Fs : {0, 64}) {
      const Shape s{.T = 5, .H = 64, .F = 64, .E = std::max<int64_t>(k, 6), .k = k, .P = 1, .Fs = Fs};
      SCOPED_TRACE(s.to_string());
      const OracleInputs in = make_problem(s, 100 + k);
      const FdResult r = check_gradients(in, 12, k);
      EXPECT_LT(r.worst, kTolerance) << r.where;
    }
  }
}

TEST(OracleFiniteDifference, GlobalBatchOfTwoRanks) {
  const Shape s{.T = 3, .H = 64, .F = 64, .E = 4, .k = 2, .P = 2, .Fs = 64};
  const FdResult r = check_gradients(make_problem(s, 21), 16, 3);
  EXPECT_LT(r.worst, kTolerance) << r.where;
}

RC_GTEST_PROP(OracleFiniteDifference, GradientsMatchCentralDifferences, ()) {
  const int64_t k = *rc::gen::inRange<int64_t>(1, 9);
  const int64_t E = *rc::gen::inRange<int64_t>(k, std::max<int64_t>(k, 6) + 1);
  const Shape s{.T = *rc::gen::inRange<int64_t>(3, 7),
                .H = 64 * *rc::gen::inRange<int64_t>(1, 3),
                .F = 64,
                .E = E,
                .k = k,
                .P = 1,
                .Fs = *rc::gen::element<int64_t>(0, 64)};
  RoutingSpec routing;
  routing.kind = *rc::gen::element(RoutingKind::kBalanced, RoutingKind::kZipf, RoutingKind::kAllToOne);
  const uint64_t seed = *rc::gen::arbitrary<uint64_t>();
  const FdResult r = check_gradients(make_problem(s, seed, routing), 4, seed);
  RC_ASSERT(r.checked > 0);
  if (!(r.worst < kTolerance)) RC_FAIL(s.to_string() + ", " + routing.to_string() + ": " + r.where);
}

}  // namespace
}  // namespace detmoe::testing
