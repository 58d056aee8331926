// Which wgmma form a GEMM tile of the fused kernel runs in, where the producer loads its gate
// half, and which output window each consumer warpgroup then owns. Pure functions of the tile's
// extent, host and device: the producer, both consumer warpgroups and the CPU tests
// (tests/megakernel/layer_tile_forms_test.cpp) compute the same answer.
//
// Why forms at all: partial tiles spent tensor work on rows past their expert's end and on columns
// past F or H (gpt-oss: 571 m-blocks for 512 of rows, the extra ones mostly under 64 rows; F = H =
// 2880 leaves a 64-column last tile in both GEMMs), and the H200 runs the kernel at its 700 W cap,
// where time follows the energy spent, zeros included. Both consumer warpgroups still take every
// stage of a tile in step — only the instruction shape differs — so the pipeline stays symmetric
// (a warpgroup passing stages on without wgmma hung the H200; see gemm_tiles.cuh consume_tile).
#pragma once

#include <cstdint>

#include "detmoe/numeric.h"

namespace detmoe::mk {

inline constexpr int32_t kFormWarpgroupRows = 64;  // one wgmma M: a consumer warpgroup's rows
inline constexpr int32_t kFormTileCols = 256;      // B rows of a stage (GEMM1: gate 128 + up 128)
inline constexpr int32_t kFormSplitCols = 128;     // a split warpgroup's columns

enum class TileShape : int32_t {
  kFull,          // each warpgroup: its 64 rows × all 256 B rows, m64n256
  kSplitColumns,  // GEMM2, ≤ 64 rows: both warpgroups on A rows 0–63, warpgroup w on B rows
                  // 128w…+127 (m64n128)
  kNarrow,        // GEMM2, ≤ 128 valid columns: each warpgroup its 64 rows, m64n64 (≤ 64) or
                  // m64n128
  kHalfRows,      // GEMM1, ≤ 64 rows: warpgroup 0 its 64 rows in m64n256; warpgroup 1, whose rows
                  // are all past the expert's end, the narrowest form (m64n16) on them, so it
                  // still passes every stage through wgmma but spends 1/16 of the tensor work
  kNarrowGateUp,  // GEMM1, ≤ 64 columns left in F (F = 2880: the last of 22.5 column blocks): the
                  // producer loads the gate half 64 rows early, so the stage holds gate rows
                  // f0…f0+63 at 64–127 next to up rows F+f0… at 128–191, and each warpgroup runs
                  // one m64n128 over stage rows 64–191 (gate in registers 0–31, up in 32–63)
  kHalfRowsNarrowGateUp,  // both: warpgroup 0 narrow gate/up, warpgroup 1 m64n16
};
inline constexpr int32_t kTileShapes = 6;  // the trace names each (megakernel/host/layer_trace.cpp)

// What the form rule looks at.
struct TileExtent {
  int32_t rows;          // rows left in the expert from the tile's first row
  int32_t b_row, b_end;  // GEMM1: the gate rows f0 … F; GEMM2: the B rows n0 … H
  bool gate_up;          // GEMM1 (a gate/up pair)
};

DETMOE_HD TileShape tile_shape_of(const TileExtent& t) {
  const bool few_rows = t.rows <= kFormWarpgroupRows;
  if (t.gate_up) {
    // b_row ≥ 64: the early gate load stays inside the weight (F = 64 keeps the full form).
    if (t.b_end - t.b_row <= 64 && t.b_row >= 64)
      return few_rows ? TileShape::kHalfRowsNarrowGateUp : TileShape::kNarrowGateUp;
    return few_rows ? TileShape::kHalfRows : TileShape::kFull;
  }
  if (few_rows) return TileShape::kSplitColumns;
  return t.b_end - t.b_row <= 128 ? TileShape::kNarrow : TileShape::kFull;
}

DETMOE_HD bool narrow_gate_up(TileShape s) {
  return s == TileShape::kNarrowGateUp || s == TileShape::kHalfRowsNarrowGateUp;
}

// The first weight row of the gate half's 128-row load: 64 rows early in the narrow gate/up forms
// (its last 64 rows are then f0 … F − 1, next to the up half; the 64 before f0 are loaded unused).
DETMOE_HD int32_t gate_load_row(TileShape s, int32_t b_row) { return narrow_gate_up(s) ? b_row - 64 : b_row; }

// The accumulator register of up column 0 (gate column c is in register c's place of m64n256).
DETMOE_HD int32_t up_register(TileShape s) { return narrow_gate_up(s) ? 32 : 64; }

// A consumer warpgroup's epilogue window: rows [tile row + row_offset, +64) and columns
// [col0, col_end), col_end ≤ the output's columns. Whatever the form, the window's columns sit in
// the registers where a full tile keeps its first columns.
struct TileWindow {
  int32_t row_offset;
  int32_t col0, col_end;
};

// tile_col0: the tile's first output column; out_cols: the output's columns (F for GEMM1's a, H
// for GEMM2).
DETMOE_HD TileWindow tile_window(TileShape s, int32_t warpgroup, int32_t tile_col0, int32_t out_cols) {
  if (s == TileShape::kSplitColumns) {
    const int32_t col0 = tile_col0 + warpgroup * kFormSplitCols;
    return {0, col0, col0 + kFormSplitCols < out_cols ? col0 + kFormSplitCols : out_cols};
  }
  return {warpgroup * kFormWarpgroupRows, tile_col0, out_cols};
}

}  // namespace detmoe::mk
