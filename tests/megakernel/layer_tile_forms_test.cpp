// The fused kernel's tile forms (megakernel/layer/tile_form.h) on the CPU: which form a tile
// gets, where the producer loads the gate half, which register holds up, and which output window
// each consumer warpgroup owns. The producer, both consumer warpgroups and these tests run the
// same functions, so a wrong rule here is a wrong kernel there.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "megakernel/layer/tile_form.h"

namespace detmoe::mk {
namespace {

TileShape gemm1(int32_t rows, int32_t f0, int32_t F) { return tile_shape_of({rows, f0, F, true}); }
TileShape gemm2(int32_t rows, int32_t n0, int32_t H) { return tile_shape_of({rows, n0, H, false}); }

TEST(LayerTileForms, Gemm1RowsPickFullOrHalfRows) {
  EXPECT_EQ(gemm1(128, 0, 2048), TileShape::kFull);
  EXPECT_EQ(gemm1(65, 0, 2048), TileShape::kFull);   // warpgroup 1 has one row
  EXPECT_EQ(gemm1(64, 0, 2048), TileShape::kHalfRows);
  EXPECT_EQ(gemm1(1, 128, 2048), TileShape::kHalfRows);
  EXPECT_EQ(gemm1(500, 128, 2048), TileShape::kFull);  // rows left beyond this tile
}

TEST(LayerTileForms, Gemm1LastColumnBlockOfSixtyFourIsNarrowGateUp) {
  // gpt-oss: F = 2880 = 22.5 blocks of 128; the last block (f0 = 2816) has 64 columns.
  EXPECT_EQ(gemm1(128, 2816, 2880), TileShape::kNarrowGateUp);
  EXPECT_EQ(gemm1(40, 2816, 2880), TileShape::kHalfRowsNarrowGateUp);
  EXPECT_EQ(gemm1(128, 2688, 2880), TileShape::kFull);
  EXPECT_EQ(gemm1(128, 256, 320), TileShape::kNarrowGateUp);
  EXPECT_EQ(gemm1(128, 256, 384), TileShape::kFull);  // 128 columns left
  // F = 64: one block at f0 = 0, where a load 64 rows early would leave the weight.
  EXPECT_EQ(gemm1(128, 0, 64), TileShape::kFull);
  EXPECT_EQ(gemm1(10, 0, 64), TileShape::kHalfRows);
}

TEST(LayerTileForms, Gemm2PicksSplitNarrowOrFull) {
  EXPECT_EQ(gemm2(128, 0, 2880), TileShape::kFull);
  EXPECT_EQ(gemm2(64, 0, 2880), TileShape::kSplitColumns);
  EXPECT_EQ(gemm2(64, 2816, 2880), TileShape::kSplitColumns);  // few rows wins over few columns
  EXPECT_EQ(gemm2(65, 2816, 2880), TileShape::kNarrow);        // 64 columns
  EXPECT_EQ(gemm2(128, 2560, 2688), TileShape::kNarrow);       // 128 columns
  EXPECT_EQ(gemm2(128, 2560, 2752), TileShape::kFull);         // 192 columns
  // GEMM2 never takes a GEMM1 form and GEMM1 never a GEMM2 one, over a grid of extents.
  for (int32_t rows : {1, 63, 64, 65, 127, 128, 1000})
    for (int32_t H = 64; H <= 1024; H += 64)
      for (int32_t n0 = 0; n0 < H; n0 += kFormTileCols) {
        const TileShape s = gemm2(rows, n0, H);
        EXPECT_TRUE(s == TileShape::kFull || s == TileShape::kSplitColumns || s == TileShape::kNarrow);
        const TileShape g = gemm1(rows, n0 / 2, H);
        EXPECT_TRUE(g == TileShape::kFull || g == TileShape::kHalfRows || narrow_gate_up(g));
      }
}

// For every F up to 4096 and every 128-column block: a narrow gate/up tile's early gate load stays
// inside the weight, and the valid gate rows f0 … F − 1 land in stage rows 64 … 127, where its
// m64n128 reads them; any other block loads from f0 and keeps up at register 64.
TEST(LayerTileForms, EarlyGateLoadPutsTheValidRowsBesideUp) {
  int narrow = 0;
  for (int32_t F = 64; F <= 4096; F += 64)
    for (int32_t f0 = 0; f0 < F; f0 += 128) {
      const TileShape s = gemm1(128, f0, F);
      const int32_t load = gate_load_row(s, f0);
      if (narrow_gate_up(s)) {
        ++narrow;
        EXPECT_GE(load, 0) << "F " << F << " f0 " << f0;
        EXPECT_EQ(f0 - load, 64) << "gate row f0 at stage row 64";
        EXPECT_LE(F - 1 - load, 127) << "gate row F - 1 inside the 128-row half";
        EXPECT_EQ(up_register(s), 32);
      } else {
        EXPECT_EQ(load, f0);
        EXPECT_EQ(up_register(s), 64);
        EXPECT_TRUE(F - f0 > 64 || F == 64) << "F " << F << " f0 " << f0
                                            << ": only F = 64 keeps a 64-column block in m64n256";
      }
    }
  EXPECT_EQ(narrow, 31);  // F = 192, 320, …, 4032: every odd multiple of 64 above 64
}

// The two warpgroups' windows cover the tile's output block exactly once: rows 0–127 × the
// columns in the full forms, rows 0–63 × both column halves in the split form.
TEST(LayerTileForms, WindowsCoverTheTileOnce) {
  for (int32_t out_cols : {64, 128, 192, 256, 320, 2880})
    for (int32_t col0 = 0; col0 < out_cols; col0 += kFormTileCols)
      for (TileShape s : {TileShape::kFull, TileShape::kSplitColumns, TileShape::kNarrow, TileShape::kHalfRows,
                          TileShape::kNarrowGateUp, TileShape::kHalfRowsNarrowGateUp}) {
        const int32_t tile_end = col0 + kFormTileCols < out_cols ? col0 + kFormTileCols : out_cols;
        std::vector<int> hits(static_cast<size_t>(128 * kFormTileCols), 0);
        for (int32_t wg = 0; wg < 2; ++wg) {
          const TileWindow w = tile_window(s, wg, col0, out_cols);
          EXPECT_GE(w.col0, col0);
          EXPECT_LE(w.col_end, out_cols);
          // A full-form window runs to out_cols; the epilogue stores only the tile's own slabs.
          const int32_t end = w.col_end < tile_end ? w.col_end : tile_end;
          for (int32_t r = w.row_offset; r < w.row_offset + kFormWarpgroupRows; ++r)
            for (int32_t c = w.col0; c < end; ++c) ++hits[static_cast<size_t>(r * kFormTileCols + (c - col0))];
        }
        const bool split = s == TileShape::kSplitColumns;
        for (int32_t r = 0; r < 128; ++r)
          for (int32_t c = col0; c < tile_end; ++c) {
            const int want = split && r >= kFormWarpgroupRows ? 0 : 1;
            ASSERT_EQ(hits[static_cast<size_t>(r * kFormTileCols + (c - col0))], want)
                << "form " << static_cast<int>(s) << " out_cols " << out_cols << " col0 " << col0 << " row " << r
                << " col " << c;
          }
      }
}

}  // namespace
}  // namespace detmoe::mk
