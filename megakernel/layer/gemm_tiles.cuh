// The GEMM tiles of the fused kernel, built on the GEMM core's pieces: its stage ring
// (gemm/pipeline.cuh), shared-memory map (gemm/smem_layout.cuh), K-major operand descriptors
// (gemm/operand_layout.cuh, kForward), consumer mainloop (gemm/kernel.cuh consume_k_blocks),
// slab stores and bf16 store epilogue (gemm/epilogue.cuh) and ragged TMA clipping.
//
// What differs from the standalone GEMM is only where a tile's operands come from:
//  - GEMM1 loads B as two 128-row halves, gate rows [f0, f0+128) and up rows [F+f0, F+f0+128)
//    of the expert's stacked [2F, H] weight, into the one 256-row B stage. Accumulator columns
//    0..127 are then gate and 128..255 up, and a thread holds gate column c in register i and up
//    column c in register i + 64: SwiGLU pairs stay thread-local with the user's weights as they
//    are (no interleaved copy), and h comes out in the contract's [g | u] layout.
//  - rows come from the plan (expert segments of the receive buffer) instead of group offsets.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "detmoe/contract_math.h"
#include "detmoe/numeric.h"
#include "megakernel/gemm/epilogue.cuh"
#include "megakernel/gemm/kernel.cuh"
#include "megakernel/gemm/operand_layout.cuh"
#include "megakernel/gemm/pipeline.cuh"
#include "megakernel/gemm/smem_layout.cuh"
#include "megakernel/gemm/swiglu_batch.cuh"
#include "megakernel/gemm/tile_config.cuh"
#include "megakernel/layer/layer_params.h"
#include "megakernel/layer/sync.cuh"
#include "megakernel/layer/task_list.cuh"
#include "megakernel/layer/tile_form.h"
#include "megakernel/layer/trace.cuh"
#include "megakernel/ptx/tma.cuh"

