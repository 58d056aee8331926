// The fused backward (issue 18) against the CPU oracle and the GPU reference (tolerance of
// docs/NUMERICS.md), against itself bit for bit (D0–D3, CUDA-graph replay), and its error paths:
// a forced timeout in a backward task, a backward without a forward, inputs that are not the
// forward's. Outputs are poisoned with NaN before every run (all_written catches what nobody
// writes).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "detmoe/shapes.h"
#include "gpu_problem.h"
#include "layer_test_util.h"
#include "megakernel/layer/device_error.h"
#include "support/gpu.h"

namespace detmoe {
namespace {

using testing::all_written;
using testing::bitwise_equal;
using testing::make_routing;
using testing::MegakernelCase;
using testing::run_megakernel_once;
using testing::within_tolerance;

struct Case {
  Shape shape;
  const char* routing;
  GradPrecision grad;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.shape.to_string() << " " << c.routing << (c.grad == GradPrecision::kFP32 ? " fp32" : " bf16");
}

class MegakernelBackward : public ::testing::TestWithParam<Case> {};

// Every gradient against the fp64 oracle (with the Σ|terms| clause for the weight gradients)
// and against the reference.
TEST_P(MegakernelBackward, GradientsMatchOracleAndReference) {
  DETMOE_REQUIRE_GPU();
  const Case& c = GetParam();
  const Routing r = make_routing(c.shape, c.routing, 41);
  LayerConfig config;
  config.grad_precision = c.grad;
  const auto got = run_megakernel_once(c.shape, r, 41, config, /*backward=*/true);
  ASSERT_FALSE(got.empty());
  EXPECT_TRUE(all_written(got));
  EXPECT_TRUE(within_tolerance(got, testing::oracle_reference(c.shape, r, 41, c.grad, true)));
  auto ref = testing::run_impl("reference", c.shape, r, 41, config, true);
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  EXPECT_TRUE(within_tolerance(got, *ref));
}

// Shape fields: {T, H, F, E, k, P, Fs}.
INSTANTIATE_TEST_SUITE_P(
    Small, MegakernelBackward,
    ::testing::Values(Case{{300, 256, 128, 8, 2, 1, 0}, "balanced", GradPrecision::kFP32},     // partial m-blocks
                      Case{{1, 256, 128, 8, 2, 1, 0}, "balanced", GradPrecision::kFP32},       // one token
                      Case{{513, 192, 320, 16, 4, 1, 128}, "zipf:1.5", GradPrecision::kFP32},  // F, Fs % 256 ≠ 0
                      Case{{256, 256, 64, 4, 4, 1, 64}, "all-to-one", GradPrecision::kBF16},   // k = E, F = 64
                      Case{{700, 128, 128, 32, 3, 2, 0}, "hot:0.3", GradPrecision::kBF16},     // two ranks
                      Case{{400, 128, 192, 16, 2, 4, 192}, "empty:5", GradPrecision::kFP32},   // empty experts
                      Case{{129, 320, 256, 1, 1, 1, 0}, "balanced", GradPrecision::kFP32}));   // E = 1

// The named shapes, scaled down for the fp64 oracle (T = 32, a shared expert, E halved while the
// experts hold > 1.5·10⁸ weights: the oracle's backward in fp64 on the host is what takes the time,
// and the forward's 6·10⁸ did not finish in four minutes; 66 s on the H200 for the four), and at
// T = 1024 against the reference (E halved while the experts hold > 4·10⁸ weights: the weight
// gradients are downloaded and compared on the host, and deepseek-v3's did not finish in 2 min).
TEST(MegakernelBackwardNamedShapes, ScaledDownMatchOracle) {
  DETMOE_REQUIRE_GPU();
  for (const char* name : {"qwen3-30b-a3b", "deepseek-v3", "mixtral-8x7b", "gpt-oss-120b"}) {
    SCOPED_TRACE(name);
    Shape s = find_named_shape(name).value();
    s.T = 32;
    s.Fs = 128;
    while (s.E / 2 >= s.k && 3 * s.E * s.H * s.F > 150'000'000) s.E /= 2;
    const Routing r = make_routing(s, "balanced", 5);
    const auto got = run_megakernel_once(s, r, 5, {}, true);
    ASSERT_FALSE(got.empty());
    EXPECT_TRUE(all_written(got));
    EXPECT_TRUE(within_tolerance(got, testing::oracle_reference(s, r, 5, GradPrecision::kFP32, true)));
  }
}

TEST(MegakernelBackwardNamedShapes, MatchReference) {
  DETMOE_REQUIRE_GPU();
  for (const char* name : {"qwen3-30b-a3b", "deepseek-v3", "mixtral-8x7b", "gpt-oss-120b"}) {
    for (const char* routing : {"balanced", "zipf:1"}) {
      SCOPED_TRACE(std::string(name) + " " + routing);
      Shape s = find_named_shape(name).value();
      s.T = 1024;
      while (s.E / 2 >= s.k && 3 * s.E * s.H * s.F > 400'000'000) s.E /= 2;
      const Routing r = make_routing(s, routing, 6);
      const auto got = run_megakernel_once(s, r, 6, {}, true);
      ASSERT_FALSE(got.empty());
      EXPECT_TRUE(all_written(got));
      auto ref = testing::run_impl("reference", s, r, 6, {}, true);
      ASSERT_TRUE(ref.ok()) << ref.status().to_string();
      EXPECT_TRUE(within_tolerance(got, *ref));
    }
  }
}

const Shape kShape{1000, 256, 192, 16, 4, 1, 128};

// Long ragged row sums (the K of dW) against the oracle with no Σ|terms| clause: the clause grows
// like the row count and let a reference that lost two rows' terms at 4226 rows pass (session 15,
// cuBLAS). One expert of 4226 rows, and the backward property's counterexample, whose megakernel
// run met the oracle at 0.12 of the rms clause alone while the reference failed it.
TEST(MegakernelBackwardNamedShapes, RaggedRowCountsMatchOracleWithoutTheTermsClause) {
  DETMOE_REQUIRE_GPU();
  for (const testing::RaggedCase& c : testing::ragged_row_count_cases()) {
    const Routing r = make_routing(c.shape, c.routing, 0);
    for (const GradPrecision g : {GradPrecision::kFP32, GradPrecision::kBF16}) {
      SCOPED_TRACE(::testing::Message() << c.shape.to_string() << " " << c.routing << ", " << to_string(g));
      LayerConfig config;
      config.grad_precision = g;
      auto got = testing::run_impl("megakernel", c.shape, r, 0, config, true);
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      EXPECT_TRUE(all_written(*got));
      EXPECT_TRUE(within_tolerance(*got, testing::oracle_tensors(c.shape, r, 0, g, true)));
    }
  }
}

TEST(MegakernelBackwardD0, RerunsGiveIdenticalBitsWithOtherWorkBetween) {
  DETMOE_REQUIRE_GPU();
  const Routing r = make_routing(kShape, "zipf:1", 51);
  auto c = MegakernelCase::create(kShape, r, 51);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  auto first = (*c)->run(true);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  const Shape other{512, 128, 128, 8, 2, 1, 0};
  ASSERT_TRUE(testing::run_impl("reference", other, make_routing(other, "balanced", 1), 1, {}, true).ok());
  for (int i = 0; i < 3; ++i) {
    auto again = (*c)->run(true);
    ASSERT_TRUE(again.ok()) << again.status().to_string();
    EXPECT_TRUE(bitwise_equal(*again, *first)) << "rerun " << i;
  }
}

TEST(MegakernelBackwardD1, SmCountsAndKnobsGiveIdenticalBits) {
  DETMOE_REQUIRE_GPU();
  const Routing r = make_routing(kShape, "hot:0.3", 52);
  const auto base = run_megakernel_once(kShape, r, 52, {}, true);
  ASSERT_FALSE(base.empty());
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  for (int n : {132, 100, 66, 17, 1}) {
    if (n > sms) continue;
    for (auto [comm, rows] : {std::pair{0, 0}, std::pair{n > 4 ? 4 : 0, 64}, std::pair{n > 16 ? 16 : 0, 1024}}) {
      LayerConfig c;
      c.num_sms = n;
      c.comm_sms = comm;
      c.overlap_rows = rows;
      SCOPED_TRACE(::testing::Message() << "num_sms " << n << " comm_sms " << comm << " overlap_rows " << rows);
      EXPECT_TRUE(bitwise_equal(run_megakernel_once(kShape, r, 52, c, true), base));
    }
  }
}

// The dx wave gate (backward_kernel.cuh, wave_gate.cuh) holds producers back, never a bit. It
// engages for dx tiles of at least 256 k-blocks (2F = 16,384: 256) with three or more waves of
// them: this shape's 32 dx tiles (16 m-blocks × 2 column blocks) are 4 waves at num_sms 8 (gates
// before waves 1 and 2) and 7 at 5, one at the full grid (no gate).
TEST(MegakernelBackwardD1, GatedLongKDxTilesGiveIdenticalBits) {
  DETMOE_REQUIRE_GPU();
  const Shape shape{1024, 512, 8192, 2, 2, 1, 0};
  testing::expect_gated_configs_keep_bits(shape, make_routing(shape, "balanced", 55), 55,
                                          {testing::grid_config(8), testing::grid_config(5)}, /*backward=*/true);
}

// LayerConfig::weight_grad_launch is a speed knob: the routed weight gradients in the fused launch
// and in the GEMM-core launches after it (one or both of them) are the same tiles reduced in the
// same order, so every output keeps its bits — with empty experts, partial m-blocks and columns (F = 192, H = 256 and
// 320), bf16 weight gradients and loopback ranks (each rank's own groups and outputs), and with
// h recomputed (the second launch reads dh after the dSwiGLU overwrote the recomputed h). The
// GEMM-core launches' ticket deal (LayerConfig::weight_grad_tickets) and their tile order
// (LayerConfig::weight_grad_band_budget_kb: the default's, the fixed bands at 0, and 64 KB, the
// narrowest bands in whichever orientation reads less), stores (weight_grad_stream_stores,
// evict-first by default) and the deep store ring (weight_grad_deep_ring) are checked the same way.
TEST(MegakernelBackwardD1, WeightGradLaunchGivesIdenticalBits) {
  DETMOE_REQUIRE_GPU();
  struct Draw {
    Shape shape;
    const char* routing;
    GradPrecision grad;
    bool save_h;
  };
  for (const Draw& d : {Draw{kShape, "hot:0.3", GradPrecision::kFP32, true},
                        Draw{Shape{700, 320, 192, 16, 4, 4, 64}, "empty:5", GradPrecision::kBF16, true},
                        Draw{Shape{333, 256, 128, 8, 2, 2, 0}, "zipf:2", GradPrecision::kFP32, false},
                        // k·H·2 = 64 KB per token: a heavy d_x sum (deepseek-v3-like), as the fused arm keeps it.
                        Draw{Shape{200, 4096, 192, 16, 8, 1, 0}, "zipf:1", GradPrecision::kFP32, true}}) {
    SCOPED_TRACE(d.shape.to_string() + " " + d.routing);
    const Routing r = make_routing(d.shape, d.routing, 54);
    LayerConfig c;
    c.grad_precision = d.grad;
    c.save_h = d.save_h;
    c.weight_grad_launch = WeightGradLaunch::kFused;
    const auto fused = run_megakernel_once(d.shape, r, 54, c, true);
    ASSERT_FALSE(fused.empty());
    for (WeightGradLaunch w : {WeightGradLaunch::kGateUpLater, WeightGradLaunch::kSecondLaunch, WeightGradLaunch::kAuto}) {
      for (bool tickets : {false, true}) {
        c.weight_grad_launch = w;
        c.weight_grad_tickets = tickets;
        EXPECT_TRUE(bitwise_equal(run_megakernel_once(d.shape, r, 54, c, true), fused))
            << to_string(w) << (tickets ? ", ticket deal" : ", static deal");
      }
    }
    c.weight_grad_launch = WeightGradLaunch::kSecondLaunch;
    for (int32_t budget : {0, 64}) {
      for (bool tickets : {false, true}) {
        c.weight_grad_tickets = tickets;
        c.weight_grad_band_budget_kb = budget;
        c.weight_grad_stream_stores = budget != 0;  // the fixed bands with plain stores: the old launch
        c.weight_grad_deep_ring = tickets;
        EXPECT_TRUE(bitwise_equal(run_megakernel_once(d.shape, r, 54, c, true), fused))
            << "second launch, band budget " << budget << " KB" << (tickets ? ", ticket deal" : ", static deal")
            << (c.weight_grad_stream_stores ? ", evict-first stores" : ", plain stores")
            << (c.weight_grad_deep_ring ? ", deep store ring" : "");
      }
    }
  }
}

// The shared expert's weight gradients are each rank's partial, summed outside the layer
// (DeviceProblem::download sums them in fp64), so they are left out across P.
TEST(MegakernelBackwardD2, LoopbackEpSizesGiveIdenticalBits) {
  DETMOE_REQUIRE_GPU();
  const Shape global{1024, 256, 128, 16, 4, 1, 64};
  const Routing r = make_routing(global, "zipf:2", 53);
  const auto base = run_megakernel_once(global, r, 53, {}, true);
  ASSERT_FALSE(base.empty());
  for (int64_t P : {2, 4, 8}) {
    SCOPED_TRACE(::testing::Message() << "P = " << P);
    EXPECT_TRUE(bitwise_equal(run_megakernel_once(testing::shape_with(global, P), r, 53, {}, true), base,
                              {"dws_gate", "dws_up", "dws_down"}));
  }
}

// A permutation of the tokens (x, routing and dout rows together) permutes d_x and d_topk_w.
TEST(MegakernelBackwardD3, PermutingTokensPermutesDxAndDTopkW) {
  DETMOE_REQUIRE_GPU();
  const Shape s{500, 256, 128, 16, 4, 1, 64};
  const Routing r = make_routing(s, "zipf:1", 54);
  auto c = MegakernelCase::create(s, r, 54);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  auto base = (*c)->run(true);
  ASSERT_TRUE(base.ok()) << base.status().to_string();
  const std::vector<int64_t> perm = testing::token_permutation(s.T);
  DeviceProblem& problem = (*c)->problem();
  const testing::PermutedTokens permuted_tokens(problem, s, perm);
  ASSERT_TRUE(permuted_tokens.status().ok()) << permuted_tokens.status().to_string();
  ASSERT_TRUE(problem.poison_outputs().ok());
  const DeviceLayerInputs ins[1] = {permuted_tokens.inputs()};
  const DeviceGradInputs gins[1] = {permuted_tokens.grads()};
  Layer& layer = (*c)->layer();
  ASSERT_TRUE(layer.forward({ins, problem.outputs()}, (*c)->stream()).ok());
  ASSERT_TRUE(layer.backward({ins, gins, problem.grad_outputs()}, (*c)->stream()).ok());
  const Status st = layer.synchronize((*c)->stream());
  ASSERT_TRUE(st.ok()) << st.to_string();
  auto permuted = problem.download(true);
  ASSERT_TRUE(permuted.ok());
  for (const char* name : {"d_x", "d_topk_w", "out"}) {
    const NamedTensor* a = find_tensor(*permuted, name);
    const NamedTensor* b = find_tensor(*base, name);
    ASSERT_TRUE(a != nullptr && b != nullptr) << name;
    EXPECT_EQ(testing::rows_not_permuted(*a, *b, perm), 0) << name << ": rows that differ from their token's unpermuted row";
  }
}

// A token subset (the first 256 tokens, same data and routing rows) reproduces its d_x and
// d_topk_w rows bit for bit.
TEST(MegakernelBackwardD3, TokenSubsetReproducesItsRows) {
  DETMOE_REQUIRE_GPU();
  const Shape full{640, 256, 128, 16, 4, 1, 0};
  const Routing r = make_routing(full, "balanced", 55);
  const auto base = run_megakernel_once(full, r, 55, {}, true);
  ASSERT_FALSE(base.empty());
  Shape sub = full;
  sub.T = 256;
  Routing rs = r;
  rs.tokens = 256;
  rs.topk_idx.resize(256 * full.k);
  rs.topk_w.resize(256 * full.k);
  const auto part = run_megakernel_once(sub, rs, 55, {}, true);
  ASSERT_FALSE(part.empty());
  for (const char* name : {"d_x", "d_topk_w"}) {
    const NamedTensor* a = find_tensor(part, name);
    const NamedTensor* b = find_tensor(base, name);
    ASSERT_TRUE(a != nullptr && b != nullptr);
    ASSERT_LE(a->bytes.size(), b->bytes.size());
    EXPECT_TRUE(std::equal(a->bytes.begin(), a->bytes.end(), b->bytes.begin())) << name;
  }
}

TEST(MegakernelBackwardGraph, ForwardAndBackwardReplaysGiveTheEagerBits) {
  DETMOE_REQUIRE_GPU();
  const Routing r = make_routing(kShape, "hot:0.2", 56);
  auto c = MegakernelCase::create(kShape, r, 56);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  auto eager = (*c)->run(true);
  ASSERT_TRUE(eager.ok()) << eager.status().to_string();
  auto replays = (*c)->run_graph(10, true);
  ASSERT_TRUE(replays.ok()) << replays.status().to_string();
  ASSERT_EQ(replays->size(), 10u);
  for (const auto& got : *replays) EXPECT_TRUE(bitwise_equal(got, *eager));
}

// The first backward allocates the backward's buffers, so it cannot be captured: refused with a
// message that says what to do, and a backward run eagerly first makes the capture work (above).
TEST(MegakernelBackwardGraph, AFirstBackwardUnderCaptureIsRefused) {
  DETMOE_REQUIRE_GPU();
  const Shape s{300, 256, 128, 8, 2, 1, 0};
  auto c = MegakernelCase::create(s, make_routing(s, "balanced", 60), 60);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  auto replays = (*c)->run_graph(1, true);
  ASSERT_FALSE(replays.ok());
  EXPECT_EQ(replays.status().code(), ErrorCode::kInvalidArgument) << replays.status().to_string();
  EXPECT_NE(replays.status().message().find("run one backward before capturing"), std::string::npos)
      << replays.status().to_string();
  auto eager = (*c)->run(true);
  ASSERT_TRUE(eager.ok()) << eager.status().to_string();
  auto again = (*c)->run_graph(2, true);
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  for (const auto& got : *again) EXPECT_TRUE(bitwise_equal(got, *eager));
}

// A forced timeout in a backward GEMM task is reported by the next synchronize() naming that
// task; the next forward + backward on the same Layer runs normally.
TEST(MegakernelBackwardFaults, ForcedTimeoutNamesTheBackwardTask) {
  DETMOE_REQUIRE_GPU();
  const Shape s{300, 256, 128, 8, 2, 1, 0};
  const Routing r = make_routing(s, "balanced", 57);
  LayerConfig config;
  config.spin_timeout_ms = 200;
  LayerOptions options;
  options.hooks.force_timeout_task = static_cast<int64_t>(mk::make_task_id(mk::TaskKind::kDgrad2, 0, 0));
  auto c = MegakernelCase::create(s, r, 57, config, options);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  auto got = (*c)->run(true);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), ErrorCode::kDeviceTimeout) << got.status().to_string();
  EXPECT_NE(got.status().message().find("backward dx = dh·W_gate_up"), std::string::npos) << got.status().to_string();
  EXPECT_NE(got.status().message().find("dh-done counter"), std::string::npos) << got.status().to_string();
}

