// Rapidcheck over random problems (≥ 300 by default): routing distributions (uniform, Zipf
// s ∈ [0, 3], hot expert, all-to-one, empty experts), k = 1..16, T = 1..65536 (mostly small),
// E = 1..512, loopback P ∈ {1, 2, 4}, shared expert on/off. Each case: the megakernel within
// tolerance of the GPU reference, every output written, and a rerun on a different SM count
// bitwise equal (D1); forward only, and forward + backward. Both implementations run through the
// seam (ProblemSession).
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdio>

#include "gpu_problem.h"
#include "support/gpu.h"

namespace detmoe {
namespace {

struct GeneratedCase {
  Shape shape;
  std::string routing;
  uint64_t seed;
};

rc::Gen<GeneratedCase> gen_case() {
  return rc::gen::exec([] {
    GeneratedCase c;
    const int64_t P = *rc::gen::element<int64_t>(1, 1, 1, 2, 4);
    const int64_t E = P * *rc::gen::inRange<int64_t>(1, 512 / P + 1);
    const int64_t k = *rc::gen::inRange<int64_t>(1, std::min<int64_t>(16, E) + 1);
    // T: mostly small, sometimes up to 65536 tokens per rank (log-uniform).
    const int64_t log_t = *rc::gen::inRange<int64_t>(0, 17);
    const int64_t T = std::max<int64_t>(1, *rc::gen::inRange<int64_t>((int64_t{1} << log_t) / 2, (int64_t{1} << log_t) + 1) / P);
    const int64_t H = 64 * *rc::gen::inRange<int64_t>(1, 7);
    const int64_t F = 64 * *rc::gen::inRange<int64_t>(1, 7);
    const int64_t Fs = *rc::gen::element<int64_t>(0, 0, 64, 192);
    c.shape = Shape{T, H, F, E, k, P, Fs};
    const int kind = *rc::gen::inRange(0, 5);
    char buf[64];
    switch (kind) {
      case 0: c.routing = "balanced"; break;
      case 1:
        std::snprintf(buf, sizeof buf, "zipf:%.3f", *rc::gen::inRange(0, 3001) / 1000.0);
        c.routing = buf;
        break;
      case 2:
        std::snprintf(buf, sizeof buf, "hot:%.3f", (*rc::gen::inRange(0, 1001) / 1000.0) / static_cast<double>(k));
        c.routing = buf;
        break;
      case 3: c.routing = "all-to-one"; break;
      default:
        std::snprintf(buf, sizeof buf, "empty:%lld", static_cast<long long>(*rc::gen::inRange<int64_t>(0, E - k + 1)));
        c.routing = buf;
        break;
    }
    c.seed = *rc::gen::inRange<uint64_t>(0, 1u << 30);
    return c;
  });
}

TEST(MegakernelProperty, RandomProblemsMatchReferenceAndAreScheduleInvariant) {
  DETMOE_REQUIRE_GPU();
  const bool ok = rc::check("megakernel forward vs reference, D1", [] {
    const GeneratedCase c = *gen_case();
    RC_TAG(c.routing);
    const Routing r = testing::make_routing(c.shape, c.routing, c.seed);
    auto got = testing::run_impl("megakernel", c.shape, r, c.seed);
    RC_ASSERT(got.ok());
    RC_ASSERT(testing::all_written(*got));
    auto ref = testing::run_impl("reference", c.shape, r, c.seed);
    RC_ASSERT(ref.ok());
    RC_ASSERT(testing::within_tolerance(*got, *ref));
    LayerConfig fewer;
    fewer.num_sms = static_cast<int32_t>(std::max<int64_t>(c.shape.P, 1 + static_cast<int64_t>(c.seed % 40)));
    auto again = testing::run_impl("megakernel", c.shape, r, c.seed, fewer);
    RC_ASSERT(again.ok());
    RC_ASSERT(testing::bitwise_equal(*again, *got));
  });
  EXPECT_TRUE(ok);
}

// The same problems through forward + backward (issue 18): every gradient within tolerance of the
// reference's, everything written, and a rerun with fewer SMs and drawn comm/overlap knobs bitwise
// equal (D1), in fp32 or bf16 weight gradients. Problems whose weight gradients exceed 2·10⁷
// elements per rank are discarded (they are downloaded and compared on the host).
TEST(MegakernelBackwardProperty, RandomProblemsMatchReferenceAndAreScheduleInvariant) {
  DETMOE_REQUIRE_GPU();
  const bool ok = rc::check("megakernel forward + backward vs reference, D1", [] {
    const GeneratedCase c = *gen_case();
    RC_PRE(c.shape.E * c.shape.H * c.shape.F <= 20'000'000);
    RC_TAG(c.routing);
    LayerConfig config;
    config.grad_precision = *rc::gen::element(GradPrecision::kFP32, GradPrecision::kBF16);
    const Routing r = testing::make_routing(c.shape, c.routing, c.seed);
    auto got = testing::run_impl("megakernel", c.shape, r, c.seed, config, true);
    RC_ASSERT(got.ok());
    RC_ASSERT(testing::all_written(*got));
    auto ref = testing::run_impl("reference", c.shape, r, c.seed, config, true);
    RC_ASSERT(ref.ok());
    RC_ASSERT(testing::within_tolerance(*got, *ref));
    LayerConfig knobs = config;
    knobs.num_sms = static_cast<int32_t>(std::max<int64_t>(c.shape.P, 1 + static_cast<int64_t>(c.seed % 40)));
    knobs.comm_sms = static_cast<int32_t>(c.seed % 3 == 0 ? 0 : c.seed % 7);
    knobs.overlap_rows = static_cast<int32_t>(128 * (c.seed % 5));
    auto again = testing::run_impl("megakernel", c.shape, r, c.seed, knobs, true);
    RC_ASSERT(again.ok());
    RC_ASSERT(testing::bitwise_equal(*again, *got));
  });
  EXPECT_TRUE(ok);
}

}  // namespace
}  // namespace detmoe
