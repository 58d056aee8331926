// Properties of the host routing plan over random shapes and every routing distribution: it is a
// permutation of the (token, slot) pairs sorted by (expert, global token), the same for every EP
// size, and its exchange tables agree with it.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "detmoe/config.h"
#include "detmoe/plan.h"
#include "detmoe/routing.h"
#include "support/routing_generators.h"

namespace detmoe {
namespace {

using testing::full;
using testing::gen_routing_spec;
using testing::gen_small_shape;
using testing::small_shape;

// The distribution without its parameters ("zipf:0.37" → "zipf"): what the run's tag table counts.
std::string kind_name(const RoutingSpec& spec) {
  const std::string text = spec.to_string();
  return text.starts_with("zipf") ? "zipf" : text.substr(0, text.find(':'));
}

struct Case {
  Shape shape;
  Routing routing;
};

Case gen_case() {
  Case c;
  c.shape = *gen_small_shape();
  const RoutingSpec spec = *gen_routing_spec(c.shape);
  StatusOr<Routing> r = generate_routing(c.shape, spec, *full(rc::gen::arbitrary<uint64_t>()));
  RC_ASSERT(r.ok());
  c.routing = std::move(r).value();
  RC_TAG(kind_name(spec));
  return c;
}

RoutingPlan plan_ok(const Shape& s, const std::vector<int32_t>& idx, int64_t capacity = 0) {
  StatusOr<RoutingPlan> plan = build_routing_plan(s, idx.data(), capacity);
  if (!plan.ok()) RC_FAIL(plan.status().to_string());
  return std::move(plan).value();
}

RC_GTEST_PROP(PlanProperties, CountsAndOffsetsAddUp, ()) {
  const Case c = gen_case();
  const Shape& s = c.shape;
  const RoutingPlan plan = plan_ok(s, c.routing.topk_idx);
  RC_ASSERT(plan.rows == s.P * s.T * s.k);
  RC_ASSERT(std::accumulate(plan.expert_count.begin(), plan.expert_count.end(), int64_t{0}) == plan.rows);
  RC_ASSERT(plan.expert_offset.front() == 0 && plan.expert_offset.back() == plan.rows);
  std::vector<int64_t> per_expert(s.E, 0);
  for (int32_t e : c.routing.topk_idx) ++per_expert[e];
  for (int64_t e = 0; e < s.E; ++e) {
    RC_ASSERT(plan.expert_count[e] == per_expert[e]);
    RC_ASSERT(plan.expert_offset[e + 1] - plan.expert_offset[e] == plan.expert_count[e]);
    int64_t within = 0;
    for (int64_t src = 0; src < s.P; ++src) {
      int64_t expected = 0;
      for (int64_t t = 0; t < s.T; ++t)
        for (int64_t j = 0; j < s.k; ++j) expected += c.routing.topk_idx[(src * s.T + t) * s.k + j] == e;
      RC_ASSERT(plan.expert_src_count[e * s.P + src] == expected);
      RC_ASSERT(plan.expert_src_offset[e * s.P + src] == within);
      within += expected;
    }
    RC_ASSERT(within == plan.expert_count[e]);
  }
}

// Every (token, slot) is exactly one row, that row is in its expert's segment, and segments are
// sorted by global token id.
RC_GTEST_PROP(PlanProperties, RowsArePairsSortedByExpertThenGlobalToken, ()) {
  const Case c = gen_case();
  const Shape& s = c.shape;
  const RoutingPlan plan = plan_ok(s, c.routing.topk_idx);
  std::vector<int> seen(plan.rows, 0);
  for (int64_t e = 0; e < s.E; ++e) {
    for (int64_t row = plan.expert_offset[e]; row < plan.expert_offset[e + 1]; ++row) {
      const int64_t g = plan.row_token[row], j = plan.row_slot[row];
      RC_ASSERT(g >= 0 && g < s.P * s.T && j >= 0 && j < s.k);
      RC_ASSERT(c.routing.topk_idx[g * s.k + j] == e);
      RC_ASSERT(++seen[g * s.k + j] == 1);
      if (row > plan.expert_offset[e]) RC_ASSERT(plan.row_token[row - 1] < g);
    }
  }
  RC_ASSERT(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
}

RC_GTEST_PROP(PlanProperties, InverseMapRoundTrips, ()) {
  const Case c = gen_case();
  const Shape& s = c.shape;
  const RoutingPlan plan = plan_ok(s, c.routing.topk_idx);
  RC_ASSERT(static_cast<int64_t>(plan.slot_row.size()) == plan.rows);
  for (int64_t g = 0; g < s.P * s.T; ++g)
    for (int64_t j = 0; j < s.k; ++j) {
      const int64_t row = plan.slot_row[g * s.k + j];
      RC_ASSERT(row >= 0 && row < plan.rows);
      RC_ASSERT(plan.row_token[row] == g && plan.row_slot[row] == j);
    }
  for (int64_t row = 0; row < plan.rows; ++row)
    RC_ASSERT(plan.slot_row[plan.row_token[row] * s.k + plan.row_slot[row]] == row);
}

// Rank r receives exactly the rows of its experts, and the ranges tile [0, rows).
RC_GTEST_PROP(PlanProperties, RankRangesPartitionTheRows, ()) {
  const Case c = gen_case();
  const Shape& s = c.shape;
  const RoutingPlan plan = plan_ok(s, c.routing.topk_idx);
  RC_ASSERT(static_cast<int64_t>(plan.rank_row_begin.size()) == s.P + 1);
  RC_ASSERT(plan.rank_row_begin.front() == 0 && plan.rank_row_begin.back() == plan.rows);
  int64_t max_recv = 0;
  for (int64_t r = 0; r < s.P; ++r) {
    RC_ASSERT(plan.rank_row_begin[r] == plan.expert_offset[r * s.experts_per_rank()]);
    RC_ASSERT(plan.recv_rows(r) >= 0);
    max_recv = std::max(max_recv, plan.recv_rows(r));
    for (int64_t row = plan.rank_row_begin[r]; row < plan.rank_row_begin[r + 1]; ++row) {
      const int32_t e = c.routing.topk_idx[plan.row_token[row] * s.k + plan.row_slot[row]];
      RC_ASSERT(plan.dest_rank_of_expert(e) == r);
    }
  }
  RC_ASSERT(plan.max_recv_rows == max_recv);
  RC_ASSERT(plan.capacity_rows == worst_case_recv_rows(s));
  RC_ASSERT(plan.max_recv_rows <= plan.capacity_rows);
}

// pair_rows, send_offset and recv_offset against a brute-force walk of the receive ranges.
RC_GTEST_PROP(PlanProperties, ExchangeTablesMatchTheRows, ()) {
  const Case c = gen_case();
  const Shape& s = c.shape;
  const int64_t P = s.P;
  const RoutingPlan plan = plan_ok(s, c.routing.topk_idx);
  RC_ASSERT(static_cast<int64_t>(plan.pair_rows.size()) == P * P);
  for (int64_t d = 0; d < P; ++d) {
    std::vector<int64_t> from(P, 0), first(P, plan.recv_rows(d));
    for (int64_t row = plan.rank_row_begin[d]; row < plan.rank_row_begin[d + 1]; ++row) {
      const int64_t src = plan.row_token[row] / s.T;
      if (from[src]++ == 0) first[src] = row - plan.rank_row_begin[d];
    }
    int64_t received = 0;
    for (int64_t src = 0; src < P; ++src) {
      RC_ASSERT(plan.pair_rows[src * P + d] == from[src]);
      RC_ASSERT(plan.recv_offset[src * P + d] == first[src]);
      received += plan.pair_rows[src * P + d];
    }
    RC_ASSERT(received == plan.recv_rows(d));
  }
  for (int64_t src = 0; src < P; ++src) {
    int64_t offset = 0;
    for (int64_t d = 0; d < P; ++d) {
      RC_ASSERT(plan.send_offset[src * P + d] == offset);
      offset += plan.pair_rows[src * P + d];
    }
    RC_ASSERT(offset == s.T * s.k);  // a rank sends each of its rows exactly once
  }
  // Where s's rows of expert e land in d's buffer, from expert_src_offset; recv_offset is the
  // first of those positions.
  for (int64_t d = 0; d < P; ++d)
    for (int64_t src = 0; src < P; ++src) {
      int64_t lowest = plan.recv_rows(d);
      for (int64_t e = d * s.experts_per_rank(); e < (d + 1) * s.experts_per_rank(); ++e) {
        const int64_t at = plan.expert_offset[e] - plan.rank_row_begin[d] + plan.expert_src_offset[e * P + src];
        for (int64_t i = 0; i < plan.expert_src_count[e * P + src]; ++i)
          RC_ASSERT(plan.row_token[plan.rank_row_begin[d] + at + i] / s.T == src);
        if (plan.expert_src_count[e * P + src] > 0) lowest = std::min(lowest, at);
      }
      RC_ASSERT(plan.recv_offset[src * P + d] == lowest);
    }
}

// D2: one global routing of N tokens planned with P = 1, 2, 4, 8 (T = N/P) orders every expert's
// rows identically.
RC_GTEST_PROP(PlanProperties, GlobalRowOrderIsTheSameForEveryEpSize, ()) {
  const int64_t N = 8 * *full(rc::gen::inRange<int64_t>(1, 9));
  const int64_t E = 8 * *full(rc::gen::inRange<int64_t>(1, 9));
  const int64_t k = *full(rc::gen::inRange<int64_t>(1, 9));
  const Shape single = small_shape(N, E, k, 1);
  const RoutingSpec spec = *gen_routing_spec(single);
  RC_TAG(kind_name(spec));
  const Routing r = generate_routing(single, spec, *full(rc::gen::arbitrary<uint64_t>())).value();
  const RoutingPlan base = plan_ok(single, r.topk_idx);
  for (int64_t P : {2, 4, 8}) {
    const RoutingPlan split = plan_ok(small_shape(N / P, E, k, P), r.topk_idx);
    RC_ASSERT(split.expert_count == base.expert_count);
    RC_ASSERT(split.expert_offset == base.expert_offset);
    RC_ASSERT(split.row_token == base.row_token);
    RC_ASSERT(split.row_slot == base.row_slot);
    RC_ASSERT(split.slot_row == base.slot_row);
  }
}

RC_GTEST_PROP(PlanProperties, CapacityBelowTheNeedIsReportedWithRankAndRows, ()) {
  const Case c = gen_case();
  const Shape& s = c.shape;
  const RoutingPlan plan = plan_ok(s, c.routing.topk_idx);
  // Exactly enough is fine, and the plan records the cap it was checked against.
  RC_ASSERT(plan_ok(s, c.routing.topk_idx, plan.max_recv_rows).capacity_rows == plan.max_recv_rows);
  const int64_t cap = *full(rc::gen::inRange<int64_t>(0, plan.max_recv_rows));
  if (cap == 0) return;  // 0 means "worst case", not "no room"
  const StatusOr<RoutingPlan> small = build_routing_plan(s, c.routing.topk_idx.data(), cap);
  RC_ASSERT(!small.ok());
  RC_ASSERT(small.status().code() == ErrorCode::kCapacityExceeded);
  int64_t rank = 0;
  while (plan.recv_rows(rank) <= cap) ++rank;  // the first rank over the cap is the one named
  const std::string& message = small.status().message();
  RC_ASSERT(message.find("rank " + std::to_string(rank) + " receives " + std::to_string(plan.recv_rows(rank)) +
                         " rows") != std::string::npos);
  RC_ASSERT(message.find("capacity is " + std::to_string(cap)) != std::string::npos);
}

}  // namespace
}  // namespace detmoe
