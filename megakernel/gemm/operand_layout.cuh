// Operand tiles per layout: which TMA boxes the producer loads for one k-block, and the wgmma
// descriptors the consumers build over them.
//
// Shared-memory tiles (all 128-byte swizzled, 1024-byte aligned):
//   K-major   [rows × 64] bf16: row r at r·128 B; one box {64, rows}. Descriptor: SBO = 1024
//             (8 rows), LBO unused, a k16 step moves 32 B inside the swizzle span.
//   MN-major  [64 k × 64·j mn] as j boxes {64 mn, 64 k} of 8 KB: k-row at k·128 B inside a box.
//             Descriptor: LBO = 8 KB (next 64-wide mn chunk), SBO = 1024 (next 8 k-rows), a
//             k16 step moves 2048 B.
//
//   layout       A                        B
//   kForward     K-major [128 × 64]       K-major [256 × 64]         (x · Wᵀ)
//   kDataGrad    K-major [128 × 64]       MN-major 4 boxes of 64 n   (dY · W)
//   kWeightGrad  MN-major 2 boxes of 64 m MN-major 4 boxes of 64 n   (dYᵀ · X over tokens)
#pragma once

#include <cuda.h>

#include <cstdint>

#include "detmoe/gemm.h"
#include "megakernel/gemm/ragged_map.cuh"
#include "megakernel/gemm/scheduler.cuh"
#include "megakernel/gemm/smem_layout.cuh"
#include "megakernel/ptx/tma.cuh"
#include "megakernel/ptx/wgmma.cuh"

namespace detmoe::gemm {

template <Layout kLayout, class Cfg>
struct OperandLayout {
  static_assert(Cfg::kBlockK == 64 && Cfg::kWarpgroupRows == 64, "boxes assume 64-wide k-blocks and m64 wgmma");
  using Smem = SmemLayout<Cfg>;
  static constexpr int kTransA = kLayout == Layout::kWeightGrad ? 1 : 0;
  static constexpr int kTransB = kLayout == Layout::kForward ? 0 : 1;
  static constexpr uint32_t kBox = Smem::kBoxBytes;
  static constexpr uint32_t kKStepA = kTransA ? 16 * 128 : 32;  // bytes per k16 step
  static constexpr uint32_t kKStepB = kTransB ? 16 * 128 : 32;

  // Boxes of 64 columns that hold any column of the matrix: a box lying wholly past the last
  // column is not loaded (its stage bytes are left stale; they only feed output rows/columns
  // that are never stored). Such fully out-of-bounds boxes of the ragged 3-D maps faulted on
  // large buffers (illegal address on H200, 2026-12-02), partial boxes never did.
  DETMOE_DEVICE static int32_t boxes_in(int32_t first_col, int32_t cols, int32_t max_boxes) {
    return min(max_boxes, max((cols - first_col + 63) / 64, 0));
  }

  // Bytes the TMA loads of one k-block of tile `t` deliver (the stage's expect_tx).
  DETMOE_DEVICE static uint32_t stage_bytes(const Tile& t, int32_t n, int32_t m) {
    if constexpr (kLayout == Layout::kForward) {
      return Smem::kStageBytes;
    } else if constexpr (kLayout == Layout::kDataGrad) {
      return Smem::kATileBytes + boxes_in(t.n0, n, Cfg::kBlockN / 64) * kBox;
    } else {
      return (boxes_in(t.m0, m, Cfg::kBlockM / 64) + boxes_in(t.n0, n, Cfg::kBlockN / 64)) * kBox;
    }
  }

  // Issues the TMA loads of k-block `kb` of tile `t` into one stage; they complete on `bar`.
  // n / k / m: the GEMM's N, K and weight-grad M (kForward / kDataGrad weights are stacked per group).
  // pa / pb: the L2 policies of A's and B's loads (GroupedGemm::l2_hint).
  DETMOE_DEVICE static void load(const CUtensorMap* map_a, const CUtensorMap* map_b, const Tile& t, int32_t kb,
                                 int32_t n, int32_t k, int32_t m, uint8_t* a, uint8_t* b, uint64_t* bar,
                                 ptx::L2Policy pa, ptx::L2Policy pb) {
    const int32_t k0 = kb * Cfg::kBlockK;
    if constexpr (kLayout == Layout::kWeightGrad) {
      // Both operands are token-row boxes, clipped at the group's last row.
      const RaggedCoords rc = ragged_coords(t.rows_begin + k0, t.rows_end, 64);
      const int32_t a_boxes = boxes_in(t.m0, m, Cfg::kBlockM / 64);
      const int32_t b_boxes = boxes_in(t.n0, n, Cfg::kBlockN / 64);
#pragma unroll
      for (int j = 0; j < Cfg::kBlockM / 64; ++j)
        if (j < a_boxes) ptx::tma_load_3d(a + j * kBox, map_a, bar, t.m0 + 64 * j, rc.y, rc.z, pa);
#pragma unroll
      for (int j = 0; j < Cfg::kBlockN / 64; ++j)
        if (j < b_boxes) ptx::tma_load_3d(b + j * kBox, map_b, bar, t.n0 + 64 * j, rc.y, rc.z, pb);
    } else {
      const int32_t a_row = t.rows_begin + t.m0;
      const RaggedCoords ra = ragged_coords(a_row, t.rows_end, Cfg::kBlockM);
      ptx::tma_load_3d(a, map_a, bar, k0, ra.y, ra.z, pa);
      if constexpr (kLayout == Layout::kForward) {
        // Weight rows of this group: [g·N, (g+1)·N).
        const int32_t b_row = t.group * n + t.n0;
        const RaggedCoords rb = ragged_coords(b_row, (t.group + 1) * n, Cfg::kBlockN);
        ptx::tma_load_3d(b, map_b, bar, k0, rb.y, rb.z, pb);
      } else {
        // Weight rows of this group: [g·K, (g+1)·K).
        const RaggedCoords rb = ragged_coords(t.group * k + k0, (t.group + 1) * k, 64);
        const int32_t b_boxes = boxes_in(t.n0, n, Cfg::kBlockN / 64);
#pragma unroll
        for (int j = 0; j < Cfg::kBlockN / 64; ++j)
          if (j < b_boxes) ptx::tma_load_3d(b + j * kBox, map_b, bar, t.n0 + 64 * j, rb.y, rb.z, pb);
      }
    }
  }

  // Descriptor of consumer warpgroup `wg`'s 64 rows of A at k16 step 0 of a stage.
  DETMOE_DEVICE static uint64_t a_desc(const uint8_t* a_stage, int wg) {
    const uint32_t addr = ptx::smem_u32(a_stage) + wg * (kTransA ? kBox : 64 * 128);
    return kTransA ? ptx::make_smem_desc_sw128(addr, kBox, 1024) : ptx::make_smem_desc_sw128(addr, 16, 1024);
  }
  DETMOE_DEVICE static uint64_t b_desc(const uint8_t* b_stage) {
    const uint32_t addr = ptx::smem_u32(b_stage);
    return kTransB ? ptx::make_smem_desc_sw128(addr, kBox, 1024) : ptx::make_smem_desc_sw128(addr, 16, 1024);
  }
};

}  // namespace detmoe::gemm
