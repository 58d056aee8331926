// Faults of the forward megakernel: a forced spin-wait timeout reports the waiting task and
// counter instead of hanging; bad routing found on the device and a too-small receive capacity
// give a clear Status, write nothing (outputs stay poisoned) and leave the layer usable.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "gpu_problem.h"
#include "layer_test_util.h"
#include "megakernel/layer/device_error.h"
#include "support/gpu.h"

namespace detmoe {
namespace {

using testing::make_routing;
using testing::MegakernelCase;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

const Shape kShape{300, 256, 128, 8, 2, 1, 64};

// Runs one forward and returns the Status of synchronize(); outputs downloaded into *after.
Status forward_status(MegakernelCase& c, std::vector<NamedTensor>* after) {
  DETMOE_RETURN_IF_ERROR(c.problem().poison_outputs());
  DETMOE_RETURN_IF_ERROR(c.layer().forward({c.problem().inputs(), c.problem().outputs()}, c.stream()));
  const Status st = c.layer().synchronize(c.stream());
  auto got = c.problem().download(false);
  if (got.ok() && after != nullptr) *after = *got;
  return st;
}

int64_t total_nan(const std::vector<NamedTensor>& ts) {
  int64_t n = 0;
  for (const NamedTensor& t : ts) n += count_nan(t);
  return n;
}
int64_t total_elements(const std::vector<NamedTensor>& ts) {
  int64_t n = 0;
  for (const NamedTensor& t : ts) n += t.numel();
  return n;
}

TEST(MegakernelFaults, ForcedTimeoutNamesTheWaitingTask) {
  DETMOE_REQUIRE_GPU();
  const Routing r = make_routing(kShape, "balanced", 41);
  for (auto [kind, index, what] :
       {std::tuple{mk::TaskKind::kGemm2, 0u, "GEMM2 (+combine) tile 0 of rank 0"},
        std::tuple{mk::TaskKind::kWeightedSum, 2u, "weighted sum of token chunk 2"},
        std::tuple{mk::TaskKind::kGemm1, 1u, "GEMM1 (+SwiGLU) tile 1 of rank 0"},
        std::tuple{mk::TaskKind::kPlan, 1u, "plan phase 1"}}) {
    LayerConfig config;
    config.spin_timeout_ms = 50;
    LayerOptions options;
    options.hooks.force_timeout_task = static_cast<int64_t>(mk::make_task_id(kind, 0, index));
    auto c = MegakernelCase::create(kShape, r, 41, config, options);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    const Status st = forward_status(**c, nullptr);
    EXPECT_EQ(st.code(), ErrorCode::kDeviceTimeout) << st.to_string();
    EXPECT_TRUE(contains(st.message(), what)) << st.message();
    // The fault was reported and cleared: the next launch of the same layer runs normally
    // except for the same forced wait.
    const Status again = forward_status(**c, nullptr);
    EXPECT_EQ(again.code(), ErrorCode::kDeviceTimeout) << again.to_string();
  }
}

TEST(MegakernelFaults, InvalidExpertIdFoundOnDeviceWritesNothing) {
  DETMOE_REQUIRE_GPU();
  const Routing r = make_routing(kShape, "balanced", 42);
  auto c = MegakernelCase::create(kShape, r, 42);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  std::vector<NamedTensor> good;
  ASSERT_TRUE(forward_status(**c, &good).ok());
  int32_t* idx = (*c)->problem().topk_idx(0);
  int32_t saved[2];
  ASSERT_EQ(cudaMemcpy(saved, idx + 5 * 2, sizeof saved, cudaMemcpyDeviceToHost), cudaSuccess);
  for (auto [value, slot, what] : {std::tuple{int32_t{8}, 1, "topk_idx[5,1] = 8 of rank 0 is out of range [0, 8)"},
                                   std::tuple{int32_t{-3}, 0, "topk_idx[5,0] = -3"},
                                   std::tuple{saved[0], 1, "repeats an earlier slot"}}) {
    ASSERT_EQ(cudaMemcpy(idx + 5 * 2 + slot, &value, 4, cudaMemcpyHostToDevice), cudaSuccess);
    // A pageable cudaMemcpy may return before its DMA lands, and the layer's non-blocking stream
    // does not wait for the legacy stream (the D3 test read half-copied routing this way).
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<NamedTensor> after;
    const Status st = forward_status(**c, &after);
    EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << st.to_string();
    EXPECT_TRUE(contains(st.message(), what)) << st.message();
    EXPECT_EQ(total_nan(after), total_elements(after)) << "a refused launch wrote outputs";
    ASSERT_EQ(cudaMemcpy(idx + 5 * 2, saved, sizeof saved, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  std::vector<NamedTensor> recovered;
  const Status st = forward_status(**c, &recovered);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_TRUE(testing::bitwise_equal(recovered, good));
}

TEST(MegakernelFaults, NonFiniteWeightIsRefused) {
  DETMOE_REQUIRE_GPU();
  const Routing r = make_routing(kShape, "balanced", 43);
  auto c = MegakernelCase::create(kShape, r, 43);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  const float nan = NAN;
  ASSERT_EQ(cudaMemcpy((*c)->problem().topk_w(0) + 7 * 2 + 1, &nan, 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // as in InvalidExpertIdFoundOnDeviceWritesNothing
  const Status st = forward_status(**c, nullptr);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << st.to_string();
  EXPECT_TRUE(contains(st.message(), "topk_w[7,1]")) << st.message();
}

TEST(MegakernelFaults, CapacityBelowNeedIsRefusedBeforeAnyWrite) {
  DETMOE_REQUIRE_GPU();
  const Shape s{400, 128, 128, 8, 2, 2, 0};
  const Routing r = make_routing(s, "all-to-one", 44);  // every token to experts 0 and 1: rank 0
  LayerConfig config;
  config.recv_capacity_rows = 100;
  auto c = MegakernelCase::create(s, r, 44, config);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  std::vector<NamedTensor> after;
  const Status st = forward_status(**c, &after);
  EXPECT_EQ(st.code(), ErrorCode::kCapacityExceeded) << st.to_string();
  EXPECT_TRUE(contains(st.message(), "rank 0 would receive 1600 rows")) << st.message();
  EXPECT_EQ(total_nan(after), total_elements(after));
}

}  // namespace
}  // namespace detmoe