namespace detmoe::mk {

using Cfg = gemm::Tile128x256;
using Operands = gemm::OperandLayout<gemm::Layout::kForward, Cfg>;
using Smem = gemm::SmemLayout<Cfg>;
using Pipe = gemm::Pipeline<Cfg>;
using Stage = gemm::PipelineState<Cfg::kStages>;

// One output tile of one of the four GEMMs (routed/shared × GEMM1/GEMM2). Rows are absolute
// rows of the maps; *_end clips (ragged maps zero-fill loads and drop stores past it).
struct LayerTile {
  const CUtensorMap* map_a;
  const CUtensorMap* map_b;
  int32_t a_row, a_end;
  int32_t b_row, b_end;    // GEMM1: gate half; GEMM2: the whole 256-row B box
  int32_t up_row, up_end;  // GEMM1: up half; GEMM2: unused (−1)
  int32_t c_row, c_end;    // output rows (the epilogue adds the warpgroup's 64-row offset)
  int32_t col0;            // first output column (GEMM1: f0 of a; GEMM2: n0 of y)
  int32_t k_blocks;
};

// What a consumer warpgroup does with its accumulators.
enum class TileEpilogue : int32_t {
  kSwiGLU,       // GEMM1: a = bf16(swiglu(g, u)) (+ h)
  kStore,        // shared GEMM2: a bf16 TMA store
  kScatterRows,  // routed GEMM2: rows straight to their tokens' y slots (the combine)
};

static_assert(kFormWarpgroupRows == Cfg::kWarpgroupRows && kFormTileCols == Cfg::kBlockN,
              "tile_form.h describes this kernel's tile");

DETMOE_DEVICE TileShape tile_shape(const LayerTile& t) {
  return tile_shape_of({t.a_end - t.a_row, t.b_row, t.b_end, t.up_row >= 0});
}

// Producer (one thread): the k-blocks of one tile into the stage ring. `fake` fills each stage
// with an arrival and no data: after an abort the consumers still drain the same stage sequence
// and nobody hangs.
DETMOE_DEVICE void produce_tile(const LayerTile& t, const Smem& smem, const Pipe& pipe, Stage& st, bool fake) {
  constexpr uint32_t kHalfB = 128 * Cfg::kBlockK * 2;  // 128 rows × 128 bytes
  const TileShape shape = tile_shape(t);
  for (int32_t kb = 0; kb < t.k_blocks; ++kb) {
    if (fake) {
      ptx::mbarrier_wait_parity(pipe.empty + st.stage, st.phase ^ 1u);
      ptx::mbarrier_arrive(pipe.full + st.stage);
      st.advance();
      continue;
    }
    pipe.producer_acquire(st, Smem::kStageBytes);
    uint64_t* bar = pipe.full + st.stage;
    const int32_t k0 = kb * Cfg::kBlockK;
    const gemm::RaggedCoords ra = gemm::ragged_coords(t.a_row, t.a_end, Cfg::kBlockM);
    ptx::tma_load_3d(smem.a_stage(st.stage), t.map_a, bar, k0, ra.y, ra.z);
    if (t.up_row >= 0) {
      const gemm::RaggedCoords rg = gemm::ragged_coords(gate_load_row(shape, t.b_row), t.b_end, 128);
      const gemm::RaggedCoords ru = gemm::ragged_coords(t.up_row, t.up_end, 128);
      ptx::tma_load_3d(smem.b_stage(st.stage), t.map_b, bar, k0, rg.y, rg.z);
      ptx::tma_load_3d(smem.b_stage(st.stage) + kHalfB, t.map_b, bar, k0, ru.y, ru.z);
    } else {
      const gemm::RaggedCoords rb = gemm::ragged_coords(t.b_row, t.b_end, Cfg::kBlockN);
      ptx::tma_load_3d(smem.b_stage(st.stage), t.map_b, bar, k0, rb.y, rb.z);
    }
    st.advance();
  }
}

// GEMM1's epilogue: a[r, f0 + c] = bf16(swiglu(bf16 g, bf16 u)) with the reference's formula
// (contract_math.h), so the SwiGLU stage compares bitwise with the reference; optionally
// h[r, f0 + c] = bf16 g and h[r, F + f0 + c] = bf16 u. Gate column c is in the register of column
// c of the full form; up column c in kUp registers later (64 in the full form, 32 in the narrow
// gate/up form, whose m64n128 holds 64 gate and 64 up columns).
struct SplitSwiGLUEpilogue {
  template <int kUp>
  DETMOE_DEVICE static void apply(const float (&acc)[Cfg::kAccumulators], const gemm::EpilogueTile& t, int32_t F,
                                  const CUtensorMap* map_a, const CUtensorMap* map_h, bool store_h,
                                  gemm::SlabStore& out) {
    if (store_h) {
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        // Slabs 0, 1: gate columns f0 + 64s; slabs 2, 3: up columns F + f0 + 64(s − 2).
        const int32_t col = s < 2 ? t.col0 + 64 * s : F + t.col0 + 64 * (s - 2);
        const int32_t limit = s < 2 ? F : 2 * F;
        const int first = s < 2 ? 32 * s : kUp + 32 * (s - 2);
        out.store(map_h, col, limit, t.row, t.row_end, [&](uint32_t slab) {
          gemm::write_bf16_slab(slab, t.warp, t.lane, [&](int j) { return acc[first + j]; });
        });
      }
    }
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      out.store(map_a, t.col0 + 64 * s, F, t.row, t.row_end, [&](uint32_t slab) {
        // Two batches of 16: a batch of 32 holds 32 more live registers and spills.
        float a[2][16];
#pragma unroll
        for (int b = 0; b < 2; ++b) {
          const int c = 32 * s + 16 * b;
          gemm::swiglu_batch(
              a[b], [&](int j) { return __bfloat162float(__float2bfloat16_rn(acc[c + j])); },
              [&](int j) { return __bfloat162float(__float2bfloat16_rn(acc[c + j + kUp])); });
        }
        gemm::write_bf16_slab(slab, t.warp, t.lane, [&](int j) { return a[j / 16][j % 16]; });
      });
    }
  }
};

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
// deepseek). All 32 lanes of each warp must call it.
DETMOE_DEVICE SlotRun slot_run_of(const LayerParams& p, int32_t plan_row0, int32_t rows, int32_t slabs,
                                  int32_t thread) {
  const uint32_t lane = ptx::lane_id();
  const bool mine = thread < rows;
  int32_t s = 0, chunk = 0;
  int64_t key = -1 - static_cast<int64_t>(lane);  // distinct for lanes without a row
  if (mine) {
    const int32_t g = __ldcg(p.ws.row_token + plan_row0 + thread);
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
// dispatch's row tables (in L2) once per tile, before its epilogue.
struct ScatterRows {
  int32_t slot[4];  // rows thread/8 + 16i: global slot g·k + j of the row, −1: none
  SlotRun run;
};

// All 32 lanes of each warp call it (slot_run_of's ballot). plan_row0: the warpgroup's first plan
// row; rows: how many of its 64 rows belong to the tile (≤ 0: none); slabs: its 64-column slabs.
DETMOE_DEVICE ScatterRows scatter_rows_of(const LayerParams& p, int32_t plan_row0, int32_t rows, int32_t slabs) {
  ScatterRows out;
  const uint32_t thread = threadIdx.x % 128;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int32_t r = static_cast<int32_t>(thread / 8) + 16 * i;
    out.slot[i] = -1;
    if (r < rows) {
      const int32_t g = __ldcg(p.ws.row_token + plan_row0 + r);
      const int32_t j = __ldcg(p.ws.row_slot + plan_row0 + r);
      // Written by this launch's dispatch, so always in range; checked anyway because a stale
      // table (after an abort) must never send a store outside y.
      if (g >= 0 && g < p.P * p.T && j >= 0 && j < p.k) out.slot[i] = g * p.k + j;
    }
  }
  out.run = rows > 0 && slabs > 0 ? slot_run_of(p, plan_row0, rows, slabs, static_cast<int32_t>(thread))
                                  : SlotRun{nullptr, 0};
  return out;
}

// GEMM2's epilogue with the combine fused in: row i of the warpgroup's 64 rows is plan row
// plan_row0 + i = (source rank s, token t, slot j) and goes straight to y_slots(s)[t·k + j], so
// there is no y_sorted buffer and no separate combine pass. Each 64-column slab is written with
// stmatrix as for a TMA store and copied out by the warpgroup: 8 lanes per row, so every row's
// piece is one whole aligned 128-byte line (H is a multiple of 64). The warpgroup's columns are
// [col0, col_end) with col_end ≤ H.
struct ScatterRowsEpilogue {
  // Returns the slots-ready signal this thread owes once the stores have landed.
  DETMOE_DEVICE static SlotRun apply(const float (&acc)[Cfg::kAccumulators], const gemm::EpilogueTile& t,
                                     int32_t col_end, const LayerParams& p, const LaunchContext& ctx,
                                     const ScatterRows& where, gemm::SlabStore& out) {
    const int32_t rows = min(Cfg::kWarpgroupRows, t.row_end - t.row);
    const int32_t slabs = min(4, (col_end - t.col0) / 64);
    if (rows <= 0 || slabs <= 0) return {nullptr, 0};
    const uint32_t thread = t.warp * 32 + t.lane;
    const uint32_t piece = thread % 8;  // 16-byte piece of a 128-byte row
    // After an abort the accumulators are garbage and the row tables may be stale: the slabs
    // are still written and their barriers taken (uniformly), but nothing leaves the CTA.
    const bool aborted = launch_aborted(ctx);
    const int32_t rank_slots = p.T * p.k;
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      const int32_t col = t.col0 + 64 * s;
      if (s >= slabs) break;  // uniform: columns past H or another warpgroup's
      out.copy_out(
          [&](uint32_t slab) { gemm::write_bf16_slab(slab, t.warp, t.lane, [&](int j) { return acc[32 * s + j]; }); },
          [&](uint32_t slab) {
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              if (where.slot[i] < 0 || aborted) continue;
              const uint32_t r = thread / 8 + 16 * i;
              const uint4 v = ptx::ld_shared_v4(slab + r * 128 + ((piece ^ (r & 7u)) << 4));
              uint16_t* row = y_slots(p, where.slot[i] / rank_slots) +
                              static_cast<int64_t>(where.slot[i] % rank_slots) * p.H;
              *reinterpret_cast<uint4*>(row + col + piece * 8) = v;
            }
          });
    }
    return aborted ? SlotRun{nullptr, 0} : where.run;
  }
};