TEST(MegakernelBackwardErrors, WithoutAForwardOrWithOtherInputsIsRefused) {
  DETMOE_REQUIRE_GPU();
  const Shape s{64, 128, 64, 4, 2, 1, 0};
  const Routing r = make_routing(s, "balanced", 58);
  auto c = MegakernelCase::create(s, r, 58);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  DeviceProblem& problem = (*c)->problem();
  Layer& layer = (*c)->layer();
  const Status before = layer.backward({problem.inputs(), problem.grad_inputs(), problem.grad_outputs()}, (*c)->stream());
  EXPECT_EQ(before.code(), ErrorCode::kInvalidArgument) << before.to_string();
  EXPECT_NE(before.message().find("run forward() first"), std::string::npos) << before.to_string();
  ASSERT_TRUE(layer.forward({problem.inputs(), problem.outputs()}, (*c)->stream()).ok());
  DeviceLayerInputs other = problem.inputs()[0];
  other.x = problem.grad_inputs()[0].dout;  // same shape, not the forward's x
  const DeviceLayerInputs ins[1] = {other};
  const Status mismatch = layer.backward({ins, problem.grad_inputs(), problem.grad_outputs()}, (*c)->stream());
  EXPECT_EQ(mismatch.code(), ErrorCode::kInvalidArgument) << mismatch.to_string();
  EXPECT_NE(mismatch.message().find("not the last forward's"), std::string::npos) << mismatch.to_string();
  EXPECT_TRUE(layer.synchronize((*c)->stream()).ok());
}

