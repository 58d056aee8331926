// The backward's GEMM tiles: their loads (producer), the two mainloop forms and the dSwiGLU
// epilogue. The loads are the GEMM core's data-grad and weight-grad operand forms
// (gemm/operand_layout.cuh) with the rows of each operand given separately, since the
// weight-grad operands of the shared expert live in different tensors (dout or x: the rank's own
// rows 0..T; a_s or dhs: the symmetric buffers' rows r·T..). The mainloops are the GEMM core's
// consume_k_blocks as they are: every tile is a full 128 × 256 tile in one wgmma form, so a row's
// bits never depend on which rows share its tile (D3).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "detmoe/contract_math.h"
#include "detmoe/numeric.h"
#include "megakernel/gemm/epilogue.cuh"
#include "megakernel/gemm/kernel.cuh"
#include "megakernel/gemm/operand_layout.cuh"
#include "megakernel/gemm/swiglu_batch.cuh"
#include "megakernel/layer/tile_mainloop.cuh"
#include "megakernel/ptx/tma.cuh"

namespace detmoe::mk {

using DataGradOperands = gemm::OperandLayout<gemm::Layout::kDataGrad, Cfg>;
using WeightGradOperands = gemm::OperandLayout<gemm::Layout::kWeightGrad, Cfg>;

// One backward tile's operands: 128 output rows × 256 output columns, K in 64-wide blocks.
//   data-grad    A rows [a_row, a_end) K-major (one 128-row box; rows past a_end load zeros);
//                B the weight's K rows [b_row + k0, b_end), columns [b_col, b_cols) in 64-wide boxes
//   weight-grad  K = token rows: A rows [a_row + k0, a_end), its M columns [a_col, a_cols);
//                B rows [b_row + k0, b_end), its N columns [b_col, b_cols) (both clip at the
//                same K, so rows past the end are zeros in both)
struct BwdTile {
  const CUtensorMap* map_a;
  const CUtensorMap* map_b;
  int32_t weight_grad;
  int32_t a_row, a_end;
  int32_t a_col, a_cols;
  int32_t b_row, b_end;
  int32_t b_col, b_cols;
  int32_t k_blocks;
};

// 64-wide boxes of [first, limit), at most max_boxes: a box wholly past the last column is not
// loaded (as in the GEMM core: its stale bytes only feed outputs that are never stored).
DETMOE_DEVICE int32_t boxes_before(int32_t first, int32_t limit, int32_t max_boxes) {
  return min(max_boxes, max((limit - first + 63) / 64, 0));
}

// Producer (one thread): the tile's k-blocks into the stage ring; `fake` as produce_tile's.
DETMOE_DEVICE void produce_bwd_tile(const BwdTile& t, const Smem& smem, const Pipe& pipe, Stage& st, bool fake) {
  constexpr uint32_t kBox = Smem::kBoxBytes;
  const int32_t b_boxes = boxes_before(t.b_col, t.b_cols, Cfg::kBlockN / 64);
  const int32_t a_boxes = t.weight_grad ? boxes_before(t.a_col, t.a_cols, Cfg::kBlockM / 64) : 0;
  const uint32_t bytes = (t.weight_grad ? a_boxes * kBox : Smem::kATileBytes) + b_boxes * kBox;
  for (int32_t kb = 0; kb < t.k_blocks; ++kb) {
    if (fake) {
      ptx::mbarrier_wait_parity(pipe.empty + st.stage, st.phase ^ 1u);
      ptx::mbarrier_arrive(pipe.full + st.stage);
      st.advance();
      continue;
    }
    pipe.producer_acquire(st, bytes);
    uint64_t* bar = pipe.full + st.stage;
    uint8_t* a = smem.a_stage(st.stage);
    uint8_t* b = smem.b_stage(st.stage);
    const int32_t k0 = kb * Cfg::kBlockK;
    if (t.weight_grad) {
      const gemm::RaggedCoords ra = gemm::ragged_coords(t.a_row + k0, t.a_end, 64);
#pragma unroll
      for (int j = 0; j < Cfg::kBlockM / 64; ++j)
        if (j < a_boxes) ptx::tma_load_3d(a + j * kBox, t.map_a, bar, t.a_col + 64 * j, ra.y, ra.z);
    } else {
      const gemm::RaggedCoords ra = gemm::ragged_coords(t.a_row, t.a_end, Cfg::kBlockM);
      ptx::tma_load_3d(a, t.map_a, bar, k0, ra.y, ra.z);
    }
    const gemm::RaggedCoords rb = gemm::ragged_coords(t.b_row + k0, t.b_end, 64);
#pragma unroll
    for (int j = 0; j < Cfg::kBlockN / 64; ++j)
      if (j < b_boxes) ptx::tma_load_3d(b + j * kBox, t.map_b, bar, t.b_col + 64 * j, rb.y, rb.z);
    st.advance();
  }
}

// Consumer warpgroup: the tile's mainloop in its operand form.
DETMOE_DEVICE void consume_bwd_tile(int wg, const BwdTile& t, const Smem& smem, const Pipe& pipe, Stage& st,
                                    float (&acc)[Cfg::kAccumulators]) {
  if (t.weight_grad) {
    gemm::consume_k_blocks<WeightGradOperands, Cfg>(wg, t.k_blocks, smem, pipe, st, acc);
  } else {
    gemm::consume_k_blocks<DataGradOperands, Cfg>(wg, t.k_blocks, smem, pipe, st, acc);
  }
}

// Before da's mainloop: each consumer thread asks L2 for its share of the tile's saved g and u
// (its warpgroup's 64 rows × 256 columns of each: 512 lines of 128 bytes, 4 per thread), so the
// epilogue's loads hit L2 instead of waiting on HBM (h was written by the forward, long evicted).
DETMOE_DEVICE void prefetch_h_tile(const uint16_t* h, int32_t row0, int32_t row_end, int32_t col0, int32_t cols) {
  const uint32_t thread = threadIdx.x % 128;
  const int32_t row = row0 + static_cast<int32_t>(thread / 2);
  if (row >= row_end) return;
  const uint16_t* base = h + static_cast<int64_t>(row) * 2 * cols + ((thread & 1u) ? cols : 0);
#pragma unroll
  for (int l = 0; l < 4; ++l) {
    const int32_t c = col0 + 64 * l;
    if (c < cols) asm volatile("prefetch.global.L2 [%0];" ::"l"(base + c));
  }
}

// da's epilogue: with g, u the forward's saved bf16 h = [g | u] of the same rows and columns,
// dh = [dg | du] = contract_dswiglu(g, u, da) rounded to bf16, da the fp32 accumulator (the
// reference's formula on its fp32 da, so the elementwise step matches it bit for bit; in batches
// of 8 with the branch-free reciprocal, gemm::dswiglu_batch). `cols`: F (or Fs); h rows have
// 2·cols elements, row r of the tile's rows at h + r·2·cols. Accumulator register i of a thread
// holds row warp·16 + lane/4 + 8·((i/2) % 2) and column 8·(i/4) + 2·(lane % 4) + i % 2 of its
// warpgroup's window (the wgmma fragment), so each pair (i, i + 1) is one 4-byte load of g and
// one of u; a batch's 8 loads are issued before its math. du overwrites the accumulators.
struct DSwiGLUEpilogue {
  DETMOE_DEVICE static void apply(float (&acc)[Cfg::kAccumulators], const gemm::EpilogueTile& t, int32_t cols,
                                  const uint16_t* h, const CUtensorMap* map_dh, gemm::SlabStore& out) {
    const int32_t r_lo = t.row + static_cast<int32_t>(t.warp * 16 + (t.lane >> 2));
    const uint16_t* h_lo = r_lo < t.row_end ? h + static_cast<int64_t>(r_lo) * 2 * cols : nullptr;
    const uint16_t* h_hi = r_lo + 8 < t.row_end ? h + static_cast<int64_t>(r_lo + 8) * 2 * cols : nullptr;
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      const int32_t col = t.col0 + 64 * s;
      if (col >= cols || t.row >= t.row_end) break;  // uniform over the warpgroup
      // dg goes straight into its slab, 8 elements per batch (one stmatrix.x4); du into the
      // accumulators, stored from there next. Batch b + 1's loads are issued before batch b's math
      // (two buffers), so a slab costs ≈ 2 load round trips rather than 4.
      uint32_t g2[2][4], u2[2][4];
      auto load = [&](int b) {  // batch b: fragment registers 32s + 8b … + 7, pairs q = 4b … 4b + 3
#pragma unroll
        for (int qq = 0; qq < 4; ++qq) {
          const int q = 4 * b + qq;
          const uint16_t* hr = (q & 1) ? h_hi : h_lo;
          const int32_t c = col + 8 * (q >> 1) + 2 * static_cast<int32_t>(t.lane & 3u);
          g2[b & 1][qq] = hr != nullptr ? __ldcg(reinterpret_cast<const unsigned int*>(hr + c)) : 0u;
          u2[b & 1][qq] = hr != nullptr ? __ldcg(reinterpret_cast<const unsigned int*>(hr + cols + c)) : 0u;
        }
      };
      load(0);
      out.store(map_dh, col, cols, t.row, t.row_end, [&](uint32_t slab) {
        gemm::write_bf16_slab_batched(slab, t.warp, t.lane, [&](int b, float(&dg)[8]) {
          if (b + 1 < 4) load(b + 1);
          auto half = [](uint32_t v, int e) {
            return float_from_bf16_bits(static_cast<uint16_t>(e == 0 ? v & 0xffffu : v >> 16));
          };
          const int i0 = 32 * s + 8 * b;
          gemm::dswiglu_batch<8>([&](int j) { return half(g2[b & 1][j / 2], j % 2); },
                                 [&](int j) { return half(u2[b & 1][j / 2], j % 2); }, [&](int j) { return acc[i0 + j]; },
                                 [&](int j, float dgj, float duj) {
                                   dg[j] = dgj;
                                   acc[i0 + j] = duj;
                                 });
        });
      });
      out.store(map_dh, cols + col, 2 * cols, t.row, t.row_end, [&](uint32_t slab) {
        gemm::write_bf16_slab(slab, t.warp, t.lane, [&](int j) { return acc[32 * s + j]; });
      });
    }
  }
};

}  // namespace detmoe::mk
