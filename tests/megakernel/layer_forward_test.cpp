// The forward megakernel against the GPU reference and the CPU oracle (tolerance of
// docs/NUMERICS.md), and its combine against the contract's order bit for bit.
#include <gtest/gtest.h>

#include <cstdio>
#include <set>

#include "detmoe/plan.h"
#include "detmoe/shapes.h"
#include "gpu_problem.h"
#include "layer_test_util.h"
#include "megakernel/host/layer_sizes.h"
#include "megakernel/host/layer_trace.h"
#include "megakernel/layer/layer_params.h"
#include "support/gpu.h"

namespace detmoe {
namespace {

using testing::all_written;
using testing::make_routing;
using testing::MegakernelCase;
using testing::run_megakernel_once;
using testing::within_tolerance;

struct Case {
  Shape shape;
  const char* routing;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.shape.to_string() << " " << c.routing; }

class MegakernelVsReference : public ::testing::TestWithParam<Case> {};

TEST_P(MegakernelVsReference, OutAndYWithinTolerance) {
  DETMOE_REQUIRE_GPU();
  const Case& c = GetParam();
  const Routing r = make_routing(c.shape, c.routing, 21);
  const auto got = run_megakernel_once(c.shape, r, 21);
  ASSERT_FALSE(got.empty());
  EXPECT_TRUE(all_written(got));
  auto ref = testing::run_impl("reference", c.shape, r, 21);
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  EXPECT_TRUE(within_tolerance(got, *ref));
}

// Shape fields: {T, H, F, E, k, P, Fs}.
INSTANTIATE_TEST_SUITE_P(
    Small, MegakernelVsReference,
    ::testing::Values(Case{{300, 256, 128, 8, 2, 1, 0}, "balanced"},           // partial m-blocks
                      Case{{1, 256, 128, 8, 2, 1, 0}, "balanced"},             // one token
                      Case{{513, 192, 320, 16, 4, 1, 128}, "zipf:1.5"},      // F, Fs not multiples of 128
                      Case{{256, 256, 64, 4, 4, 1, 64}, "all-to-one"},         // k = E, F = 64
                      Case{{700, 128, 128, 32, 3, 2, 0}, "hot:0.3"},         // two loopback ranks
                      Case{{400, 128, 192, 16, 2, 4, 192}, "empty:5"},       // empty experts, 4 ranks
                      Case{{129, 320, 256, 1, 1, 1, 0}, "balanced"}));         // E = 1

TEST(MegakernelNamedShapes, ScaledDownMatchReference) {
  DETMOE_REQUIRE_GPU();
  for (const char* name : {"qwen3-30b-a3b", "deepseek-v3", "mixtral-8x7b", "gpt-oss-120b"}) {
    Shape s = find_named_shape(name).value();
    s.T = 1024;
    for (const char* routing : {"balanced", "zipf:1"}) {
      SCOPED_TRACE(std::string(name) + " " + routing);
      const Routing r = make_routing(s, routing, 3);
      const auto got = run_megakernel_once(s, r, 3);
      ASSERT_FALSE(got.empty());
      auto ref = testing::run_impl("reference", s, r, 3);
      ASSERT_TRUE(ref.ok()) << ref.status().to_string();
      EXPECT_TRUE(within_tolerance(got, *ref));
    }
  }
}

// Scaled down for the fp64 oracle, which widens every weight to double on the host: T = 32 and
// E halved (keeping E ≥ k) until the experts hold ≤ 6·10⁸ weights. H, F and k — the tile
// geometry and the slot count — stay the named shape's. With every expert (6.6·10⁹ weights over
// the four shapes) the test did not finish inside the device run's time box.
TEST(MegakernelNamedShapes, ScaledDownMatchOracle) {
  DETMOE_REQUIRE_GPU();
  for (const char* name : {"qwen3-30b-a3b", "deepseek-v3", "mixtral-8x7b", "gpt-oss-120b"}) {
    Shape s = find_named_shape(name).value();
    s.T = 32;
    s.Fs = 128;  // the shared expert on as well
    while (s.E / 2 >= s.k && 3 * s.E * s.H * s.F > 600'000'000) s.E /= 2;
    SCOPED_TRACE(name);
    const Routing r = make_routing(s, "balanced", 4);
    const auto got = run_megakernel_once(s, r, 4);
    ASSERT_FALSE(got.empty());
    const auto oracle = testing::oracle_tensors(s, r, 4, GradPrecision::kFP32, false);
    EXPECT_TRUE(within_tolerance(got, oracle));
  }
}

// The weighted sum runs the reference's per-element order (fma over slots from 0), so out must
// equal that order applied to the megakernel's own y, bit for bit (no shared expert here).
TEST(MegakernelCombine, OutIsTheContractSumOfItsOwnY) {
  DETMOE_REQUIRE_GPU();
  for (int64_t P : {1, 2}) {
    const Shape s{333, 256, 128, 16, 5, P, 0};
    const Routing r = make_routing(s, "balanced", 8);
    const auto got = run_megakernel_once(s, r, 8);
    ASSERT_FALSE(got.empty());
    const NamedTensor* y = find_tensor(got, "y");
    const NamedTensor* out = find_tensor(got, "out");
    ASSERT_TRUE(y != nullptr && out != nullptr);
    EXPECT_TRUE(testing::bitwise_equal({*out}, {testing::host_combine(s, r, *y)}));
  }
}

// The plan built inside the kernel equals the host plan, table by table, for several P.
TEST(MegakernelPlan, EqualsTheHostPlan) {
  DETMOE_REQUIRE_GPU();
  for (int64_t P : {1, 2, 4}) {
    const Shape s = testing::shape_with(Shape{1200, 128, 64, 32, 6, 1, 0}, P);
    for (const char* routing : {"balanced", "zipf:2", "empty:9", "all-to-one"}) {
      SCOPED_TRACE(::testing::Message() << "P " << P << " " << routing);
      const Routing r = make_routing(s, routing, 12);
      auto c = MegakernelCase::create(s, r, 12);
      ASSERT_TRUE(c.ok()) << c.status().to_string();
      ASSERT_TRUE((*c)->run().ok());
      auto got = (*c)->layer().downloaded_plan();
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      auto want = build_routing_plan(s, r.topk_idx.data());
      ASSERT_TRUE(want.ok());
      EXPECT_EQ(got->expert_count, want->expert_count);
      EXPECT_EQ(got->expert_offset, want->expert_offset);
      EXPECT_EQ(got->rank_row_begin, want->rank_row_begin);
      EXPECT_EQ(got->row_token, want->row_token);
      EXPECT_EQ(got->row_slot, want->row_slot);
      EXPECT_EQ(got->slot_row, want->slot_row);
    }
  }
}

TEST(MegakernelLayer, WithoutYOutputStillComputesOut) {
  DETMOE_REQUIRE_GPU();
  const Shape s{200, 128, 128, 8, 2, 1, 0};
  const Routing r = make_routing(s, "balanced", 9);
  auto c = MegakernelCase::create(s, r, 9, {}, {}, /*write_y=*/false);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  auto got = (*c)->run();
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_TRUE(all_written(*got));
  const auto with_y = run_megakernel_once(s, r, 9);
  EXPECT_TRUE(testing::bitwise_equal(*got, with_y, {"y"}));
}

// Host tensors uploaded (a replayed capture, designed golden data) give exactly the bits of the
// same data filled on the device from its seed, for one rank and split over four.
TEST(MegakernelLayer, UploadedDataGivesTheSeededBits) {
  DETMOE_REQUIRE_GPU();
  for (int64_t P : {1, 4}) {
    SCOPED_TRACE(P);
    const Shape s{96, 128, 128, 16, 4, P, 64};
    const uint64_t seed = 47;
    const Routing r = make_routing(s, "zipf:1", seed);
    const auto seeded = run_megakernel_once(s, r, seed);
    ASSERT_FALSE(seeded.empty());
    auto c = MegakernelCase::create(HostProblem{s, generate_layer_data(s, seed), r, GradPrecision::kFP32});
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    auto uploaded = (*c)->run();
    ASSERT_TRUE(uploaded.ok()) << uploaded.status().to_string();
    EXPECT_TRUE(testing::bitwise_equal(seeded, *uploaded));
  }
}

// The task timeline (LayerOptions::trace_tasks_per_cta) records each task once with start ≤ end
// and its SM cycles, one plan record per CTA, and changes no bits; each phase's clock (cycles over
// time) is a physical one.
TEST(MegakernelTrace, RecordsEveryTaskOnceAndChangesNoBits) {
  DETMOE_REQUIRE_GPU();
  const Shape s{700, 128, 128, 32, 3, 2, 64};
  const Routing r = make_routing(s, "zipf:1", 43);
  const auto plain = run_megakernel_once(s, r, 43);
  ASSERT_FALSE(plain.empty());
  LayerOptions options;
  options.trace_tasks_per_cta = 4096;
  auto c = MegakernelCase::create(s, r, 43, LayerConfig{}, options);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  auto got = (*c)->run();
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_TRUE(testing::bitwise_equal(*got, plain));
  auto trace = (*c)->layer().downloaded_trace();
  ASSERT_TRUE(trace.ok()) << trace.status().to_string();
  std::set<std::pair<int32_t, uint64_t>> plan_records;
  std::set<uint64_t> tasks;
  int64_t dispatch = 0, sums = 0;
  for (const LayerTaskTrace& t : *trace) {
    EXPECT_LE(t.start_ns, t.end_ns);
    EXPECT_GT(t.task_cycles, 0) << "task 0x" << std::hex << t.task;
    if (mk::task_kind(t.task) == mk::TaskKind::kPlan) {
      EXPECT_TRUE(plan_records.insert({t.cta, t.task}).second);
      continue;
    }
    EXPECT_TRUE(tasks.insert(t.task).second) << "task 0x" << std::hex << t.task << " recorded twice";
    dispatch += mk::task_kind(t.task) == mk::TaskKind::kPlaceDispatch ? 1 : 0;
    sums += mk::task_kind(t.task) == mk::TaskKind::kWeightedSum ? 1 : 0;
  }
  EXPECT_EQ(static_cast<int>(plan_records.size()), (*c)->layer().grid_ctas());
  // One dispatch task per plan chunk, whose size the layer picks for its grid.
  const int64_t chunk = mk::plan_chunk_tokens(s.T, s.P, (*c)->layer().grid_ctas());
  EXPECT_EQ(dispatch, s.P * ((s.T + chunk - 1) / chunk));
  EXPECT_EQ(sums, s.P * ((s.T + mk::kSumChunkTokens - 1) / mk::kSumChunkTokens));
  const mk::TraceSummary summary = mk::summarize_trace(*trace);
  EXPECT_GT(summary.span_us, 0.0);
  for (const mk::TracePhase& phase : summary.phases) {
    EXPECT_GT(phase.sm_mhz, 300.0) << phase.name;
    EXPECT_LT(phase.sm_mhz, 3000.0) << phase.name;
  }
  std::printf("%s", mk::format_trace_summary(summary).c_str());
}

}  // namespace
}  // namespace detmoe