// The mainloop with a narrower form: one m64nN wgmma (N = 128, 64 or 16) per k16 step into
// registers 0 … N/2 − 1, on A rows of warpgroup `a_wg` and B rows from `b_offset` bytes into the
// stage. One branch-free issue function per form: a runtime choice between forms inside the
// k-loop makes ptxas serialise the wgmmas (C7520).
template <int kN>
DETMOE_DEVICE void consume_narrow(int32_t k_blocks, int a_wg, uint32_t b_offset, const Smem& smem, const Pipe& pipe,
                                  Stage& st, float (&acc)[Cfg::kAccumulators]) {
  static_assert(kN == 16 || kN == 64 || kN == 128, "the narrower forms");
  constexpr int kT = Operands::kTransA, kU = Operands::kTransB;
  static_assert(kT == 0 && kU == 0, "row offsets into the stages assume K-major A and B");
  gemm::consume_stages<Cfg>(
      k_blocks, pipe, st, [&] { ptx::fence_accumulators_first<kN / 2>(acc); },
      [&](int32_t stage, bool first) {
        const uint64_t a = Operands::a_desc(smem.a_stage(stage), a_wg);
        const uint64_t b = ptx::desc_advance(Operands::b_desc(smem.b_stage(stage)), b_offset);
#pragma unroll
        for (int kk = 0; kk < Cfg::kBlockK / 16; ++kk) {
          const uint64_t ak = ptx::desc_advance(a, kk * Operands::kKStepA);
          const uint64_t bk = ptx::desc_advance(b, kk * Operands::kKStepB);
          const uint32_t scale = (!first || kk > 0) ? 1u : 0u;
          if constexpr (kN == 128) {
            ptx::wgmma_m64n128k16_bf16<kT, kU>(acc, ak, bk, scale);
          } else if constexpr (kN == 64) {
            ptx::wgmma_m64n64k16_bf16<kT, kU>(acc, ak, bk, scale);
          } else {
            ptx::wgmma_m64n16k16_bf16<kT, kU>(acc, ak, bk, scale);
          }
        }
      });
}

