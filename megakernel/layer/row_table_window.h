// Which plan rows a routed GEMM2 tile's row table copies (row_table.cuh): a 16-byte-aligned
// window around the tile's rows, because the bulk copy moves whole 16-byte pieces and the tile's
// first plan row is anywhere. Host and device: the producer computes it, and the CPU test
// (tests/megakernel/layer_sizes_test.cpp, LayerSizes.RowTableWindowsStayInsideTheRowArrays)
// checks that no window reads past the row arrays' 256-byte-rounded pieces of the workspace.
#pragma once

#include <cstdint>

#include "detmoe/numeric.h"

namespace detmoe::mk {

inline constexpr int32_t kRowTableTileRows = 128;                  // a GEMM tile's rows (kRowsPerMBlock)
inline constexpr int32_t kRowTableRows = kRowTableTileRows + 4;    // the largest window

struct RowTableWindow {
  int32_t begin;  // first plan row copied (a multiple of 4)
  int32_t end;    // one past the last (a multiple of 4)
};

// The window of plan rows [plan_row0, plan_row0 + rows), 1 ≤ rows ≤ kRowTableTileRows (rows ≤ 0
// copies one piece: the consumers read nothing of it).
DETMOE_HD RowTableWindow row_table_window(int32_t plan_row0, int32_t rows) {
  const int32_t last = plan_row0 + (rows > 0 ? rows : 1);
  return {plan_row0 & ~3, (last + 3) & ~3};
}

}  // namespace detmoe::mk
