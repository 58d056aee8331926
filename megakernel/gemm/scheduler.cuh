// Persistent tile scheduler over all groups of a grouped GEMM.
//
// Tiles are numbered group by group; inside a group in bands of p.band_mblocks m-blocks (m
// fastest) for L2 reuse. Which tiles a CTA runs is the deal's (TileDeal in kernel.cuh: c, c + grid, … or
// tickets); the ids a CTA runs only grow, so each CTA walks the group offsets forward once:
// amortised O(groups) loads, no table, no host sync, and a group with no tiles (zero rows in
// kForward / kDataGrad) costs one step of that walk. Producer and consumers each run their own
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

// Group g's token rows [begin, end) from the offsets, clamped to [0, rows] and to a non-negative
// count, so bad offsets can never make the kernel touch memory outside the buffers (gemm.h). The
// one rule for every reader (the scheduler, the ticket deal's evenness test in kernel.cuh).
struct GroupRows {
  int32_t begin;
  int32_t end;
};
DETMOE_DEVICE GroupRows clamped_group_rows(const int32_t* offsets, int32_t rows, int32_t g) {
  const int32_t begin = min(max(__ldg(offsets + g), 0), rows);
  return {begin, min(max(__ldg(offsets + g + 1), begin), rows)};
}

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
        band_(p.band_mblocks) {}

  // Tile `id` (not below any id asked before), false when the problem has fewer tiles.
  DETMOE_DEVICE bool at(int64_t id, Tile& t) {
    while (id >= group_end_) {
      if (++group_ >= groups_) return false;
      load_group_rows();
      const int32_t m_extent = kLayout == Layout::kWeightGrad ? m_ : rows_end_ - rows_begin_;
      m_blocks_ = ceil_div(m_extent, Cfg::kBlockM);
      group_begin_ = group_end_;
      group_end_ += static_cast<int64_t>(m_blocks_) * n_blocks_;
    }
    const BandCoords bc = band_coords(id - group_begin_, m_blocks_, n_blocks_, band_);
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
    const GroupRows r = clamped_group_rows(offsets_, rows_, group_);
    rows_begin_ = r.begin;
    rows_end_ = r.end;
  }

  // Copies, not a reference: taking the address of a kernel parameter forces a local copy.
  const int32_t* offsets_;
  int32_t groups_;
  int32_t rows_;
  int32_t m_;
  int32_t k_;
  int32_t n_blocks_;
  int32_t band_;
  int32_t group_ = -1;
  int64_t group_begin_ = 0;
  int64_t group_end_ = 0;
  int32_t m_blocks_ = 0;
  int32_t rows_begin_ = 0;
  int32_t rows_end_ = 0;
};

}  // namespace detmoe::gemm
