// Bad input gets a Status that names the offending value — never a crash (DESIGN.md §6).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "detmoe/config.h"
#include "detmoe/problem.h"
#include "detmoe/routing.h"

namespace detmoe {
namespace {

// rapidcheck scales inRange / element / arbitrary by its size parameter, which crowds early cases at
// the low end of each range; `full` draws from the whole range at every size (shrinking still works).
template <class T>
rc::Gen<T> full(rc::Gen<T> gen) {
  return rc::gen::resize(rc::kNominalSize, std::move(gen));
}

const Shape kGood{16, 128, 256, 8, 2, 2, 64};

// The message of a failed Status, with a check of its code.
std::string failure(const Status& status, ErrorCode code = ErrorCode::kInvalidArgument) {
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.code(), code) << status.to_string();
  return status.message();
}

#define EXPECT_MENTIONS(message, text) EXPECT_NE((message).find(text), std::string::npos) << (message)

TEST(ShapeValidation, AcceptsAGoodShape) { EXPECT_TRUE(validate(kGood).ok()); }

TEST(ShapeValidation, RejectsEachFieldOutOfRangeNamingFieldAndValue) {
  struct Case {
    int64_t Shape::*field;
    const char* name;
    int64_t value;
  };
  const Case cases[] = {
      {&Shape::T, "T", 0},    {&Shape::T, "T", -5},          {&Shape::T, "T", kMaxTokensPerRank + 1},
      {&Shape::H, "H", 0},    {&Shape::H, "H", -64},         {&Shape::F, "F", 0},
      {&Shape::F, "F", -128}, {&Shape::E, "E", 0},           {&Shape::E, "E", kMaxExperts + 2},
      {&Shape::k, "k", 0},    {&Shape::k, "k", -1},          {&Shape::P, "P", 0},
      {&Shape::P, "P", -2},   {&Shape::Fs, "Fs", -64},       {&Shape::H, "H", kMaxDim + 64},
  };
  for (const Case& c : cases) {
    Shape s = kGood;
    s.*(c.field) = c.value;
    const std::string message = failure(validate(s));
    EXPECT_MENTIONS(message, fmt::format("{} = {}", c.name, c.value));
  }
}

TEST(ShapeValidation, MisalignedDimensionsNameTheDimensionAndTheMultiple) {
  for (auto [field, name] : {std::pair{&Shape::H, "H"}, std::pair{&Shape::F, "F"}, std::pair{&Shape::Fs, "Fs"}}) {
    Shape s = kGood;
    s.*field = 96;
    const std::string message = failure(validate(s));
    EXPECT_MENTIONS(message, fmt::format("{} = 96", name));
    EXPECT_MENTIONS(message, "multiple of 64");
  }
}

TEST(ShapeValidation, KAboveENamesBoth) {
  Shape s = kGood;
  s.k = 9;
  const std::string message = failure(validate(s));
  EXPECT_MENTIONS(message, "k = 9");
  EXPECT_MENTIONS(message, "E = 8");
}

TEST(ShapeValidation, ExpertsNotDivisibleByRanks) {
  Shape s = kGood;
  s.P = 3;
  const std::string message = failure(validate(s));
  EXPECT_MENTIONS(message, "E = 8");
  EXPECT_MENTIONS(message, "P = 3");
}

// Any field mutated to any value: a Status, never a crash, and ok only if every rule holds.
RC_GTEST_PROP(ShapeValidation, ArbitraryShapesNeverCrash, ()) {
  Shape s = kGood;
  const int field = *full(rc::gen::inRange(0, 7));
  int64_t* fields[] = {&s.T, &s.H, &s.F, &s.E, &s.k, &s.P, &s.Fs};
  *fields[field] = *full(rc::gen::oneOf(rc::gen::inRange<int64_t>(-130, 1100), rc::gen::arbitrary<int64_t>()));
  const Status status = validate(s);
  const bool rules = s.T >= 1 && s.T <= kMaxTokensPerRank && s.H >= 1 && s.H <= kMaxDim && s.H % 64 == 0 &&
                     s.F >= 1 && s.F <= kMaxDim && s.F % 64 == 0 && s.Fs >= 0 && s.Fs <= kMaxDim &&
                     s.Fs % 64 == 0 && s.E >= 1 && s.E <= kMaxExperts && s.k >= 1 && s.k <= kMaxTopK &&
                     s.k <= s.E && s.P >= 1 && s.P <= kMaxRanks && s.E % s.P == 0;
  RC_ASSERT(status.ok() == rules);
  if (!status.ok()) RC_ASSERT(!status.message().empty());
}

// ---- routing -----------------------------------------------------------------------------

const Shape kRouting{3, 64, 64, 8, 3, 1, 0};  // 3 tokens, E = 8, k = 3

struct BadRouting {
  std::vector<int32_t> idx = {0, 1, 2, 3, 4, 5, 6, 7, 0};
  std::vector<float> w = std::vector<float>(9, 0.25f);
  Status validate() const { return validate_routing(kRouting, idx.data(), w.data(), 3); }
};

TEST(RoutingValidation, AcceptsGoodRouting) { EXPECT_TRUE(BadRouting{}.validate().ok()); }

TEST(RoutingValidation, OutOfRangeIdsNameTokenSlotAndValue) {
  BadRouting r;
  r.idx[5] = -3;
  EXPECT_MENTIONS(failure(r.validate()), "topk_idx[1,2] = -3 is out of range [0, 8)");
  r = {};
  r.idx[7] = 8;
  EXPECT_MENTIONS(failure(r.validate()), "topk_idx[2,1] = 8 is out of range [0, 8)");
  r = {};
  r.idx[0] = std::numeric_limits<int32_t>::min();
  EXPECT_MENTIONS(failure(r.validate()), "topk_idx[0,0] = -2147483648");
}

TEST(RoutingValidation, DuplicatesNameBothSlots) {
  BadRouting r;
  r.idx[8] = 6;
  EXPECT_MENTIONS(failure(r.validate()), "topk_idx[2,2] = 6 repeats topk_idx[2,0]");
  r = {};
  r.idx[4] = 3;
  EXPECT_MENTIONS(failure(r.validate()), "topk_idx[1,1] = 3 repeats topk_idx[1,0]");
}

TEST(RoutingValidation, NonFiniteWeightsNameTheValue) {
  BadRouting r;
  r.w[6] = std::nanf("");
  EXPECT_MENTIONS(failure(r.validate()), "topk_w[2,0] = nan is not finite");
  r = {};
  r.w[1] = std::numeric_limits<float>::infinity();
  EXPECT_MENTIONS(failure(r.validate()), "topk_w[0,1] = inf is not finite");
  r = {};
  r.w[2] = -std::numeric_limits<float>::infinity();
  EXPECT_MENTIONS(failure(r.validate()), "topk_w[0,2] = -inf is not finite");
  // Zero and negative weights are allowed: d_topk_w is defined for any finite weight.
  r = {};
  r.w[3] = 0.0f;
  r.w[4] = -1.5f;
  EXPECT_TRUE(r.validate().ok());
}

TEST(RoutingValidation, KAboveEAndTokenCountMismatch) {
  const BadRouting r;
  Shape wide = kRouting;
  wide.k = 9;
  EXPECT_MENTIONS(failure(validate_routing(wide, r.idx.data(), r.w.data(), 3)), "k = 9");
  const std::string message = failure(validate_routing(kRouting, r.idx.data(), r.w.data(), 2));
  EXPECT_MENTIONS(message, "2 tokens");
  EXPECT_MENTIONS(message, "= 3");
  Shape empty = kRouting;
  empty.T = 0;
  EXPECT_MENTIONS(failure(validate_routing(empty, r.idx.data(), r.w.data(), 0)), "T = 0");
  EXPECT_MENTIONS(failure(validate_routing(kRouting, nullptr, r.w.data(), 3)), "topk_idx is null");
  // Weights are optional (the plan validates ids only).
  EXPECT_TRUE(validate_routing(kRouting, r.idx.data(), nullptr, 3).ok());
}

TEST(RoutingValidation, GenerateRejectsABadShape) {
  Shape s = kRouting;
  s.k = 9;
  EXPECT_MENTIONS(failure(generate_routing(s, RoutingSpec{}, 1).status()), "k = 9");
}

// Random corruption of one entry of valid routing is always caught, and named.
RC_GTEST_PROP(RoutingValidation, OneCorruptedEntryIsFoundAndNamed, ()) {
  const Shape s{*full(rc::gen::inRange<int64_t>(1, 20)), 64, 64, 16, *full(rc::gen::inRange<int64_t>(2, 9)), 1, 0};
  Routing r = generate_routing(s, RoutingSpec{}, *full(rc::gen::arbitrary<uint64_t>())).value();
  const int64_t t = *full(rc::gen::inRange<int64_t>(0, r.tokens)), j = *full(rc::gen::inRange<int64_t>(0, s.k));
  const std::string where = fmt::format("[{},{}]", t, j);
  switch (*full(rc::gen::inRange(0, 3))) {
    case 0: {
      const int32_t bad = *full(rc::gen::oneOf(rc::gen::inRange<int32_t>(std::numeric_limits<int32_t>::min(), 0),
                                               rc::gen::inRange<int32_t>(16, std::numeric_limits<int32_t>::max())));
      r.topk_idx[t * s.k + j] = bad;
      const Status status = validate_routing(s, r.topk_idx.data(), r.topk_w.data(), r.tokens);
      RC_ASSERT(!status.ok());
      RC_ASSERT(status.message().find(fmt::format("topk_idx{} = {}", where, bad)) != std::string::npos);
      break;
    }
    case 1: {
      const int64_t other = *full(rc::gen::distinctFrom(rc::gen::inRange<int64_t>(0, s.k), j));
      r.topk_idx[t * s.k + j] = r.topk_idx[t * s.k + other];
      const Status status = validate_routing(s, r.topk_idx.data(), r.topk_w.data(), r.tokens);
      RC_ASSERT(!status.ok());
      const int64_t later = std::max(j, other), earlier = std::min(j, other);
      RC_ASSERT(status.message().find(fmt::format("topk_idx[{},{}] = {} repeats topk_idx[{},{}]", t, later,
                                                  r.topk_idx[t * s.k + j], t, earlier)) != std::string::npos);
      break;
    }
    default: {
      r.topk_w[t * s.k + j] = *full(rc::gen::element(std::nanf(""), std::numeric_limits<float>::infinity(),
                                                     -std::numeric_limits<float>::infinity()));
      const Status status = validate_routing(s, r.topk_idx.data(), r.topk_w.data(), r.tokens);
      RC_ASSERT(!status.ok());
      RC_ASSERT(status.message().find(fmt::format("topk_w{} = ", where)) != std::string::npos);
      break;
    }
  }
}

// ---- layer config --------------------------------------------------------------------------

TEST(ConfigValidation, AcceptsDefaults) { EXPECT_TRUE(validate(LayerConfig{}, kGood).ok()); }

TEST(ConfigValidation, RejectsEachBadKnobNamingTheValue) {
  struct Case {
    LayerConfig config;
    const char* text;
  };
  std::vector<Case> cases;
  LayerConfig c;
  c.num_sms = -1;
  cases.push_back({c, "num_sms = -1"});
  c = {};
  c.comm_sms = -4;
  cases.push_back({c, "comm_sms = -4"});
  c = {};
  c.num_sms = 8;
  c.comm_sms = 8;
  cases.push_back({c, "comm_sms = 8"});
  c = {};
  c.overlap_rows = -7;
  cases.push_back({c, "overlap_rows = -7"});
  c = {};
  c.recv_capacity_rows = -100;
  cases.push_back({c, "recv_capacity_rows = -100"});
  c = {};
  c.spin_timeout_ms = 0;
  cases.push_back({c, "spin_timeout_ms = 0"});
  c = {};
  c.weight_grad_band_budget_kb = -4;
  cases.push_back({c, "weight_grad_band_budget_kb = -4 must be >= 0 (0 = fixed bands)"});
  c = {};
  c.weight_grad_launch = static_cast<WeightGradLaunch>(7);
  cases.push_back({c, "weight_grad_launch = 7 is not one of auto (0), fused (1), gate-up-later (2), second (3)"});
  for (const Case& k : cases) EXPECT_MENTIONS(failure(validate(k.config, kGood)), k.text);
}

// The knob's names (bench flags, fuzz log) parse back to the value whose to_string they are; a bad
// one is refused with the text and the allowed names.
TEST(ConfigValidation, WeightGradLaunchNamesRoundTrip) {
  for (WeightGradLaunch w : kWeightGradLaunches) {
    const StatusOr<WeightGradLaunch> back = parse_weight_grad_launch(to_string(w));
    ASSERT_TRUE(back.ok()) << to_string(w);
    EXPECT_EQ(back.value(), w);
  }
  const StatusOr<WeightGradLaunch> bad = parse_weight_grad_launch("second-launch");
  ASSERT_FALSE(bad.ok());
  EXPECT_MENTIONS(bad.status().message(), "\"second-launch\"");
  EXPECT_MENTIONS(bad.status().message(), "gate-up-later");
}

TEST(ConfigValidation, Fp8IsNotImplementedYetAndSaysSo) {
  LayerConfig c;
  c.precision = Precision::kFP8;
  EXPECT_MENTIONS(failure(validate(c, kGood), ErrorCode::kNotImplemented), "fp8");
}

TEST(ConfigValidation, ChecksTheShapeToo) {
  Shape s = kGood;
  s.H = 100;
  EXPECT_MENTIONS(failure(validate(LayerConfig{}, s)), "H = 100");
}

TEST(ConfigValidation, WorstCaseCapacityIsAllTokensOfAllRanks) {
  EXPECT_EQ(worst_case_recv_rows(kGood), 2 * 16 * 2);          // k ≤ E/P: every slot can land on one rank
  EXPECT_EQ(worst_case_recv_rows(Shape{16, 64, 64, 8, 6, 2, 0}), 2 * 16 * 4);  // k > E/P: at most E/P per token
}

}  // namespace
}  // namespace detmoe
