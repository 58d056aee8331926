// The GPU routing plan against the host plan (reference/host/plan.cpp): every table, bit for
// bit, for every routing distribution and EP size; bad input gets the host's Status.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "detmoe/device_plan.h"
#include "detmoe/plan.h"
#include "gpu_problem.h"
#include "support/gpu.h"

namespace detmoe {
namespace {

using testing::make_routing;

template <class T>
struct DeviceArray {
  explicit DeviceArray(const std::vector<T>& host) {
    EXPECT_EQ(cudaMalloc(&p, host.size() * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // a pageable copy may return before it lands
  }
  ~DeviceArray() { cudaFree(p); }
  T* p = nullptr;
};

void expect_same_plan(const RoutingPlan& gpu, const RoutingPlan& host, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(gpu.shape, host.shape);
  EXPECT_EQ(gpu.rows, host.rows);
  EXPECT_EQ(gpu.expert_count, host.expert_count);
  EXPECT_EQ(gpu.expert_offset, host.expert_offset);
  EXPECT_EQ(gpu.expert_src_count, host.expert_src_count);
  EXPECT_EQ(gpu.expert_src_offset, host.expert_src_offset);
  EXPECT_EQ(gpu.rank_row_begin, host.rank_row_begin);
  EXPECT_EQ(gpu.row_token, host.row_token);
  EXPECT_EQ(gpu.row_slot, host.row_slot);
  EXPECT_EQ(gpu.slot_row, host.slot_row);
  EXPECT_EQ(gpu.pair_rows, host.pair_rows);
  EXPECT_EQ(gpu.send_offset, host.send_offset);
  EXPECT_EQ(gpu.recv_offset, host.recv_offset);
  EXPECT_EQ(gpu.max_recv_rows, host.max_recv_rows);
  EXPECT_EQ(gpu.capacity_rows, host.capacity_rows);
}

StatusOr<RoutingPlan> device_plan(const Shape& shape, const std::vector<int32_t>& idx, const std::vector<float>* w,
                                  int64_t capacity = 0) {
  DeviceArray<int32_t> d_idx(idx);
  std::unique_ptr<DeviceArray<float>> d_w;
  if (w != nullptr) d_w = std::make_unique<DeviceArray<float>>(*w);
  return build_routing_plan_on_device(shape, d_idx.p, d_w ? d_w->p : nullptr, capacity, nullptr);
}

TEST(DevicePlan, MatchesHostPlanForEveryRoutingAndEpSize) {
  DETMOE_REQUIRE_GPU();
  // T deliberately not a multiple of the 256-token chunk in some cases; E up to 64.
  const std::vector<Shape> globals = {find_named_shape("tiny").value(), find_named_shape("small").value(),
                                      Shape{600, 64, 64, 16, 4, 1, 0}, Shape{1000, 64, 64, 64, 8, 1, 0},
                                      Shape{513, 64, 64, 8, 1, 1, 0}};
  const std::vector<std::string> routings = {"balanced", "zipf1", "hot:0.6", "all-to-one", "empty:2"};
  int checked = 0;
  for (const Shape& g : globals)
    for (int64_t P : {1, 2, 4, 8}) {
      if (g.E % P != 0 || g.T % P != 0) continue;
      const Shape s = testing::shape_with(g, P);
      for (const std::string& spec : routings) {
        const Routing r = make_routing(s, spec, 7 + checked);
        const RoutingPlan host = build_routing_plan(s, r.topk_idx.data()).value();
        auto gpu = device_plan(s, r.topk_idx, &r.topk_w);
        ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
        expect_same_plan(*gpu, host, s.to_string() + " routing=" + spec);
        ++checked;
      }
    }
  EXPECT_GE(checked, 60);
}

TEST(DevicePlan, BadIdsGetTheHostMessage) {
  DETMOE_REQUIRE_GPU();
  const Shape s{40, 64, 64, 8, 3, 2, 0};  // P = 2: token 25 belongs to rank 1
  const Routing good = make_routing(s, "balanced", 3);
  struct Bad {
    int64_t token, slot;
    int32_t value;
  };
  for (const Bad& b : {Bad{25, 1, 17}, Bad{3, 0, -3}, Bad{39, 2, 8}}) {
    std::vector<int32_t> idx = good.topk_idx;
    idx[b.token * s.k + b.slot] = b.value;
    const Status host = validate_routing(s, idx.data(), good.topk_w.data(), s.tokens_global());
    ASSERT_FALSE(host.ok());
    auto gpu = device_plan(s, idx, &good.topk_w);
    ASSERT_FALSE(gpu.ok());
    EXPECT_EQ(gpu.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(gpu.status().message(), host.message());
    EXPECT_NE(gpu.status().message().find(std::to_string(b.value)), std::string::npos) << gpu.status().message();
  }
  // A repeat inside a token, and an earlier-token error winning over a later one.
  std::vector<int32_t> idx = good.topk_idx;
  idx[30 * s.k + 2] = idx[30 * s.k + 0];
  idx[31 * s.k + 0] = 99;
  const Status host = validate_routing(s, idx.data(), good.topk_w.data(), s.tokens_global());
  auto gpu = device_plan(s, idx, &good.topk_w);
  ASSERT_FALSE(gpu.ok());
  EXPECT_EQ(gpu.status().message(), host.message());
  EXPECT_NE(host.message().find("repeats"), std::string::npos) << host.message();
}

TEST(DevicePlan, NonFiniteWeightsGetTheHostMessage) {
  DETMOE_REQUIRE_GPU();
  const Shape s{32, 64, 64, 8, 2, 1, 0};
  const Routing r = make_routing(s, "balanced", 5);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    std::vector<float> w = r.topk_w;
    w[11 * s.k + 1] = bad;
    const Status host = validate_routing(s, r.topk_idx.data(), w.data(), s.tokens_global());
    auto gpu = device_plan(s, r.topk_idx, &w);
    ASSERT_FALSE(gpu.ok());
    EXPECT_EQ(gpu.status().message(), host.message());
  }
}

TEST(DevicePlan, CapacityErrorMatchesHost) {
  DETMOE_REQUIRE_GPU();
  const Shape s{64, 64, 64, 8, 2, 2, 0};
  const Routing r = make_routing(s, "all-to-one", 1);  // every token to experts {0, 1}: rank 0
  const auto host = build_routing_plan(s, r.topk_idx.data(), 100);
  ASSERT_FALSE(host.ok());
  auto gpu = device_plan(s, r.topk_idx, &r.topk_w, 100);
  ASSERT_FALSE(gpu.ok());
  EXPECT_EQ(gpu.status().code(), ErrorCode::kCapacityExceeded);
  EXPECT_EQ(gpu.status().message(), host.status().message());
  auto enough = device_plan(s, r.topk_idx, &r.topk_w, 256);
  ASSERT_TRUE(enough.ok()) << enough.status().to_string();
  expect_same_plan(*enough, build_routing_plan(s, r.topk_idx.data(), 256).value(), "capacity 256");
}

}  // namespace
}  // namespace detmoe
