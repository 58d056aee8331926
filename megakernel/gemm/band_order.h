// Band order of a grid of m_blocks × n_blocks output tiles: which tile is number `local`.
// Plain arithmetic, host and device, so the CPU tests check the same functions the kernels use.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define DETMOE_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define DETMOE_HOST_DEVICE inline
#endif

namespace detmoe::gemm {

struct BandCoords {
  int32_t m_block;
  int32_t n_block;
};

// Tile `local` of an m_blocks × n_blocks grid numbered in bands of band_rows m-blocks, m fastest
// inside a band: the tiles running at once share a few B panels and A rows in L2 (the fused
// layer found m-major order re-reading each expert's weights once per m-block from HBM).
DETMOE_HOST_DEVICE BandCoords band_coords(int64_t local, int32_t m_blocks, int32_t n_blocks, int32_t band_rows) {
  const int64_t band_tiles = static_cast<int64_t>(band_rows) * n_blocks;
  const int32_t band = static_cast<int32_t>(local / band_tiles);
  const int32_t in_band = static_cast<int32_t>(local - band * band_tiles);
  const int32_t band_first = band * band_rows;
  const int32_t rows = m_blocks - band_first < band_rows ? m_blocks - band_first : band_rows;
  return {band_first + in_band % rows, in_band / rows};
}

// band_coords with bands of near-equal height: the m_blocks are cut into ⌈m_blocks / band_rows⌉
// bands whose heights differ by at most one (17 m-blocks at band_rows 8: 6, 6, 5, not 8, 8, 1),
// so no band is a thin remainder whose column tiles each read a weight panel for one m-block.
DETMOE_HOST_DEVICE BandCoords balanced_band_coords(int32_t local, int32_t m_blocks, int32_t n_blocks,
                                                   int32_t band_rows) {
  const int32_t bands = (m_blocks + band_rows - 1) / band_rows;
  const int32_t low = m_blocks / bands;         // height of the lower bands
  const int32_t tall = m_blocks - low * bands;  // the first `tall` bands are one m-block higher
  const int32_t tall_tiles = tall * (low + 1) * n_blocks;
  int32_t band_first, rows, in_band;
  if (local < tall_tiles) {
    const int32_t band = local / ((low + 1) * n_blocks);
    band_first = band * (low + 1);
    rows = low + 1;
    in_band = local - band * (low + 1) * n_blocks;
  } else {
    const int32_t rest = local - tall_tiles;
    const int32_t band = rest / (low * n_blocks);
    band_first = tall * (low + 1) + band * low;
    rows = low;
    in_band = rest - band * low * n_blocks;
  }
  return {band_first + in_band % rows, in_band / rows};
}

// The front-back deal of `tiles` tiles numbered 0 … tiles − 1 over a persistent grid: CTA c's
// i-th slot takes the next tile from the front of the sequence when i + c is even and from the
// back otherwise, so every CTA alternates the two ends and at any time about half the grid runs
// each. With groups in order of size (a Zipf-routed layer's weight gradients: its hot experts'
// long-K tiles come first, the cold experts' tiles — little math, the same 128 KB of fp32 stores —
// last), each CTA pairs a compute-heavy tile with a store-heavy one instead of the grid running all
// of one kind, then all of the other. The front takes tiles [0, ⌈tiles/2⌉) in slot order, the back
// the rest from the end, so every tile is dealt exactly once
// (LayerSchedule.FrontBackDealIsABijection). Speed only: a tile's bits depend on its coordinates.
struct FrontBackSlot {
  int64_t tile;    // the tile of the slot, −1 when the slot's end has no tile left
  bool exhausted;  // no later slot of this CTA has a tile either
};

// Slot i of CTA c: which end (`front`) and the slot's index among that end's slots.
DETMOE_HOST_DEVICE int64_t front_back_index(int64_t i, int32_t c, int32_t grid, bool& front) {
  // Front slots of wave j are the CTAs with c ≡ j (mod 2): (grid + 1)/2 of them for j even,
  // grid/2 for j odd; within a wave both ends number their CTAs by c/2.
  const int64_t fronts_before = (i / 2) * grid + ((i & 1) != 0 ? (grid + 1) / 2 : 0);
  front = ((i + c) & 1) == 0;
  return (front ? fronts_before : i * grid - fronts_before) + c / 2;
}

DETMOE_HOST_DEVICE FrontBackSlot front_back_slot(int64_t i, int32_t c, int32_t grid, int64_t tiles) {
  const int64_t n_front = (tiles + 1) / 2;
  bool front = false;
  const int64_t index = front_back_index(i, c, grid, front);
  const int64_t quota = front ? n_front : tiles - n_front;
  if (index < quota) return {front ? index : tiles - 1 - index, false};
  // Indices only grow with i, and slot i + 1 is the other end: both ends spent means done.
  bool next_front = false;
  const int64_t next = front_back_index(i + 1, c, grid, next_front);
  return {-1, next >= (next_front ? n_front : tiles - n_front)};
}

}  // namespace detmoe::gemm
