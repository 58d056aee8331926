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
#include <type_traits>

#include "detmoe/contract_math.h"
#include "detmoe/numeric.h"
#include "megakernel/gemm/epilogue.cuh"
#include "megakernel/gemm/kernel.cuh"
#include "megakernel/gemm/operand_layout.cuh"
#include "megakernel/gemm/swiglu_batch.cuh"
#include "megakernel/layer/tile_mainloop.cuh"
#include "megakernel/ptx/stmatrix.cuh"
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
  // da tiles (dSwiGLU epilogue): the forward's saved h = [g | u] of the output rows [h_row,
  // h_end) and columns [h_col, h_col + 256) ∩ [0, h_cols), streamed through the stage ring after
  // the k-blocks, one stage per 64 columns (h_stages of them: g in the A stage, u in the B stage,
  // each as two 64-row boxes). Null map: none.
  const CUtensorMap* map_h;
  int32_t h_row, h_end;
  int32_t h_col, h_cols;
};


// Stages of saved h a da tile streams after its k-blocks (0 without): one per 64 of its columns.
DETMOE_DEVICE int32_t h_stages(const BwdTile& t) {
  return t.map_h == nullptr ? 0 : min(4, (t.h_cols - t.h_col + 63) / 64);
}

// 64-wide boxes of [first, limit), at most max_boxes: a box wholly past the last column is not
// loaded (as in the GEMM core: its stale bytes only feed outputs that are never stored).
DETMOE_DEVICE int32_t boxes_before(int32_t first, int32_t limit, int32_t max_boxes) {
  return min(max_boxes, max((limit - first + 63) / 64, 0));
}

