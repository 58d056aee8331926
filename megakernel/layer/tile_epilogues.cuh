// Where routed GEMM2's rows go (the tokens' y slots: the combine) and the slots-ready signal each
// row run owes, from the tile's row table. The epilogues themselves — GEMM1's SwiGLU, the row
// scatter — are handed to the copier warps (epilogue_copier.cuh); the shared expert's GEMM2 uses
// the GEMM core's bf16 store epilogue as it is (gemm_tiles.cuh).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "detmoe/contract_math.h"
#include "detmoe/numeric.h"
#include "megakernel/gemm/epilogue.cuh"
#include "megakernel/layer/layer_params.h"
#include "megakernel/layer/row_table.cuh"
#include "megakernel/layer/sync.cuh"
#include "megakernel/layer/task_list.cuh"
#include "megakernel/layer/tile_mainloop.cuh"

namespace detmoe::mk {

// A signal owed once a warpgroup's y rows have landed: `amount` row-slabs to `counter` (null:
// none).
struct SlotRun {
  unsigned long long* counter;
  uint32_t amount;
};

// The signal thread `thread` of a warpgroup owes for its rows [plan_row0, plan_row0 + rows) of a
// GEMM2 tile: one per run of rows of the same (source rank, sum chunk) inside a warp, sent by
// the run's first lane. Rows are sorted by global token, so such rows are contiguous; a run that
// crosses a warp boundary is signalled in two parts. The count is in row-slabs (64 columns of one
// row; `slabs` per row here), so a sum chunk is complete at n·k·H/64 whichever warpgroup stored
// which columns (split tiles give each warpgroup half the columns). Found with one load per lane
// and a ballot (a serial scan along a run cost one dependent load per row, up to 8 per tile on
// deepseek). All 32 lanes of each warp must call it. `lookup`: the tile's row table.
DETMOE_DEVICE SlotRun slot_run_of(const LayerParams& p, const TableRows& lookup, int32_t plan_row0, int32_t rows,
                                  int32_t slabs, int32_t thread) {
  const uint32_t lane = ptx::lane_id();
  const bool mine = thread < rows;
  int32_t s = 0, chunk = 0;
  int64_t key = -1 - static_cast<int64_t>(lane);  // distinct for lanes without a row
  if (mine) {
    const int32_t g = lookup.token(plan_row0 + thread);
    s = g / p.T;
    chunk = (g % p.T) / kSumChunkTokens;
    key = static_cast<int64_t>(s) * p.sum_chunks + chunk;
  }
  const int64_t before = __shfl_up_sync(0xffffffffu, key, 1);
  const bool start = mine && (lane == 0 || before != key);
  const uint32_t starts = __ballot_sync(0xffffffffu, start);
  const uint32_t owned = __ballot_sync(0xffffffffu, mine);
  if (!start) return {nullptr, 0};
  const uint32_t later = lane == 31 ? 0u : starts & (~0u << (lane + 1));
  const int32_t end = later != 0 ? __ffs(later) - 1 : 32 - __clz(owned);
  return {rank_counters(p, s) + p.counters.slots_ready + chunk,
          static_cast<uint32_t>((end - static_cast<int32_t>(lane)) * slabs)};
}

// Where a warpgroup's GEMM2 rows go and the slots-ready signal it will owe, looked up from the
// dispatch's row tables once per tile, before its epilogue (from the shared-memory copy the
// producer made of the tile's rows, row_table.cuh).
struct ScatterRows {
  int32_t slot;  // row `thread` of the warpgroup (threads 0–63): global slot g·k + j, −1: none
  SlotRun run;
};

// All 32 lanes of each warp call it (slot_run_of's ballot). plan_row0: the warpgroup's first plan
// row; rows: how many of its 64 rows belong to the tile (≤ 0: none); slabs: its 64-column slabs.
DETMOE_DEVICE ScatterRows scatter_rows_of(const LayerParams& p, const TableRows& lookup, int32_t plan_row0,
                                          int32_t rows, int32_t slabs) {
  ScatterRows out;
  const int32_t thread = static_cast<int32_t>(threadIdx.x % 128);
  out.slot = -1;
  if (thread < rows) {
    const int32_t g = lookup.token(plan_row0 + thread);
    const int32_t j = lookup.slot(plan_row0 + thread);
    // Written by this launch's dispatch, so always in range; checked anyway because a stale
    // table (after an abort) must never send a store outside y.
    if (g >= 0 && g < p.P * p.T && j >= 0 && j < p.k) out.slot = g * p.k + j;
  }
  out.run = rows > 0 && slabs > 0 ? slot_run_of(p, lookup, plan_row0, rows, slabs, thread) : SlotRun{nullptr, 0};
  return out;
}

// Where the forward's y row of global slot g·k + j lives (y_slots of its source rank).
struct YSlotRow {
  DETMOE_DEVICE uint16_t* operator()(const LayerParams& p, int32_t slot) const {
    const int32_t rank_slots = p.T * p.k;
    return y_slots(p, slot / rank_slots) + static_cast<int64_t>(slot % rank_slots) * p.H;
  }
};

}  // namespace detmoe::mk