// LayerConfig::save_h = false: the backward recomputes h with the GEMM core into dh before its
// launch. Every output, forward and backward, must have the saved-h run's bits (issue 18), with
// and without a shared expert, over loopback ranks, in bf16 weight gradients, and on fewer SMs.
TEST(MegakernelBackwardSaveH, RecomputedHGivesTheSavedBits) {
  DETMOE_REQUIRE_GPU();
  const Case cases[] = {
      {find_named_shape("small").value(), "zipf1", GradPrecision::kFP32},
      {find_named_shape("small-shared").value(), "balanced", GradPrecision::kFP32},
      {testing::shape_with(find_named_shape("small-shared").value(), 2), "hot:0.3", GradPrecision::kBF16},
      {{300, 128, 192, 8, 2, 4, 64}, "zipf:1.3", GradPrecision::kFP32},
      {{4226, 64, 64, 1, 1, 1, 0}, "balanced", GradPrecision::kFP32},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.shape.to_string() << " " << c.routing << " " << to_string(c.grad));
    const Routing r = make_routing(c.shape, c.routing, 61);
    LayerConfig saved;
    saved.grad_precision = c.grad;
    LayerConfig recomputed = saved;
    recomputed.save_h = false;
    auto a = testing::run_impl("megakernel", c.shape, r, 61, saved, true);
    auto b = testing::run_impl("megakernel", c.shape, r, 61, recomputed, true);
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    EXPECT_TRUE(all_written(*b));
    EXPECT_TRUE(bitwise_equal(*b, *a));
    LayerConfig fewer = recomputed;
    fewer.num_sms = static_cast<int32_t>(std::max<int64_t>(c.shape.P, 17));
    fewer.comm_sms = static_cast<int32_t>(c.shape.P);
    auto d1 = testing::run_impl("megakernel", c.shape, r, 61, fewer, true);
    ASSERT_TRUE(d1.ok()) << d1.status().to_string();
    EXPECT_TRUE(bitwise_equal(*d1, *a));
  }
}

}  // namespace
}  // namespace detmoe
