// The fused kernel's GEMM tiles, loads and mainloop, on the GEMM core's pieces: its stage ring
// (gemm/pipeline.cuh), shared-memory map (gemm/smem_layout.cuh), K-major operand descriptors
// (gemm/operand_layout.cuh, kForward), consumer mainloop (gemm/kernel.cuh consume_k_blocks) and
// ragged TMA clipping. gemm_tiles.cuh puts a tile's mainloop and its epilogue
// (tile_epilogues.cuh) together.
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

#include "megakernel/gemm/epilogue.cuh"
#include "megakernel/gemm/kernel.cuh"
#include "megakernel/gemm/operand_layout.cuh"
#include "megakernel/gemm/pipeline.cuh"
#include "megakernel/gemm/smem_layout.cuh"
#include "megakernel/gemm/tile_config.cuh"
#include "megakernel/layer/tile_form.h"
#include "megakernel/ptx/tma.cuh"

namespace detmoe::mk {

// The GEMM core's 128 × 256 × 64 tile with 3 operand stages instead of 4 (≈ 1–2 % more
// mainloop cycles per tile on the H200, no wall time: docs/PERF.md session 16), which frees
// 48 KB for epilogue staging: each consumer warpgroup stages a whole tile's output for the
// copier warps (epilogue_copier.cuh), or four 8 KB slabs that the store epilogues rotate through
// (LayerSlabs below).
struct LayerGemmConfig : gemm::Tile128x256 {
  static constexpr int kStages = 3;
  static constexpr uint32_t kStagingBytesPerWarpgroup = 34 * 1024;
};
using Cfg = LayerGemmConfig;
using Operands = gemm::OperandLayout<gemm::Layout::kForward, Cfg>;
using Smem = gemm::SmemLayout<Cfg>;
using Pipe = gemm::Pipeline<Cfg>;
using Stage = gemm::PipelineState<Cfg::kStages>;
// The store epilogues rotate through all of a warpgroup's staging in 8 KB slabs (the GEMM core
// has two): an fp32 weight-gradient tile's eight slabs wait for four reads instead of six, and up
// to four stores drain behind the next tile's mainloop.
inline constexpr int kLayerSlabs = static_cast<int>(Cfg::kStagingBytesPerWarpgroup / Smem::kBoxBytes);
static_assert(kLayerSlabs == 4, "34 KB of staging per warpgroup: four 8 KB slabs");
using LayerSlabs = gemm::SlabRing<kLayerSlabs>;

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

static_assert(kFormWarpgroupRows == Cfg::kWarpgroupRows && kFormTileCols == Cfg::kBlockN,
              "tile_form.h describes this kernel's tile");

DETMOE_DEVICE TileShape tile_shape(const LayerTile& t) {
  return tile_shape_of({t.a_end - t.a_row, t.b_row, t.b_end, t.up_row >= 0});
}

// Producer (one thread): the k-blocks of one tile into the stage ring. `fake` fills each stage
// with an arrival and no data: after an abort the consumers still drain the same stage sequence
// and nobody hangs. `after_kblock(kb)` runs once each k-block's loads are issued.
struct NoHook {
  DETMOE_DEVICE void operator()(int32_t) const {}
};

template <class AfterKBlock = NoHook>
DETMOE_DEVICE void produce_tile(const LayerTile& t, const Smem& smem, const Pipe& pipe, Stage& st, bool fake,
                                AfterKBlock&& after_kblock = {}) {
  constexpr uint32_t kHalfB = 128 * Cfg::kBlockK * 2;  // 128 rows × 128 bytes
  const TileShape shape = tile_shape(t);
  for (int32_t kb = 0; kb < t.k_blocks; ++kb) {
    if (fake) {
      ptx::mbarrier_wait_parity(pipe.empty + st.stage, st.phase ^ 1u);
      ptx::mbarrier_arrive(pipe.full + st.stage);
      st.advance();
      after_kblock(kb);
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
    after_kblock(kb);
  }
}

// The mainloop with a narrower form: one m64nN wgmma (N = 128, 64 or 16) per k16 step into
// registers 0 … N/2 − 1, on A rows of warpgroup `a_wg` and B rows from `b_offset` bytes into the
// stage. One branch-free issue function per form: a runtime choice between forms inside the
// k-loop makes ptxas serialise the wgmmas (C7520).
template <int kN, class AfterStage>
DETMOE_DEVICE void consume_narrow(int32_t k_blocks, int a_wg, uint32_t b_offset, const Smem& smem, const Pipe& pipe,
                                  Stage& st, float (&acc)[Cfg::kAccumulators], AfterStage&& after_stage) {
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
      },
      after_stage);
}

// The mainloop of one tile in its shape. Every form keeps the m64n256 form's k16 sequence, and a
// narrower instruction computes the same output elements as the matching columns of the wider
// one, so a row's bits do not depend on the shape its tile got (D3 checks it: a token subset
// moves rows between full and partial tiles; the property test moves them between shapes too).
// `after_stage(kb)` runs after each k-block is issued (the consumer lead's signal, consumer_lead.cuh).
template <class AfterStage>
DETMOE_DEVICE void consume_shaped(int wg, TileShape shape, const LayerTile& t, const Smem& smem, const Pipe& pipe,
                                  Stage& st, float (&acc)[Cfg::kAccumulators], AfterStage&& after_stage) {
  constexpr uint32_t kRowBytes = Cfg::kBlockK * 2;  // one K-major B row of a stage
  switch (shape) {
    case TileShape::kFull:
      gemm::consume_k_blocks<Operands, Cfg>(wg, t.k_blocks, smem, pipe, st, acc, after_stage);
      return;
    case TileShape::kSplitColumns:
      // A rows 0–63 for both; warpgroup w takes stage rows 128w…+127.
      consume_narrow<128>(t.k_blocks, 0, wg * 128 * kRowBytes, smem, pipe, st, acc, after_stage);
      return;
    case TileShape::kNarrow:
      if (t.b_end - t.b_row <= 64) {
        consume_narrow<64>(t.k_blocks, wg, 0, smem, pipe, st, acc, after_stage);
      } else {
        consume_narrow<128>(t.k_blocks, wg, 0, smem, pipe, st, acc, after_stage);
      }
      return;
    case TileShape::kHalfRows:
      if (wg == 0) {
        gemm::consume_k_blocks<Operands, Cfg>(wg, t.k_blocks, smem, pipe, st, acc, after_stage);
      } else {
        consume_narrow<16>(t.k_blocks, wg, 0, smem, pipe, st, acc, after_stage);
      }
      return;
    case TileShape::kNarrowGateUp:
      consume_narrow<128>(t.k_blocks, wg, 64 * kRowBytes, smem, pipe, st, acc, after_stage);
      return;
    case TileShape::kHalfRowsNarrowGateUp:
      if (wg == 0) {
        consume_narrow<128>(t.k_blocks, wg, 64 * kRowBytes, smem, pipe, st, acc, after_stage);
      } else {
        consume_narrow<16>(t.k_blocks, wg, 0, smem, pipe, st, acc, after_stage);
      }
      return;
  }
}

}  // namespace detmoe::mk
