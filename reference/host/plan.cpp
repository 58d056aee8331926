// Host routing plan: a counting sort of the global (token, slot) pairs by expert.
//
// Visiting tokens in global order g = src·T + t, slots in order, and appending each pair to its
// expert's segment yields rows sorted by (expert, global token, slot) with no comparison sort — and
// the same order for every P, because g and the expert segments do not depend on P (plan.h).
#include "detmoe/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "detmoe/config.h"
#include "detmoe/routing.h"

namespace detmoe {
namespace {

// Per-pair tables of the exchange: rows s → d, their start in s's send buffer (ordered by
// destination, expert, token) and s's first row in d's receive buffer.
void fill_exchange(RoutingPlan& plan) {
  const int64_t P = plan.shape.P, E = plan.shape.E, epr = plan.shape.experts_per_rank();
  plan.pair_rows.assign(P * P, 0);
  plan.send_offset.assign(P * P, 0);
  plan.recv_offset.assign(P * P, 0);
  for (int64_t e = 0; e < E; ++e) {
    const int64_t d = e / epr;
    for (int64_t s = 0; s < P; ++s) plan.pair_rows[s * P + d] += plan.expert_src_count[e * P + s];
  }
  for (int64_t s = 0; s < P; ++s)
    for (int64_t d = 0, offset = 0; d < P; ++d) {
      plan.send_offset[s * P + d] = offset;
      offset += plan.pair_rows[s * P + d];
    }
  for (int64_t d = 0; d < P; ++d) {
    for (int64_t s = 0; s < P; ++s) {
      // The first of d's experts that gets a row from s holds s's first row; none: recv_rows(d).
      int64_t first = plan.recv_rows(d);
      for (int64_t e = d * epr; e < (d + 1) * epr; ++e) {
        if (plan.expert_src_count[e * P + s] == 0) continue;
        first = plan.expert_offset[e] - plan.rank_row_begin[d] + plan.expert_src_offset[e * P + s];
        break;
      }
      plan.recv_offset[s * P + d] = first;
    }
  }
}

}  // namespace

StatusOr<RoutingPlan> build_routing_plan(const Shape& shape, const int32_t* topk_idx, int64_t capacity_rows) {
  DETMOE_RETURN_IF_ERROR(validate_routing(shape, topk_idx, nullptr, shape.tokens_global()));
  if (capacity_rows < 0)
    return invalid_argument(fmt::format("capacity_rows = {} must be >= 0 (0 = worst case)", capacity_rows));

  RoutingPlan plan;
  plan.shape = shape;
  const int64_t T = shape.T, E = shape.E, k = shape.k, P = shape.P, epr = shape.experts_per_rank();
  const int64_t tokens = shape.tokens_global();
  plan.rows = shape.rows_global();
  plan.capacity_rows = capacity_rows == 0 ? worst_case_recv_rows(shape) : capacity_rows;

  // Counts per (expert, source rank), then the exclusive prefix sums.
  plan.expert_src_count.assign(E * P, 0);
  for (int64_t g = 0; g < tokens; ++g) {
    const int64_t src = g / T;
    for (int64_t j = 0; j < k; ++j) ++plan.expert_src_count[topk_idx[g * k + j] * P + src];
  }
  plan.expert_count.assign(E, 0);
  plan.expert_offset.assign(E + 1, 0);
  plan.expert_src_offset.assign(E * P, 0);
  for (int64_t e = 0; e < E; ++e) {
    int64_t within = 0;
    for (int64_t s = 0; s < P; ++s) {
      plan.expert_src_offset[e * P + s] = within;
      within += plan.expert_src_count[e * P + s];
    }
    plan.expert_count[e] = static_cast<int32_t>(within);
    plan.expert_offset[e + 1] = plan.expert_offset[e] + within;
  }
  plan.rank_row_begin.assign(P + 1, 0);
  for (int64_t r = 0; r <= P; ++r) plan.rank_row_begin[r] = plan.expert_offset[r * epr];

  // Capacity before any placement, as the device path checks it before any write.
  for (int64_t r = 0; r < P; ++r) {
    plan.max_recv_rows = std::max(plan.max_recv_rows, plan.recv_rows(r));
    if (plan.recv_rows(r) > plan.capacity_rows)
      return Status(ErrorCode::kCapacityExceeded,
                    fmt::format("rank {} receives {} rows, but the receive capacity is {} rows (recv_capacity_rows; "
                                "0 = worst case {})",
                                r, plan.recv_rows(r), plan.capacity_rows, worst_case_recv_rows(shape)));
  }

  // Placement: each expert's cursor walks its segment in global token order.
  std::vector<int64_t> cursor(plan.expert_offset.begin(), plan.expert_offset.end() - 1);
  plan.row_token.resize(plan.rows);
  plan.row_slot.resize(plan.rows);
  plan.slot_row.resize(plan.rows);
  for (int64_t g = 0; g < tokens; ++g) {
    for (int64_t j = 0; j < k; ++j) {
      const int64_t row = cursor[topk_idx[g * k + j]]++;
      plan.row_token[row] = static_cast<int32_t>(g);
      plan.row_slot[row] = static_cast<int32_t>(j);
      plan.slot_row[g * k + j] = row;
    }
  }
  fill_exchange(plan);
  return plan;
}

}  // namespace detmoe
