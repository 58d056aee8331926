// Persistent tile scheduler over all groups of a grouped GEMM.
//
// Tiles are numbered group by group; inside a group in bands of kBandRows m-blocks (m fastest)
// for L2 reuse. Which tiles a CTA runs is the deal's (TileDeal in kernel.cuh: c, c + grid, … or
// tickets); the ids a CTA runs only grow, so each CTA walks the group offsets forward once:
// amortised O(groups) loads, no table, no host sync, and a group with no tiles (zero rows in
// kForward / kDataGrad) costs one step of that walk. Producer and consumers each run their own
// copy of this walk and see the same tile sequence. The tile → CTA assignment changes speed
// only: a tile's bits depend on its coordinates alone.
//
// kCtas = 2 (CTA pairs, kForward and kDataGrad): ids number pair tiles (two m-blocks by one
// n-block, the pair's shared B panel), dealt to clusters as tiles are to CTAs; CTA rank r of the
// cluster takes m-block 2·j + r of pair j. In a group of odd m-block count the last pair's second
// m-block does not exist: that CTA's tile is inactive (it still loads its half of B for its peer
// and passes every stage, but computes and stores nothing).
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
  bool active = true;    // false: a pair's missing second m-block (kCtas = 2 only)
};

DETMOE_DEVICE int32_t ceil_div(int32_t a, int32_t b) { return (a + b - 1) / b; }

template <Layout kLayout, class Cfg, int kCtas = 1>
class TileScheduler {
  static_assert(kCtas == 1 || (kCtas == 2 && kLayout != Layout::kWeightGrad), "CTA pairs share a weight panel");
  static constexpr int kBandUnits = Cfg::kBandRows / kCtas > 1 ? Cfg::kBandRows / kCtas : 1;

 public:
  // rank: this CTA's rank in its pair (0 when kCtas = 1).
  DETMOE_DEVICE explicit TileScheduler(const KernelParams& p, int32_t rank = 0)
      : offsets_(p.group_offsets),
        groups_(p.groups),
        rows_(p.rows),
        m_(p.m),
        k_(p.k),
        n_blocks_(ceil_div(p.n, Cfg::kBlockN)),
        rank_(rank) {}

  // Tile `id` (not below any id asked before), false when the problem has fewer tiles.
  DETMOE_DEVICE bool at(int64_t id, Tile& t) {
    while (id >= group_end_) {
      if (++group_ >= groups_) return false;
      load_group_rows();
      const int32_t m_extent = kLayout == Layout::kWeightGrad ? m_ : rows_end_ - rows_begin_;
      m_blocks_ = ceil_div(m_extent, Cfg::kBlockM);
      m_units_ = ceil_div(m_blocks_, kCtas);
      group_begin_ = group_end_;
      group_end_ += static_cast<int64_t>(m_units_) * n_blocks_;
    }
    const BandCoords bc = band_coords(id - group_begin_, m_units_, n_blocks_, kBandUnits);
    const int32_t m_block = bc.m_block * kCtas + rank_;
    t.group = group_;
    t.rows_begin = rows_begin_;
    t.rows_end = rows_end_;
    t.m0 = m_block * Cfg::kBlockM;
    t.active = m_block < m_blocks_;
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
  int32_t rank_;
  int32_t group_ = -1;
  int64_t group_begin_ = 0;
  int64_t group_end_ = 0;
  int32_t m_blocks_ = 0;
  int32_t m_units_ = 0;  // m-blocks, or pairs of them (kCtas = 2)
  int32_t rows_begin_ = 0;
  int32_t rows_end_ = 0;
};

}  // namespace detmoe::gemm
