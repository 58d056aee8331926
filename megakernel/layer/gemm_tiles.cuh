// One GEMM tile of the fused kernel from a consumer warpgroup's side: the mainloop in the tile's
// shape (tile_mainloop.cuh), then the epilogue its task kind asks for (tile_epilogues.cuh). The
// producer's loads are tile_mainloop.cuh's produce_tile; which tile a task is, gemm_tasks.cuh.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "megakernel/gemm/epilogue.cuh"
#include "megakernel/layer/consumer_lead.cuh"
#include "megakernel/layer/layer_params.h"
#include "megakernel/layer/epilogue_copier.cuh"
#include "megakernel/layer/row_table.cuh"
#include "megakernel/layer/sync.cuh"
#include "megakernel/layer/tile_epilogues.cuh"
#include "megakernel/layer/tile_mainloop.cuh"
#include "megakernel/layer/trace.cuh"

namespace detmoe::mk {

static_assert(kMaxLayerConsumerLead <= Cfg::kStages, "a lead beyond the ring's stages would deadlock");

// What a consumer warpgroup does with its accumulators.
enum class TileEpilogue : int32_t {
  kSwiGLU,       // GEMM1: a = bf16(swiglu(g, u)) (+ h)
  kStore,        // shared GEMM2: a bf16 TMA store
  kScatterRows,  // routed GEMM2: rows straight to their tokens' y slots (the combine)
};

// What a consumer warpgroup computes for one task: the tile, the epilogue and where it writes
// (consume_tile's task arguments in one struct). gemm_tasks.cuh's GemmTask adds the dependency
// the producer waits for and the counter signalled. (The stage ring, shared memory and slab
// store stay separate arguments: passed in a struct of references, they renumbered the PTX's
// registers, and this split was to leave the kernel byte-identical.)
struct TileWork {
  LayerTile tile;
  TileEpilogue epilogue;
  const CUtensorMap* map_c;  // kSwiGLU, kStore
  const CUtensorMap* map_h;  // GEMM1 with save_h
  int32_t out_cols;          // F, Fs or H
  int32_t plan_row0;         // kScatterRows: plan row of the tile's first row
};

// Consumer warpgroup: mainloop in the tile's shape, `before_epilogue()`, then the epilogue of the
// warpgroup's window — its 64 rows × the tile's columns, or with a split shape rows 0–63 × its
// part of the columns. Either way the window's columns sit in the registers where a full tile
// keeps its first columns, so the epilogues are the full tile's, told where the window ends.
// The tile's signal: a job handed to the copier carries it (the rows' slots-ready runs, or
// GEMM1's `done`), sent once its stores land; true when the warpgroup still owes `done` itself (a
// slab-store tile, or a SwiGLU window with no rows or columns). A kScatterRows tile reads its
// rows from the producer's shared-memory table (row_table.cuh; `table_phase` counts the tables
// read).
template <class BeforeEpilogue>
DETMOE_DEVICE bool consume_tile(int wg, const TileWork& work, unsigned long long* done, const LayerParams& p,
                                const LaunchContext& ctx, const Smem& smem, const Pipe& pipe, Stage& st,
                                LayerSlabs& out, EpilogueHandoff& handoff, RowTable& table, uint32_t& table_phase,
                                float (&acc)[Cfg::kAccumulators], ConsumerLead& lead, BeforeEpilogue&& before_epilogue) {
  // `work` may be the task ring's shared-memory copy: the fields the epilogue needs are read
  // after the mainloop, so they are not held in registers across it.
  const LayerTile& t = work.tile;
  const TileShape shape = tile_shape(t);
  // Every warpgroup passes every stage through wgmma, even one with no rows of its own: letting
  // such a warpgroup pass the stages on without wgmma hung the H200 (producer waiting on an
  // empty barrier, consumers on a full one; bisected 2026-12-02, cause not found).
  const int32_t signal_kb = lead.begin_tile(t.k_blocks);
  consume_shaped(wg, shape, t, smem, pipe, st, acc, [&](int32_t kb) { ConsumerLead::after_stage(kb, signal_kb); });
  const TileEpilogue epilogue = work.epilogue;
  const int32_t out_cols = work.out_cols;
  const CUtensorMap* map_c = work.map_c;
  const CUtensorMap* map_h = work.map_h;
  const bool store_h = map_h != nullptr;
  const int32_t plan_row0 = work.plan_row0;
  const TileWindow window = tile_window(shape, wg, t.col0, out_cols);
  const uint32_t thread = threadIdx.x % 128;
  gemm::EpilogueTile et;
  et.row = t.c_row + window.row_offset;
  et.row_end = t.c_end;
  et.col0 = window.col0;
  et.warp = thread / 32;
  et.lane = thread % 32;
  const int32_t col_end = window.col_end;
  // GEMM2's output rows, looked up after the mainloop in the table the producer copied into
  // shared memory while it ran (it acquired the tile's inputs, and with them the dispatch's row
  // tables, before loading it). Loads from L2 here cost ≈ 2 µs per tile on deepseek-v3; holding
  // them in registers across the mainloop made ptxas spill.
  ScatterRows where{};
  if (epilogue == TileEpilogue::kScatterRows) {
    ptx::mbarrier_wait_parity(&table.full, table_phase & 1u);
    where = scatter_rows_of(p, TableRows{table, row_table_base(plan_row0)}, plan_row0 + (et.row - t.c_row),
                            min(Cfg::kWarpgroupRows, t.c_end - et.row), min(4, (col_end - et.col0) / 64));
    ptx::mbarrier_arrive(&table.empty);  // this thread's reads are done: the producer may load the next
    ++table_phase;
  }
  TaskTracer::mainloop_done(p, static_cast<uint32_t>(shape));
  before_epilogue();
  TaskTracer::epilogue_start(p);
  switch (epilogue) {
    case TileEpilogue::kSwiGLU:
      if (up_register(shape) == 32) {
        return !handoff.swiglu<32>(acc, et, out_cols, map_c, store_h ? map_h : nullptr, done);
      }
      return !handoff.swiglu<64>(acc, et, out_cols, map_c, store_h ? map_h : nullptr, done);
    case TileEpilogue::kScatterRows:
      handoff.scatter_rows(acc, et, col_end, ctx, where);
      return false;
    case TileEpilogue::kStore: {
      handoff.reclaim();  // the slabs lie in the copier's staging
      gemm::KernelParams kp{};
      kp.epilogue = static_cast<int32_t>(gemm::Epilogue::kStoreBF16);
      kp.out_cols = col_end;  // slabs at or past it are skipped, not clipped: col_end is 64-aligned
      gemm::StoreEpilogue::apply<Cfg>(acc, t.k_blocks == 0, et, kp, map_c, nullptr, out);
      break;
    }
  }
  return true;
}

}  // namespace detmoe::mk
