// Launchers of the routing-plan kernels (plan_kernels.cu): a counting sort of the global
// (token, slot) pairs by expert, reproducing reference/host/plan.cpp bit for bit.
//
// Tokens are cut into chunks of kReferencePlanChunkTokens inside each source rank. Per chunk and expert
// a histogram (shared-memory integer atomics: the count does not depend on their order); an
// exclusive scan over chunks per expert (one thread per expert walking the chunks in global
// token order); the expert offsets; then each (token, slot) finds its row as
// expert offset + chunk base + the number of earlier pairs of the chunk with the same expert —
// a stable sort by (expert, global token, slot) with no atomics at all.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "detmoe/problem.h"
#include "detmoe/status.h"

namespace detmoe::ref {

// The reference plan kernels' chunk (one CTA per chunk); the megakernel picks its own per launch
// (mk::kMaxPlanChunkTokens). Neither moves a bit: the placement is a stable sort.
inline constexpr int kReferencePlanChunkTokens = 256;

// Device tables of one plan (global, identical on every rank), typed like RoutingPlan.
struct PlanTables {
  int32_t* chunk_base = nullptr;         // [P·chunks_per_rank, E] counts, then bases within each expert
  int32_t* expert_count = nullptr;       // [E]
  int64_t* expert_offset = nullptr;      // [E+1]
  int32_t* expert_src_count = nullptr;   // [E, P]
  int64_t* expert_src_offset = nullptr;  // [E, P]
  int64_t* rank_row_begin = nullptr;     // [P+1]
  int32_t* row_token = nullptr;          // [rows]
  int32_t* row_slot = nullptr;           // [rows]
  int64_t* slot_row = nullptr;           // [rows]
  int64_t* pair_rows = nullptr;          // [P, P]
  int64_t* send_offset = nullptr;        // [P, P]
  int64_t* recv_offset = nullptr;        // [P, P]
  int64_t* max_recv_rows = nullptr;      // [1]
  // First bad (token, slot) as token·64 + slot (k ≤ 32); all ones = none.
  unsigned long long* error_key = nullptr;
};

int64_t plan_chunks_per_rank(const Shape& shape);

// Validation (ids in range, no repeat within a token, finite weights when topk_w is given)
// and the whole plan, on `stream`. Safe on bad input: out-of-range ids are skipped, repeats get
// distinct rows, so nothing is written out of bounds; the caller reads error_key afterwards.
Status launch_plan_kernels(const Shape& shape, const int32_t* topk_idx, const float* topk_w, const PlanTables& t,
                           cudaStream_t stream);

// Rank `rank`'s send positions: send_pos[t·k + j] = row of (t, j) in the rank's send buffer,
// ordered by destination rank, then expert, then token (send_base: scratch [E]).
Status launch_send_positions(const Shape& shape, int rank, const int32_t* topk_idx, const PlanTables& t,
                             int64_t* send_base, int32_t* send_pos, cudaStream_t stream);

}  // namespace detmoe::ref
