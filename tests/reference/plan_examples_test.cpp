// The routing plan on hand-worked examples, its errors, and its speed at full size.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include "detmoe/config.h"
#include "detmoe/plan.h"
#include "detmoe/routing.h"

namespace detmoe {
namespace {

// 2 ranks × 2 tokens, E = 4 (rank 0 owns experts 0-1, rank 1 owns 2-3), k = 2.
//   token 0 (rank 0): {2, 0}   token 1 (rank 0): {1, 2}
//   token 2 (rank 1): {0, 3}   token 3 (rank 1): {2, 1}
TEST(PlanExample, TwoRanksByHand) {
  const Shape s{2, 64, 64, 4, 2, 2, 0};
  const std::vector<int32_t> idx = {2, 0, 1, 2, 0, 3, 2, 1};
  const RoutingPlan plan = build_routing_plan(s, idx.data()).value();
  EXPECT_EQ(plan.rows, 8);
  EXPECT_EQ(plan.expert_count, (std::vector<int32_t>{2, 2, 3, 1}));
  EXPECT_EQ(plan.expert_offset, (std::vector<int64_t>{0, 2, 4, 7, 8}));
  // [e][src]
  EXPECT_EQ(plan.expert_src_count, (std::vector<int32_t>{1, 1, 1, 1, 2, 1, 0, 1}));
  EXPECT_EQ(plan.expert_src_offset, (std::vector<int64_t>{0, 1, 0, 1, 0, 2, 0, 0}));
  EXPECT_EQ(plan.rank_row_begin, (std::vector<int64_t>{0, 4, 8}));
  // Rows: e0: (0,1) (2,0) | e1: (1,0) (3,1) | e2: (0,0) (1,1) (3,0) | e3: (2,1)
  EXPECT_EQ(plan.row_token, (std::vector<int32_t>{0, 2, 1, 3, 0, 1, 3, 2}));
  EXPECT_EQ(plan.row_slot, (std::vector<int32_t>{1, 0, 0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(plan.slot_row, (std::vector<int64_t>{4, 0, 2, 5, 1, 7, 6, 3}));
  // [src][dst]
  EXPECT_EQ(plan.pair_rows, (std::vector<int64_t>{2, 2, 2, 2}));
  EXPECT_EQ(plan.send_offset, (std::vector<int64_t>{0, 2, 0, 2}));
  // rank 0's buffer: (0,1) (2,0) (1,0) (3,1) → src 0 first at 0, src 1 at 1;
  // rank 1's buffer: (0,0) (1,1) (3,0) (2,1) → src 0 at 0, src 1 at 2.
  EXPECT_EQ(plan.recv_offset, (std::vector<int64_t>{0, 0, 1, 2}));
  EXPECT_EQ(plan.max_recv_rows, 4);
  EXPECT_EQ(plan.capacity_rows, worst_case_recv_rows(s));
}

TEST(PlanExample, ASourceWithNoRowsForARankPointsAtTheEnd) {
  const Shape s{1, 64, 64, 4, 1, 2, 0};
  const std::vector<int32_t> idx = {0, 1};  // both tokens go to rank 0
  const RoutingPlan plan = build_routing_plan(s, idx.data()).value();
  EXPECT_EQ(plan.pair_rows, (std::vector<int64_t>{1, 0, 1, 0}));
  EXPECT_EQ(plan.recv_rows(1), 0);
  EXPECT_EQ(plan.recv_offset, (std::vector<int64_t>{0, 0, 1, 0}));
}

TEST(PlanErrors, BadRoutingIsNamedBeforeAnyWork) {
  const Shape s{2, 64, 64, 4, 2, 2, 0};
  std::vector<int32_t> idx = {2, 0, 1, 2, 0, 3, 2, 1};
  idx[5] = 4;
  StatusOr<RoutingPlan> plan = build_routing_plan(s, idx.data());
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().message(), "topk_idx[2,1] = 4 is out of range [0, 4)");
  idx[5] = 0;
  plan = build_routing_plan(s, idx.data());
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().message(), "topk_idx[2,1] = 0 repeats topk_idx[2,0]");
  plan = build_routing_plan(s, nullptr);
  EXPECT_FALSE(plan.ok());
  Shape bad = s;
  bad.P = 3;
  plan = build_routing_plan(bad, idx.data());
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("P = 3"), std::string::npos);
}

TEST(PlanErrors, CapacityIsCheckedAndNamed) {
  const Shape s{2, 64, 64, 4, 2, 2, 0};
  const std::vector<int32_t> idx = {2, 0, 1, 2, 0, 3, 2, 1};
  StatusOr<RoutingPlan> plan = build_routing_plan(s, idx.data(), 3);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), ErrorCode::kCapacityExceeded);
  EXPECT_NE(plan.status().message().find("rank 0 receives 4 rows, but the receive capacity is 3 rows"),
            std::string::npos)
      << plan.status().message();
  plan = build_routing_plan(s, idx.data(), -1);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(plan.status().message().find("capacity_rows = -1"), std::string::npos);
  EXPECT_TRUE(build_routing_plan(s, idx.data(), 4).ok());
  EXPECT_EQ(build_routing_plan(s, idx.data(), 1000)->capacity_rows, 1000);
}

// Everything to one rank: the worst case fills its capacity exactly, and never overflows.
TEST(PlanErrors, AllToOneFitsTheWorstCase) {
  const Shape s{64, 64, 64, 16, 4, 4, 0};
  const Routing r = generate_routing(s, parse_routing("all-to-one:4").value(), 1).value();
  const RoutingPlan plan = build_routing_plan(s, r.topk_idx.data()).value();
  EXPECT_EQ(plan.max_recv_rows, worst_case_recv_rows(s));
  EXPECT_EQ(plan.recv_rows(1), s.P * s.T * s.k);
}

// qwen3-30b-a3b on 8 ranks, E = 512: 1M rows. Timing is printed, not asserted.
TEST(PlanSpeed, FullSizePlanIsQuick) {
  const Shape s{16384, 2048, 768, 512, 8, 8, 0};
  const Routing r = generate_routing(s, RoutingSpec{}, 42).value();
  const auto start = std::chrono::steady_clock::now();
  const RoutingPlan plan = build_routing_plan(s, r.topk_idx.data()).value();
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::cout << "plan of " << plan.rows << " rows (T=" << s.T << " P=" << s.P << " E=" << s.E << " k=" << s.k
            << ") in " << ms << " ms\n";
  EXPECT_EQ(plan.rows, s.rows_global());
}

}  // namespace
}  // namespace detmoe
