// Golden sensitivity: a golden case is only worth the changes it can see. With random data a
// reordered slot sum flips a handful of elements (1 of 65536 in small-balanced); the "cancel"
// cases (twin experts, slot weights +L and -(L-1)) make the order decide the low bits, so the
// same planted change must flip most of their elements.
#include <gtest/gtest.h>

#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <filesystem>

#include "detmoe/oracle.h"
#include "detmoe/test_plant.h"
#include "golden/golden.h"

namespace detmoe::golden {
namespace {

const GoldenCase& find_case(const std::vector<GoldenCase>& cases, const std::string& name) {
  for (const auto& c : cases)
    if (c.name == name) return c;
  throw std::runtime_error("no golden case " + name);
}

std::vector<NamedTensor> oracle_outputs(const HostProblem& p) {
  OracleOptions opt;
  opt.grad_precision = p.grad_precision;
  return oracle_output_tensors(run_oracle(make_oracle_inputs(p.data, p.routing), opt).value(), p.shape, opt);
}

// Fraction of `out` elements whose bits change when the combine sums the slots in reverse.
double reversed_combine_flip_fraction(const GoldenCase& c) {
  const HostProblem p = make_case_problem(c).value();
  const NamedTensor before = oracle_outputs(p).front();
  ::setenv("DETMOE_TEST_PLANT", "combine-reversed", 1);
  const NamedTensor after = oracle_outputs(p).front();
  ::unsetenv("DETMOE_TEST_PLANT");
  EXPECT_EQ(before.name, "out");
  int64_t differ = 0;
  for (int64_t i = 0; i < before.numel(); ++i) differ += std::memcmp(&before.bytes[i * 2], &after.bytes[i * 2], 2) != 0;
  return static_cast<double>(differ) / static_cast<double>(before.numel());
}

class GoldenSensitivity : public ::testing::Test {
 protected:
  std::vector<GoldenCase> cases = load_cases(DETMOE_SOURCE_DIR "/golden/cases.json").value();
};

TEST_F(GoldenSensitivity, CancelCasesFlipMostElementsUnderAReversedCombine) {
  for (const char* name : {"small-cancel", "small-cancel-shared-ep2"}) {
    const GoldenCase& c = find_case(cases, name);
    EXPECT_EQ(c.data, "twin-experts") << name;
    const double flipped = reversed_combine_flip_fraction(c);
    EXPECT_GT(flipped, 0.5) << name << ": only " << flipped << " of out changed";
  }
}

TEST_F(GoldenSensitivity, RandomDataAloneBarelyNoticesTheOrder) {
  // Why the cancel cases exist: the same plant changes almost nothing in a plain case.
  EXPECT_LT(reversed_combine_flip_fraction(find_case(cases, "small-balanced")), 0.01);
}

TEST_F(GoldenSensitivity, CancelRoutingPairsTwinExpertsWithOppositeWeights) {
  const GoldenCase& c = find_case(cases, "small-cancel");
  const HostProblem p = make_case_problem(c).value();
  EXPECT_FALSE(p.seed.has_value()) << "twin-expert data is not the seeded data: GPU paths must upload it";
  const int64_t k = p.shape.k, FH = p.shape.F * p.shape.H;
  for (int64_t t = 0; t < p.routing.tokens; ++t) {
    const int32_t a = p.routing.topk_idx[t * k], b = p.routing.topk_idx[t * k + 1];
    ASSERT_EQ(a / 2, b / 2) << "token " << t << " slots 0/1 hold " << a << ", " << b;
    ASSERT_NE(a, b);
    ASSERT_EQ(p.routing.topk_w[t * k], -(p.routing.topk_w[t * k + 1] - 1.0f)) << "token " << t;
    ASSERT_GE(p.routing.topk_w[t * k], 1 << 10);
  }
  for (int64_t e = 1; e < p.shape.E; e += 2)
    ASSERT_TRUE(std::equal(p.data.w_gate.begin() + (e - 1) * FH, p.data.w_gate.begin() + e * FH, p.data.w_gate.begin() + e * FH))
        << "expert " << e << " is not a twin of " << e - 1;
}


// The recorded GPU hashes agree across implementations where the contract says they must: the
// megakernel's forward (out, y) is bitwise the reference's on every golden case of a platform
// both were recorded on (docs/MEGAKERNEL.md; the live GPU test is MegakernelGolden.*). A
// re-record that lets them drift apart fails here, on the CPU, before any GPU run.
TEST(GoldenCrossImpl, MegakernelForwardEqualsTheReferenceInTheRecordedHashes) {
  const std::string dir = DETMOE_SOURCE_DIR "/golden/hashes";
  int compared = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("megakernel.", 0) != 0) continue;
    const std::string platform = name.substr(11, name.size() - 11 - 5);
    const auto mk = read_hash_file(entry.path().string());
    const auto ref = read_hash_file(hash_file_path(dir, "reference", platform));
    ASSERT_TRUE(mk.ok()) << mk.status().to_string();
    if (!ref.ok()) continue;  // no reference record for this platform
    for (const CaseRecord& c : mk->cases) {
      const auto r = std::find_if(ref->cases.begin(), ref->cases.end(), [&](const CaseRecord& x) { return x.name == c.name; });
      ASSERT_NE(r, ref->cases.end()) << c.name << " is recorded for the megakernel but not the reference on " << platform;
      for (const char* output : {"out", "y"}) {
        auto hash_of = [&](const CaseRecord& rec) {
          for (const OutputRecord& o : rec.outputs)
            if (o.name == output) return o.hash;
          return std::string("(not recorded)");
        };
        EXPECT_EQ(hash_of(c), hash_of(*r)) << platform << " " << c.name << " " << output;
        ++compared;
      }
    }
  }
  EXPECT_GE(compared, 24) << "the megakernel and reference hash files of one platform should be committed";
}

}  // namespace
}  // namespace detmoe::golden