// The mainloop of one tile in its shape. Every form keeps the m64n256 form's k16 sequence, and a
// narrower instruction computes the same output elements as the matching columns of the wider
// one, so a row's bits do not depend on the shape its tile got (D3 checks it: a token subset
// moves rows between full and partial tiles; the property test moves them between shapes too).
DETMOE_DEVICE void consume_shaped(int wg, TileShape shape, const LayerTile& t, const Smem& smem, const Pipe& pipe,
                                  Stage& st, float (&acc)[Cfg::kAccumulators]) {
  constexpr uint32_t kRowBytes = Cfg::kBlockK * 2;  // one K-major B row of a stage
  switch (shape) {
    case TileShape::kFull:
      gemm::consume_k_blocks<Operands, Cfg>(wg, t.k_blocks, smem, pipe, st, acc);
      return;
    case TileShape::kSplitColumns:
      // A rows 0–63 for both; warpgroup w takes stage rows 128w…+127.
      consume_narrow<128>(t.k_blocks, 0, wg * 128 * kRowBytes, smem, pipe, st, acc);
      return;
    case TileShape::kNarrow:
      if (t.b_end - t.b_row <= 64) {
        consume_narrow<64>(t.k_blocks, wg, 0, smem, pipe, st, acc);
      } else {
        consume_narrow<128>(t.k_blocks, wg, 0, smem, pipe, st, acc);
      }
      return;
    case TileShape::kHalfRows:
      if (wg == 0) {
        gemm::consume_k_blocks<Operands, Cfg>(wg, t.k_blocks, smem, pipe, st, acc);
      } else {
        consume_narrow<16>(t.k_blocks, wg, 0, smem, pipe, st, acc);
      }
      return;
    case TileShape::kNarrowGateUp:
      consume_narrow<128>(t.k_blocks, wg, 64 * kRowBytes, smem, pipe, st, acc);
      return;
    case TileShape::kHalfRowsNarrowGateUp:
      if (wg == 0) {
        consume_narrow<128>(t.k_blocks, wg, 64 * kRowBytes, smem, pipe, st, acc);
      } else {
        consume_narrow<16>(t.k_blocks, wg, 0, smem, pipe, st, acc);
      }
      return;
  }
}

