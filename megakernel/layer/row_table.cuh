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
#include "megakernel/layer/tile_mainloop.cuh"
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

// The producer thread's side: each scatter tile's table, loaded right after the tile's k-block
// load_kblock(k_blocks) — once its first min(k_blocks, kStages) k-blocks are issued (why then:
// above) — or, with no k-block, after the tile. `phase_` counts the tables loaded, as the
// consumers' phase counts the tables read. (The caller keeps the hook into produce_tile: passing
// it through a wrapper changed the kernel's code, checked against the cubin.)
class RowTableLoader {
 public:
  DETMOE_DEVICE explicit RowTableLoader(RowTable& t) : t_(t) {}

  DETMOE_DEVICE static int32_t load_kblock(int32_t k_blocks) { return min(k_blocks, Cfg::kStages) - 1; }

  // The table of plan rows [plan_row0, plan_row0 + rows).
  DETMOE_DEVICE void load(const LayerParams& p, int32_t plan_row0, int32_t rows, bool fake) {
    ptx::mbarrier_wait_parity(&t_.empty, (phase_ & 1u) ^ 1u);
    const RowTableWindow w = row_table_window(plan_row0, rows);
    const uint32_t bytes = static_cast<uint32_t>(w.end - w.begin) * 4u;
    if (fake) {
      ptx::mbarrier_arrive(&t_.full);
    } else {
      ptx::mbarrier_arrive_expect_tx(&t_.full, 2 * bytes);
      ptx::bulk_load(t_.token, p.ws.row_token + w.begin, bytes, &t_.full);
      ptx::bulk_load(t_.slot, p.ws.row_slot + w.begin, bytes, &t_.full);
    }
    ++phase_;
  }

 private:
  RowTable& t_;
  uint32_t phase_ = 0;
};

// A tile's plan-row lookups in the shared-memory table.
struct TableRows {
  const RowTable& t;
  int32_t base;  // row_table_base of the tile
  DETMOE_DEVICE int32_t token(int32_t plan_row) const { return t.token[plan_row - base]; }
  DETMOE_DEVICE int32_t slot(int32_t plan_row) const { return t.slot[plan_row - base]; }
};

}  // namespace detmoe::mk
