// The row table of a tile that scatters rows to their tokens' slots (the forward's routed GEMM2,
// the backward's dx tiles) in shared memory: where each of its ≤ 128 plan rows goes (global token
// and slot, the dispatch's row_token / row_slot), loaded by the producer with one bulk copy per
// array while the tile's mainloop runs, instead of read by the consumers with dependent L2 loads
// after it (≈ 2–3 µs per GEMM2 tile on deepseek-v3, ≈ 2 % of the consumers' warp samples by ncu;
// docs/PERF.md session 16).
//
// One table per CTA, single-buffered: the producer loads tile i+1's table after issuing its
// first min(k_blocks, kStages) k-blocks, by which time the consumers are past tile i's mainloop
// and read tile i's table at once; it still waits on `empty` (256 consumer arrivals) first.
// Neither wait can deadlock: the consumers' read of tile i's table needs only stages the
// producer has already loaded. After an abort the producer arrives without data (the consumers
// then read stale rows, which the scatter ignores: it stores nothing after an abort).
#pragma once

#include <cstdint>

#include "megakernel/layer/layer_params.h"
#include "megakernel/layer/row_table_window.h"
#include "megakernel/ptx/common.cuh"
#include "megakernel/ptx/mbarrier.cuh"
#include "megakernel/ptx/tma.cuh"

namespace detmoe::mk {

static_assert(kRowTableTileRows == kRowsPerMBlock, "a table holds one tile's rows");

struct RowTable {
  uint64_t full;   // the producer's bulk copies (expect_tx)
  uint64_t empty;  // every consumer thread, once it read the table
  alignas(16) int32_t token[kRowTableRows];
  alignas(16) int32_t slot[kRowTableRows];
};

// One thread, before the CTA barrier that precedes any use (covered by the pipeline's
// fence.mbarrier_init).
DETMOE_DEVICE void init_row_table(RowTable& t) {
  ptx::mbarrier_init(&t.full, 1);
  ptx::mbarrier_init(&t.empty, 256);
}

// The first plan row the table holds for a tile starting at plan row `plan_row0`.
DETMOE_DEVICE int32_t row_table_base(int32_t plan_row0) { return row_table_window(plan_row0, 1).begin; }

// Producer thread: the table of plan rows [plan_row0, plan_row0 + rows). `phase` counts the
// tables loaded (bit 0 is the parity), as the consumers' does.
DETMOE_DEVICE void load_row_table(RowTable& t, uint32_t& phase, const LayerParams& p, int32_t plan_row0,
                                  int32_t rows, bool fake) {
  ptx::mbarrier_wait_parity(&t.empty, (phase & 1u) ^ 1u);
  const RowTableWindow w = row_table_window(plan_row0, rows);
  const int32_t begin = w.begin;
  const uint32_t bytes = static_cast<uint32_t>(w.end - w.begin) * 4u;
  if (fake) {
    ptx::mbarrier_arrive(&t.full);
  } else {
    ptx::mbarrier_arrive_expect_tx(&t.full, 2 * bytes);
    ptx::bulk_load(t.token, p.ws.row_token + begin, bytes, &t.full);
    ptx::bulk_load(t.slot, p.ws.row_slot + begin, bytes, &t.full);
  }
  ++phase;
}

// Plan-row lookups of a GEMM2 tile's scatter: from the dispatch's tables in global memory (L2),
// or from the shared-memory table.
struct GlobalRows {
  const LayerParams& p;
  DETMOE_DEVICE int32_t token(int32_t plan_row) const { return __ldcg(p.ws.row_token + plan_row); }
  DETMOE_DEVICE int32_t slot(int32_t plan_row) const { return __ldcg(p.ws.row_slot + plan_row); }
};

struct TableRows {
  const RowTable& t;
  int32_t base;  // row_table_base of the tile
  DETMOE_DEVICE int32_t token(int32_t plan_row) const { return t.token[plan_row - base]; }
  DETMOE_DEVICE int32_t slot(int32_t plan_row) const { return t.slot[plan_row - base]; }
};

}  // namespace detmoe::mk