// Consumer warpgroup: mainloop in the tile's shape, `before_epilogue()`, then the epilogue of the
// warpgroup's window — its 64 rows × the tile's columns, or with a split shape rows 0–63 × its
// part of the columns. Either way the window's columns sit in the registers where a full tile
// keeps its first columns, so the epilogues are the full tile's, told where the window ends. plan_row0: the plan row of the
// tile's first row (kScatterRows). Returns the slots-ready signal this thread owes
// (kScatterRows), else none.
template <class BeforeEpilogue>
DETMOE_DEVICE SlotRun consume_tile(int wg, const LayerTile& t, TileEpilogue epilogue, int32_t out_cols,
                                   const CUtensorMap* map_c, const CUtensorMap* map_h, bool store_h,
                                   const LayerParams& p, const LaunchContext& ctx, int32_t plan_row0,
                                   const Smem& smem, const Pipe& pipe, Stage& st, gemm::SlabStore& out,
                                   float (&acc)[Cfg::kAccumulators], BeforeEpilogue&& before_epilogue) {
  const TileShape shape = tile_shape(t);
  const TileWindow window = tile_window(shape, wg, t.col0, out_cols);
  const uint32_t thread = threadIdx.x % 128;
  gemm::EpilogueTile et;
  et.row = t.c_row + window.row_offset;
  et.row_end = t.c_end;
  et.col0 = window.col0;
  et.warp = thread / 32;
  et.lane = thread % 32;
  const int32_t col_end = window.col_end;
  // Every warpgroup passes every stage through wgmma, even one with no rows of its own: letting
  // such a warpgroup pass the stages on without wgmma hung the H200 (producer waiting on an
  // empty barrier, consumers on a full one; bisected 2026-12-02, cause not found).
  consume_shaped(wg, shape, t, smem, pipe, st, acc);
  // GEMM2's output rows, looked up after the mainloop: the producer acquired the tile's inputs,
  // and with them the dispatch's row tables, before loading it. (Looking them up under the
  // mainloop saved ≈ 1.3 µs per tile on the H200 but made ptxas spill once the narrower forms
  // were in; at the 700 W cap the epilogue's idle time is not what limits.)
  ScatterRows where{};
  if (epilogue == TileEpilogue::kScatterRows)
    where = scatter_rows_of(p, plan_row0 + (et.row - t.c_row), min(Cfg::kWarpgroupRows, t.c_end - et.row),
                            min(4, (col_end - et.col0) / 64));
  TaskTracer::mainloop_done(p, static_cast<uint32_t>(shape));
  before_epilogue();
  TaskTracer::epilogue_start(p);
  switch (epilogue) {
    case TileEpilogue::kSwiGLU:
      if (up_register(shape) == 32) {
        SplitSwiGLUEpilogue::apply<32>(acc, et, out_cols, map_c, map_h, store_h, out);
      } else {
        SplitSwiGLUEpilogue::apply<64>(acc, et, out_cols, map_c, map_h, store_h, out);
      }
      break;
    case TileEpilogue::kScatterRows:
      return ScatterRowsEpilogue::apply(acc, et, col_end, p, ctx, where, out);
    case TileEpilogue::kStore: {
      gemm::KernelParams kp{};
      kp.epilogue = static_cast<int32_t>(gemm::Epilogue::kStoreBF16);
      kp.out_cols = col_end;  // slabs at or past it are skipped, not clipped: col_end is 64-aligned
      gemm::StoreEpilogue::apply<Cfg>(acc, t.k_blocks == 0, et, kp, map_c, nullptr, out);
      break;
    }
  }
  return {nullptr, 0};
}

}  // namespace detmoe::mk
