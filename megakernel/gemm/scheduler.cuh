// Persistent tile scheduler over all groups of a grouped GEMM.
//
// Tiles are numbered group by group; inside a group in bands of kBandRows m-blocks (m fastest)
// for L2 reuse — or, for kWeightGrad with a band budget (KernelParams::band_budget_kb), in the
// group's own order by its rows (band_order.h weight_grad_order). Which tiles a CTA runs is the
// deal's (TileDeal in kernel.cuh: c, c + grid, … or tickets); the ids a CTA runs only grow, so
// each CTA walks the group offsets forward once: amortised O(groups) loads, no table, no host
// sync, and a group with no tiles (zero rows in kForward / kDataGrad) costs one step of that walk. Producer and consumers each run their own
// copy of this walk and see the same tile sequence. The tile → CTA assignment changes speed
// only: a tile's bits depend on its coordinates alone.
#pragma once

#include <cstdint>

#include "detmoe/gemm.h"
#include "megakernel/gemm/band_order.h"
#include "megakernel/gemm/params.cuh"
#include "megakernel/ptx/common.cuh"

namespace detmoe::gemm {

struct Tile {
  int32_t group;
  int32_t rows_begin;    // the group's token rows [rows_begin, rows_end)
  int32_t rows_end;
  int32_t m0;            // first output row: kForward/kDataGrad relative to rows_begin; kWeightGrad in [0, M)
  int32_t n0;            // first output column (GEMM N)
  int32_t k_blocks;      // BLOCK_K steps of the reduction (0: the tile is exact zeros)
};

DETMOE_DEVICE int32_t ceil_div(int32_t a, int32_t b) { return (a + b - 1) / b; }

template <Layout kLayout, class Cfg>
class TileScheduler {
 public:
  DETMOE_DEVICE explicit TileScheduler(const KernelParams& p)
      : offsets_(p.group_offsets),
        groups_(p.groups),
        rows_(p.rows),
        m_(p.m),
        k_(p.k),
        n_blocks_(ceil_div(p.n, Cfg::kBlockN)),
        band_budget_kb_(kLayout == Layout::kWeightGrad ? p.band_budget_kb : 0) {}

  // Tile `id` (not below any id asked before), false when the problem has fewer tiles.
  DETMOE_DEVICE bool at(int64_t id, Tile& t) {
    while (id >= group_end_) {
      if (++group_ >= groups_) return false;
      load_group_rows();
      const int32_t m_extent = kLayout == Layout::kWeightGrad ? m_ : rows_end_ - rows_begin_;
      m_blocks_ = ceil_div(m_extent, Cfg::kBlockM);
      group_begin_ = group_end_;
      group_end_ += static_cast<int64_t>(m_blocks_) * n_blocks_;
      if (kLayout == Layout::kWeightGrad)
        order_ = weight_grad_order(m_blocks_, n_blocks_, rows_end_ - rows_begin_, band_budget_kb_, Cfg::kBlockM,
                                   Cfg::kBlockN, Cfg::kBandRows);
    }
    const BandCoords bc = kLayout == Layout::kWeightGrad
                              ? ordered_band_coords(id - group_begin_, m_blocks_, n_blocks_, order_, band_budget_kb_ > 0)
                              : band_coords(id - group_begin_, m_blocks_, n_blocks_, Cfg::kBandRows);
    t.group = group_;
    t.rows_begin = rows_begin_;
    t.rows_end = rows_end_;
    t.m0 = bc.m_block * Cfg::kBlockM;
    t.n0 = bc.n_block * Cfg::kBlockN;
    const int32_t k_extent = kLayout == Layout::kWeightGrad ? rows_end_ - rows_begin_ : k_;
    t.k_blocks = ceil_div(k_extent, Cfg::kBlockK);
    return true;
  }

 private:
  DETMOE_DEVICE void load_group_rows() {
    if (offsets_ == nullptr) {
      rows_begin_ = 0;
      rows_end_ = rows_;
      return;
    }
    const int32_t lo = __ldg(offsets_ + group_);
    const int32_t hi = __ldg(offsets_ + group_ + 1);
    rows_begin_ = min(max(lo, 0), rows_);
    rows_end_ = min(max(hi, rows_begin_), rows_);
  }

  // Copies, not a reference: taking the address of a kernel parameter forces a local copy.
  const int32_t* offsets_;
  int32_t groups_;
  int32_t rows_;
  int32_t m_;
  int32_t k_;
  int32_t n_blocks_;
  int32_t band_budget_kb_;
  GridOrder order_{Cfg::kBandRows, false};
  int32_t group_ = -1;
  int64_t group_begin_ = 0;
  int64_t group_end_ = 0;
  int32_t m_blocks_ = 0;
  int32_t rows_begin_ = 0;
  int32_t rows_end_ = 0;
};

}  // namespace detmoe::gemm
