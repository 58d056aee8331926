// The forward megakernel against itself, bit for bit (DESIGN.md §3): D0 reruns with other GPU
// work between them, D1 SM counts and comm/granularity knobs, D2 loopback EP sizes, D3 token
// permutation and subsets, and CUDA-graph replay.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "gpu_problem.h"
#include "layer_test_util.h"
#include "support/gpu.h"

namespace detmoe {
namespace {

using testing::bitwise_equal;
using testing::make_routing;
using testing::MegakernelCase;
using testing::run_megakernel_once;

int device_sms() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  return sms;
}

const Shape kShape{1000, 256, 192, 16, 4, 1, 128};

TEST(MegakernelD0, RerunsGiveIdenticalBitsWithOtherWorkBetween) {
  DETMOE_REQUIRE_GPU();
  const Routing r = make_routing(kShape, "zipf:1", 31);
  auto c = MegakernelCase::create(kShape, r, 31);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  auto first = (*c)->run();
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  // Unrelated GPU work (the reference layer on another problem) between the runs.
  const Shape other{512, 128, 128, 8, 2, 1, 0};
  ASSERT_TRUE(testing::run_impl("reference", other, make_routing(other, "balanced", 1), 1).ok());
  for (int i = 0; i < 3; ++i) {
    auto again = (*c)->run();
    ASSERT_TRUE(again.ok()) << again.status().to_string();
    EXPECT_TRUE(bitwise_equal(*again, *first)) << "rerun " << i;
  }
}

TEST(MegakernelD1, SmCountsAndKnobsGiveIdenticalBits) {
  DETMOE_REQUIRE_GPU();
  const Routing r = make_routing(kShape, "balanced", 32);
  const auto base = run_megakernel_once(kShape, r, 32);
  ASSERT_FALSE(base.empty());
  const int sms = device_sms();
  for (int n : {132, 100, 66, 17, 1}) {
    if (n > sms) continue;
    for (auto [comm, rows] : {std::pair{0, 0}, std::pair{n > 4 ? 4 : 0, 64}, std::pair{n > 16 ? 16 : 0, 1024}}) {
      LayerConfig c;
      c.num_sms = n;
      c.comm_sms = comm;
      c.overlap_rows = rows;
      SCOPED_TRACE(::testing::Message() << "num_sms " << n << " comm_sms " << comm << " overlap_rows " << rows);
      EXPECT_TRUE(bitwise_equal(run_megakernel_once(kShape, r, 32, c), base));
    }
  }
}

// The GEMM1 wave gate (forward_kernel.cuh, wave_gate.cuh) holds producers back, never a bit. It
// engages for GEMM1 tiles of at least 96 k-blocks (H = 6144: 96) with two or more waves of them:
// this shape's 32 GEMM1 tiles (16 m-blocks × 2 column blocks of F) are 4 waves at num_sms 8, 6
// with 2 of the 8 CTAs moving data, 7 at 5, and one at the full grid (no gate).
TEST(MegakernelD1, GatedLongKGemm1TilesGiveIdenticalBits) {
  DETMOE_REQUIRE_GPU();
  const Shape shape{1024, 6144, 256, 2, 2, 1, 0};
  testing::expect_gated_configs_keep_bits(shape, make_routing(shape, "balanced", 37), 37,
                                          {testing::grid_config(8), testing::grid_config(8, 2), testing::grid_config(5)});
}

TEST(MegakernelD2, LoopbackEpSizesGiveIdenticalBits) {
  DETMOE_REQUIRE_GPU();
  const Shape global{1024, 256, 128, 16, 4, 1, 64};
  const Routing r = make_routing(global, "zipf:2", 33);
  const auto base = run_megakernel_once(global, r, 33);
  ASSERT_FALSE(base.empty());
  for (int64_t P : {2, 4, 8}) {
    SCOPED_TRACE(::testing::Message() << "P = " << P);
    EXPECT_TRUE(bitwise_equal(run_megakernel_once(testing::shape_with(global, P), r, 33), base, {}));
  }
}

// Token rows of a permuted problem: the inputs of token t are generated from its global index,
// so a permutation is expressed through the routing only when x follows it; here we permute
// routing rows and check the rows that keep their own routing (DESIGN.md D3 via subsets).
TEST(MegakernelD3, TokenSubsetReproducesItsRows) {
  DETMOE_REQUIRE_GPU();
  const Shape full{640, 256, 128, 16, 4, 1, 0};
  const Routing r = make_routing(full, "balanced", 34);
  const auto base = run_megakernel_once(full, r, 34);
  ASSERT_FALSE(base.empty());
  // The first 256 tokens alone: same data (seeded by global index) and same routing rows.
  Shape sub = full;
  sub.T = 256;
  Routing rs = r;
  rs.tokens = 256;
  rs.topk_idx.resize(256 * full.k);
  rs.topk_w.resize(256 * full.k);
  const auto part = run_megakernel_once(sub, rs, 34);
  ASSERT_FALSE(part.empty());
  for (const char* name : {"out", "y"}) {
    const NamedTensor* a = find_tensor(part, name);
    const NamedTensor* b = find_tensor(base, name);
    ASSERT_TRUE(a != nullptr && b != nullptr);
    ASSERT_LE(a->bytes.size(), b->bytes.size());
    EXPECT_TRUE(std::equal(a->bytes.begin(), a->bytes.end(), b->bytes.begin())) << name;
  }
}

// A permutation of the tokens (x rows and routing rows together) permutes out and y rows.
TEST(MegakernelD3, PermutingTokensPermutesOutputs) {
  DETMOE_REQUIRE_GPU();
  const Shape s{500, 256, 128, 16, 4, 1, 64};
  const Routing r = make_routing(s, "zipf:1", 36);
  auto c = MegakernelCase::create(s, r, 36);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  auto base = (*c)->run();
  ASSERT_TRUE(base.ok()) << base.status().to_string();
  const std::vector<int64_t> perm = testing::token_permutation(s.T);
  const testing::PermutedTokens permuted_tokens((*c)->problem(), s, perm);
  ASSERT_TRUE(permuted_tokens.status().ok()) << permuted_tokens.status().to_string();
  DeviceProblem& problem = (*c)->problem();
  ASSERT_TRUE(problem.poison_outputs().ok());
  const DeviceLayerInputs ins[1] = {permuted_tokens.inputs()};
  ASSERT_TRUE((*c)->layer().forward({ins, problem.outputs()}, (*c)->stream()).ok());
  const Status st = (*c)->layer().synchronize((*c)->stream());
  ASSERT_TRUE(st.ok()) << st.to_string();
  auto permuted = problem.download(false);
  ASSERT_TRUE(permuted.ok());
  for (const char* name : {"out", "y"}) {
    const NamedTensor* a = find_tensor(*permuted, name);
    const NamedTensor* b = find_tensor(*base, name);
    ASSERT_TRUE(a != nullptr && b != nullptr);
    EXPECT_EQ(testing::rows_not_permuted(*a, *b, perm), 0) << name << ": rows that differ from their token's unpermuted row";
  }
}

TEST(MegakernelGraph, TenReplaysGiveTheEagerBits) {
  DETMOE_REQUIRE_GPU();
  const Routing r = make_routing(kShape, "hot:0.2", 35);
  auto c = MegakernelCase::create(kShape, r, 35);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  auto eager = (*c)->run();
  ASSERT_TRUE(eager.ok()) << eager.status().to_string();
  auto replays = (*c)->run_graph(10);
  ASSERT_TRUE(replays.ok()) << replays.status().to_string();
  ASSERT_EQ(replays->size(), 10u);
  for (const auto& got : *replays) EXPECT_TRUE(bitwise_equal(got, *eager));
}

}  // namespace
}  // namespace detmoe