// Producer (one thread): the tile's k-blocks into the stage ring; `fake` as produce_tile's.
// `after_kblock(kb)` runs once each k-block's loads are issued (the dx tiles' row tables).
template <class AfterKBlock = NoHook>
DETMOE_DEVICE void produce_bwd_tile(const BwdTile& t, const Smem& smem, const Pipe& pipe, Stage& st, bool fake,
                                    AfterKBlock&& after_kblock = {}) {
  constexpr uint32_t kBox = Smem::kBoxBytes;
  const int32_t b_boxes = boxes_before(t.b_col, t.b_cols, Cfg::kBlockN / 64);
  const int32_t a_boxes = t.weight_grad ? boxes_before(t.a_col, t.a_cols, Cfg::kBlockM / 64) : 0;
  const uint32_t bytes = (t.weight_grad ? a_boxes * kBox : Smem::kATileBytes) + b_boxes * kBox;
  for (int32_t kb = 0; kb < t.k_blocks; ++kb) {
    if (fake) {
      ptx::mbarrier_wait_parity(pipe.empty + st.stage, st.phase ^ 1u);
      ptx::mbarrier_arrive(pipe.full + st.stage);
      st.advance();
      after_kblock(kb);
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
    after_kblock(kb);
  }
  // The saved h for the dSwiGLU epilogue, right behind the k-blocks: the loads land while the
  // consumers run the tile's last k-blocks, so the epilogue reads g and u from shared memory
  // (with them loaded from global memory by each thread, batch after batch, the epilogue took
  // 20–23 µs per tile on the H200 whatever the prefetching). A 64-row half wholly past the rows
  // is not loaded (the consumers of that half have no rows and do not read it).
  const int32_t halves = (t.h_row < t.h_end ? 1 : 0) + (t.h_row + 64 < t.h_end ? 1 : 0);
  for (int32_t s = 0; s < h_stages(t); ++s) {
    if (fake) {
      ptx::mbarrier_wait_parity(pipe.empty + st.stage, st.phase ^ 1u);
      ptx::mbarrier_arrive(pipe.full + st.stage);
      st.advance();
      continue;
    }
    pipe.producer_acquire(st, static_cast<uint32_t>(halves) * 2u * kBox);
    uint64_t* bar = pipe.full + st.stage;
    const int32_t col = t.h_col + 64 * s;
#pragma unroll
    for (int w = 0; w < 2; ++w) {
      if (w >= halves) break;
      const gemm::RaggedCoords rh = gemm::ragged_coords(t.h_row + 64 * w, t.h_end, 64);
      ptx::tma_load_3d(smem.a_stage(st.stage) + w * kBox, t.map_h, bar, col, rh.y, rh.z);
      ptx::tma_load_3d(smem.b_stage(st.stage) + w * kBox, t.map_h, bar, t.h_cols + col, rh.y, rh.z);
    }
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

// da's epilogue: with g, u the forward's saved bf16 h = [g | u] of the same rows and columns,
// dh = [dg | du] = contract_dswiglu(g, u, da) rounded to bf16, da the fp32 accumulator (the
// reference's formula on its fp32 da, so the elementwise step matches it bit for bit; in batches
// of 8 with the branch-free reciprocal, gemm::dswiglu_batch). `cols`: F (or Fs).
//
// g and u come from the h stages the producer streamed behind the tile's k-blocks
// (produce_bwd_tile): stage s holds the 64 columns of slice s, g in the A stage and u in the B
// stage, the warpgroup's 64 rows at 8 KB · wg, swizzled as a staging slab, so the ldmatrix at the
// address write_bf16_slab's stmatrix would use returns batch b's 8 values in the accumulator
// layout. dg and du are written back over g and u (stmatrix at the same addresses: each warp
// reads and writes only its own 16 rows) and stored from the stage by two TMA stores, so a slice
// costs one barrier and no wait for a staging slab (through the two rotating staging slabs the
// eight stores of a tile serialised on each other's shared-memory reads). A stage is released
// once its stores have read it, one slice later. Every warp waits for and releases every h stage
// (the ring's count), whether or not its warpgroup has rows.
//
// The slice loop is rolled and its four batches unrolled: fully unrolled, the epilogue was ≈ 6,000
// straight-line SASS instructions run once per tile, and 57 % of its warps' stall samples were
// instruction fetch (docs/PERF.md, session 32). A register array cannot be indexed by a run-time
// slice, so each slice reads acc[0, 32) and then slides the next slice's accumulators to the front;
// acc is consumed (the caller zeroes it for the next tile). Same operations on the same values:
// the bits do not change.
struct DSwiGLUEpilogue {
  static_assert(Cfg::kAccumulators == 4 * 32, "four 64-column slices of 32 accumulators per thread");
  DETMOE_DEVICE static void apply(float (&acc)[Cfg::kAccumulators], const gemm::EpilogueTile& t, int32_t cols,
                                  int wg, bool issuer, const Smem& smem, const Pipe& pipe, Stage& st,
                                  const CUtensorMap* map_dh) {
    const uint32_t barrier = 1 + static_cast<uint32_t>(wg);  // the warpgroup's slab barrier (idle here)
    const bool rows = t.row < t.row_end;                       // uniform over the warpgroup
    const uint32_t matrix = t.lane >> 3;
    const uint32_t box = static_cast<uint32_t>(wg) * Smem::kBoxBytes;
    const uint32_t row_offset = box + (t.warp * 16 + (matrix & 1u) * 8 + (t.lane & 7u)) * 128;
    // Release `stage` once at most `pending` of the issuer's store groups may still read.
    auto release = [&](int32_t stage, auto pending) {
      if (rows) {
        if (issuer) ptx::bulk_wait_group_read<decltype(pending)::value>();
        ptx::named_barrier_sync(barrier, 128);
      }
      __syncwarp();
      pipe.consumer_release(stage);
    };
    int32_t previous = -1;
#pragma unroll 1
    for (int s = 0; s < 4; ++s) {
      const int32_t col = t.col0 + 64 * s;
      if (col >= cols) break;  // uniform over the CTA: the producer streamed exactly these stages
      pipe.consumer_wait(st);
      uint8_t* g_stage = smem.a_stage(st.stage);
      uint8_t* u_stage = smem.b_stage(st.stage);
      if (rows) {
        const uint32_t g_rows = ptx::smem_u32(g_stage) + row_offset;
        const uint32_t u_rows = ptx::smem_u32(u_stage) + row_offset;
#pragma unroll
        for (int b = 0; b < 4; ++b) {
          const uint32_t chunk = ((2u * b + (matrix >> 1)) ^ (t.lane & 7u)) << 4;
          uint32_t g4[4], u4[4];
          ptx::ldmatrix_x4(g_rows + chunk, g4);
          ptx::ldmatrix_x4(u_rows + chunk, u4);
          auto half = [](uint32_t v, int e) {
            return float_from_bf16_bits(static_cast<uint16_t>(e == 0 ? v & 0xffffu : v >> 16));
          };
          const int i0 = 8 * b;  // slice s's accumulators lie at the front (slid below)
          float dg[8], du[8];
          gemm::dswiglu_batch<8>([&](int j) { return half(g4[j / 2], j % 2); },
                                 [&](int j) { return half(u4[j / 2], j % 2); }, [&](int j) { return acc[i0 + j]; },
                                 [&](int j, float dgj, float duj) {
                                   dg[j] = dgj;
                                   du[j] = duj;
                                 });
          ptx::stmatrix_x4(g_rows + chunk, ptx::pack_bf16x2(dg[0], dg[1]), ptx::pack_bf16x2(dg[2], dg[3]),
                           ptx::pack_bf16x2(dg[4], dg[5]), ptx::pack_bf16x2(dg[6], dg[7]));
          ptx::stmatrix_x4(u_rows + chunk, ptx::pack_bf16x2(du[0], du[1]), ptx::pack_bf16x2(du[2], du[3]),
                           ptx::pack_bf16x2(du[4], du[5]), ptx::pack_bf16x2(du[6], du[7]));
        }
        ptx::fence_proxy_async_shared();  // generic writes → the TMA stores' async-proxy reads
        ptx::named_barrier_sync(barrier, 128);
        if (issuer) {
          const gemm::RaggedCoords rc = gemm::ragged_coords(t.row, t.row_end, 64);
          ptx::tma_store_3d(map_dh, ptx::smem_u32(g_stage) + box, col, rc.y, rc.z);
          ptx::tma_store_3d(map_dh, ptx::smem_u32(u_stage) + box, cols + col, rc.y, rc.z);
          ptx::bulk_commit_group();
        }
      }
      if (previous >= 0) release(previous, std::integral_constant<int, 1>{});
      previous = st.stage;
      st.advance();
#pragma unroll
      for (int i = 0; i + 32 < Cfg::kAccumulators; ++i) acc[i] = acc[i + 32];
    }
    if (previous >= 0) release(previous, std::integral_constant<int, 0>{});
  }
};

}  // namespace detmoe::mk
