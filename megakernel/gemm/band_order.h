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

// The order of one group's tiles in a weight-gradient launch (C[g] = Aᵀ·B over the group's rows).
// Its K is the group's rows (2,048 on deepseek-v3 and mixtral-8x7b: 32 k-blocks), so a tile is
// short and a group's grid spans many waves: L2 must keep whole operand panels from one tile to
// a later one, not slices that concurrent tiles read at one k. Bands of `band` m-blocks with m
// fastest (band_coords) read each A panel (128 columns of A over the rows) once and each B panel
// (256 columns of B) once per band; bands of n-blocks with n fastest the other way round. The
// GEMM core's fixed bands of 8 m-blocks read B ⌈m_blocks / 8⌉ times wherever B's panels do not
// survive from one band to the next — which the launches' measured DRAM bytes say they do not
// (docs/PERF.md session 40: perf/wgrad_order_dram.py).
struct GridOrder {
  int32_t band;    // blocks per band
  bool n_fastest;  // false: bands of m-blocks, m fastest; true: bands of n-blocks, n fastest
};

// Tile `local` of an m_blocks × n_blocks grid in order `o`: band_coords for m-fastest bands, its
// transpose for n-fastest ones. With `balanced`, bands of near-equal height (balanced_band_coords,
// whose tile numbers are 32-bit: a grid beyond that keeps plain bands).
DETMOE_HOST_DEVICE BandCoords ordered_band_coords(int64_t local, int32_t m_blocks, int32_t n_blocks, GridOrder o,
                                                  bool balanced) {
  const int32_t outer = o.n_fastest ? n_blocks : m_blocks, inner = o.n_fastest ? m_blocks : n_blocks;
  const bool fits = static_cast<int64_t>(m_blocks) * n_blocks <= INT32_MAX;
  const BandCoords c = balanced && fits ? balanced_band_coords(static_cast<int32_t>(local), outer, inner, o.band)
                                        : band_coords(local, outer, inner, o.band);
  return o.n_fastest ? BandCoords{c.n_block, c.m_block} : c;
}

// The order of a weight-gradient group of `rows` rows whose band keeps at most `budget_kb` KB of
// operand panels (a 128-column A panel holds block_m · rows bf16 values, a B panel block_n · rows):
// the orientation that reads fewer bytes, counting the banded operand once and the other once per
// band; ties keep m-fastest bands. A band is never narrower than `fixed_band` blocks (or the whole
// grid): a group of many rows (a hot expert's thousands) has long tiles whose concurrent
// neighbours share k-slices as in the fixed bands, and a narrower band would have the tiles in
// flight read more distinct slices at every k. budget_kb ≤ 0 or an empty group: today's
// `fixed_band` m-blocks. Depends on the group's size only through speed: a tile's bits are its
// coordinates'.
DETMOE_HOST_DEVICE GridOrder weight_grad_order(int32_t m_blocks, int32_t n_blocks, int32_t rows, int32_t budget_kb,
                                               int32_t block_m, int32_t block_n, int32_t fixed_band) {
  if (budget_kb <= 0 || rows <= 0 || m_blocks <= 0 || n_blocks <= 0) return {fixed_band, false};
  const int64_t budget = static_cast<int64_t>(budget_kb) * 1024;
  const int64_t a_panel = static_cast<int64_t>(block_m) * rows * 2, b_panel = static_cast<int64_t>(block_n) * rows * 2;
  const int64_t bm64 = budget / a_panel < fixed_band ? fixed_band : budget / a_panel;
  const int64_t bn64 = budget / b_panel < fixed_band ? fixed_band : budget / b_panel;
  const int32_t bm = bm64 > m_blocks ? m_blocks : static_cast<int32_t>(bm64);
  const int32_t bn = bn64 > n_blocks ? n_blocks : static_cast<int32_t>(bn64);
  // Bytes in units of rows · 2: A is m_blocks panels of block_m columns, B n_blocks of block_n.
  const int64_t a_once = static_cast<int64_t>(m_blocks) * block_m, b_once = static_cast<int64_t>(n_blocks) * block_n;
  const int64_t m_bands = (m_blocks + bm - 1) / bm, n_bands = (n_blocks + bn - 1) / bn;
  const int64_t via_m = a_once + b_once * m_bands, via_n = b_once + a_once * n_bands;
  return via_n < via_m ? GridOrder{bn, true} : GridOrder{bm, false};
}

}  // namespace detmoe::gemm
