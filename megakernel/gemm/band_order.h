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

}  // namespace detmoe::gemm
