// The routing plan: where every (token, slot) row goes. Built on the host here; the GPU plan
// kernels (reference/, megakernel/) must reproduce it bit for bit.
//
// Global row order: experts 0..E−1 in turn; inside an expert, rows sorted by global token id
// g = src_rank·T + t (then slot). Rank r receives the contiguous row range of its experts
// [r·E/P, (r+1)·E/P), so the order is the same for every P (D2), and a row's position is a
// pure function of topk_idx — arrival order never matters.
#pragma once

#include <cstdint>
#include <vector>

#include "detmoe/problem.h"
#include "detmoe/status.h"

namespace detmoe {

struct RoutingPlan {
  Shape shape;
  int64_t rows = 0;                     // P·T·k
  std::vector<int32_t> expert_count;    // [E] rows per expert
  std::vector<int64_t> expert_offset;   // [E+1] exclusive prefix sum of expert_count
  // Rows expert e receives from source rank s, and where they start inside expert e's segment:
  std::vector<int32_t> expert_src_count;   // [E, P]
  std::vector<int64_t> expert_src_offset;  // [E, P] relative to expert_offset[e]
  std::vector<int64_t> rank_row_begin;  // [P+1] = expert_offset[r·E/P]; rank r's receive range
  std::vector<int32_t> row_token;       // [rows] global token id of each row
  std::vector<int32_t> row_slot;        // [rows] slot j of each row
  std::vector<int64_t> slot_row;        // [P·T·k] inverse map: global row of (token, slot)
  // Rows travelling from rank s to rank d, and their start in s's send buffer, which is ordered
  // like the receive buffers: by destination rank, then expert, then token.
  std::vector<int64_t> pair_rows;         // [P, P]
  std::vector<int64_t> send_offset;       // [P, P]
  // [P, P] start of s's first row in d's receive buffer (relative to rank_row_begin[d]); the
  // buffer is in global row order, so s's rows are contiguous only per expert, at
  // expert_offset[e] − rank_row_begin[d] + expert_src_offset[e, s]. recv_rows(d) if s sends none.
  std::vector<int64_t> recv_offset;
  int64_t max_recv_rows = 0;              // max over ranks of rows received
  int64_t capacity_rows = 0;              // capacity the plan was checked against

  int64_t recv_rows(int64_t rank) const { return rank_row_begin[rank + 1] - rank_row_begin[rank]; }
  int64_t dest_rank_of_expert(int64_t e) const { return e / shape.experts_per_rank(); }
};

// Validates shape and routing first (same messages as validate_routing). capacity_rows = 0
// means the worst case (never exceeded); a smaller cap that the routing needs more than gives
// kCapacityExceeded naming the rank, the rows needed and the capacity.
StatusOr<RoutingPlan> build_routing_plan(const Shape& shape, const int32_t* topk_idx, int64_t capacity_rows = 0);

}  // namespace detmoe
