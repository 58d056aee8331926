// Bad input to the oracle gets a Status naming the value, never a crash; and the two helpers
// around it (input widening, output tensors) keep their documented layout.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "detmoe/data.h"
#include "detmoe/numeric.h"
#include "detmoe/routing.h"
#include "oracle_test_problem.h"

namespace detmoe::testing {
namespace {

const Shape kShape{.T = 4, .H = 64, .F = 64, .E = 4, .k = 2, .P = 1, .Fs = 64};

struct InputField {
  const char* name;
  std::vector<double> OracleInputs::*values;
};

void showValue(const InputField& f, std::ostream& os) { os << f.name; }

constexpr InputField kDoubleFields[] = {
    {"x", &OracleInputs::x},         {"topk_w", &OracleInputs::topk_w},   {"w_gate", &OracleInputs::w_gate},
    {"w_up", &OracleInputs::w_up},   {"w_down", &OracleInputs::w_down},   {"ws_gate", &OracleInputs::ws_gate},
    {"ws_up", &OracleInputs::ws_up}, {"ws_down", &OracleInputs::ws_down}, {"dout", &OracleInputs::dout},
};

// The error of a run that must fail ("" when it unexpectedly succeeds).
std::string error_of(const OracleInputs& in, const OracleOptions& options = {}) {
  StatusOr<OracleOutputs> o = run_oracle(in, options);
  if (o.ok()) return "";
  EXPECT_EQ(o.status().code(), ErrorCode::kInvalidArgument);
  return o.status().message();
}

TEST(OracleInput, EveryWrongBufferSizeIsNamed) {
  const OracleInputs good = make_problem(kShape, 1);
  for (const InputField& f : kDoubleFields) {
    for (int delta : {-1, 1}) {
      SCOPED_TRACE(std::string(f.name) + " size " + std::to_string(delta));
      OracleInputs in = good;
      (in.*f.values).resize((in.*f.values).size() + delta);
      const std::string why = error_of(in);
      EXPECT_EQ(
          why.rfind(std::string(f.name) + " has " + std::to_string((in.*f.values).size()) + " values, expected", 0), 0u)
          << why;
    }
  }
  OracleInputs in = good;
  in.topk_idx.pop_back();
  EXPECT_EQ(error_of(in).rfind("topk_idx has 7 values, expected P·T·k = 8", 0), 0u) << error_of(in);
}

TEST(OracleInput, TheBriefsExampleMessage) {
  OracleInputs in = make_problem({.T = 2, .H = 64, .F = 64, .E = 2, .k = 1, .P = 1, .Fs = 0}, 1);
  in.x.resize(100);
  EXPECT_EQ(error_of(in).rfind("x has 100 values, expected P·T·H = 128", 0), 0u) << error_of(in);
}

TEST(OracleInput, SharedWeightsWithoutASharedExpertAreRejected) {
  Shape s = kShape;
  s.Fs = 0;
  OracleInputs in = make_problem(s, 1);
  in.ws_up.assign(64 * 64, 0.0);
  EXPECT_EQ(error_of(in).rfind("ws_up has 4096 values, expected Fs·H = 0", 0), 0u) << error_of(in);
}

TEST(OracleInput, ForwardOnlyNeedsNoDout) {
  OracleInputs in = make_problem(kShape, 1);
  in.dout.clear();
  EXPECT_TRUE(run_oracle(in, {}).ok());
}

TEST(OracleInput, BadShapeIsNamed) {
  OracleInputs in = make_problem(kShape, 1);
  in.shape.H = 100;
  EXPECT_NE(error_of(in).find("H = 100"), std::string::npos) << error_of(in);
  in.shape = kShape;
  in.shape.k = 5;
  EXPECT_NE(error_of(in).find("k = 5"), std::string::npos) << error_of(in);
}

TEST(OracleInput, BadRoutingIsNamed) {
  const OracleInputs good = make_problem(kShape, 1);
  OracleInputs in = good;
  in.topk_idx[2 * 2 + 1] = 4;
  EXPECT_NE(error_of(in).find("topk_idx[2,1] = 4"), std::string::npos) << error_of(in);
  in = good;
  in.topk_idx[1 * 2 + 0] = -3;
  EXPECT_NE(error_of(in).find("topk_idx[1,0] = -3"), std::string::npos) << error_of(in);
  in = good;
  in.topk_idx[3 * 2 + 1] = in.topk_idx[3 * 2 + 0];
  EXPECT_NE(error_of(in).find("topk_idx[3,1]"), std::string::npos) << error_of(in);
  in = good;
  in.topk_w[0 * 2 + 1] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_NE(error_of(in).find("topk_w[0,1] = nan is not finite"), std::string::npos) << error_of(in);
  in = good;
  in.topk_w[3] = 1e300;  // finite but not fp32: not a routing error, the oracle runs in fp64
  EXPECT_TRUE(run_oracle(in, {}).ok());
}

TEST(OracleInput, NonFiniteValuesAreNamed) {
  const OracleInputs good = make_problem(kShape, 1);
  OracleInputs in = good;
  in.x[1 * 64 + 2] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(error_of(in), "x[1,2] = nan is not finite");
  in = good;
  in.w_down[(3 * 64 + 5) * 64 + 7] = -INFINITY;
  EXPECT_EQ(error_of(in), "w_down[3,5,7] = -inf is not finite");
  in = good;
  in.dout.back() = INFINITY;
  EXPECT_EQ(error_of(in), "dout[3,63] = inf is not finite");
}

TEST(OracleInput, NegativeThreadCountIsNamed) {
  const OracleInputs in = make_problem(kShape, 1);
  EXPECT_NE(error_of(in, {OracleMode::kContract, GradPrecision::kFP32, -2}).find("threads = -2"), std::string::npos);
}

RC_GTEST_PROP(OracleInput, ResizedBuffersAlwaysGiveAStatus, ()) {
  OracleInputs in = make_problem(kShape, 1);
  const InputField f = *rc::gen::elementOf(std::vector<InputField>(std::begin(kDoubleFields), std::end(kDoubleFields)));
  auto& v = in.*f.values;
  const size_t size = *rc::gen::inRange<size_t>(0, 2 * v.size() + 2);
  RC_PRE(size != v.size() && !(f.name == std::string("dout") && size == 0));
  v.resize(size, 0.5);
  const StatusOr<OracleOutputs> o = run_oracle(in, {});
  RC_ASSERT(!o.ok());
  RC_ASSERT(o.status().message().rfind(std::string(f.name) + " has ", 0) == 0u);
}

TEST(OracleInput, MakeOracleInputsWidensBf16Bits) {
  const LayerData data = generate_layer_data(kShape, 3);
  const Routing routing = generate_routing(kShape, {}, 3).value();
  const OracleInputs in = make_oracle_inputs(data, routing);
  EXPECT_EQ(in.shape, kShape);
  ASSERT_EQ(in.w_down.size(), data.w_down.size());
  for (size_t i = 0; i < data.w_down.size(); ++i) ASSERT_EQ(in.w_down[i], float_from_bf16_bits(data.w_down[i]));
  ASSERT_EQ(in.ws_gate.size(), data.ws_gate.size());
  for (size_t i = 0; i < data.x.size(); ++i) ASSERT_EQ(in.x[i], float_from_bf16_bits(data.x[i]));
  EXPECT_EQ(in.topk_idx, routing.topk_idx);
  for (size_t i = 0; i < routing.topk_w.size(); ++i) ASSERT_EQ(in.topk_w[i], routing.topk_w[i]);
  EXPECT_EQ(in.dout.size(), data.dout.size());
}

struct TensorLayout {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
};

std::vector<TensorLayout> layout_of(const std::vector<NamedTensor>& ts) {
  std::vector<TensorLayout> out;
  for (const NamedTensor& t : ts) out.push_back({t.name, t.dtype, t.shape});
  return out;
}

bool operator==(const TensorLayout& a, const TensorLayout& b) {
  return a.name == b.name && a.dtype == b.dtype && a.shape == b.shape;
}

void PrintTo(const TensorLayout& t, std::ostream* os) { *os << t.name << ":" << to_string(t.dtype); }

TEST(OracleInput, OutputTensorsHaveAFixedOrderAndTheirDtypes) {
  const Shape s{.T = 3, .H = 64, .F = 128, .E = 4, .k = 2, .P = 2, .Fs = 64};
  const OracleInputs in = make_problem(s, 2);
  using D = DType;
  const OracleOptions bf16_grads{OracleMode::kContract, GradPrecision::kBF16, 1};
  const OracleOutputs o = run_checked(in, OracleMode::kContract, 1, GradPrecision::kBF16);
  const std::vector<NamedTensor> ts = oracle_output_tensors(o, s, bf16_grads);
  EXPECT_EQ(layout_of(ts), (std::vector<TensorLayout>{{"out", D::kBF16, {6, 64}},
                                                      {"y", D::kBF16, {6, 2, 64}},
                                                      {"d_x", D::kBF16, {6, 64}},
                                                      {"d_topk_w", D::kFP32, {6, 2}},
                                                      {"dw_gate", D::kBF16, {4, 128, 64}},
                                                      {"dw_up", D::kBF16, {4, 128, 64}},
                                                      {"dw_down", D::kBF16, {4, 64, 128}},
                                                      {"dws_gate", D::kBF16, {64, 64}},
                                                      {"dws_up", D::kBF16, {64, 64}},
                                                      {"dws_down", D::kBF16, {64, 64}}}));
  // Stored bits are the oracle's values.
  for (int64_t i = 0; i < ts[3].numel(); ++i) ASSERT_EQ(ts[3].at(i), o.d_topk_w[i]);
  for (int64_t i = 0; i < ts[6].numel(); ++i) ASSERT_EQ(ts[6].at(i), o.dw_down[i]);

  const OracleOptions exact{OracleMode::kExact, GradPrecision::kFP32, 1};
  for (const NamedTensor& t : oracle_output_tensors(run_checked(in, OracleMode::kExact), s, exact))
    EXPECT_EQ(t.dtype, D::kFP64) << t.name;

  const OracleOptions contract{};
  for (const NamedTensor& t : oracle_output_tensors(run_checked(in), s, contract))
    if (t.name.rfind("dw", 0) == 0) {
      EXPECT_EQ(t.dtype, D::kFP32) << t.name;
    }

  OracleInputs fwd = in;
  fwd.dout.clear();
  Shape no_shared = s;
  EXPECT_EQ(oracle_output_tensors(run_checked(fwd), s, contract).size(), 2u);
  no_shared.Fs = 0;
  EXPECT_EQ(oracle_output_tensors(run_checked(make_problem(no_shared, 2)), no_shared, contract).size(), 7u);
}

}  // namespace
}  // namespace detmoe::testing
