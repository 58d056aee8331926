// Ragged tensor maps: one static TMA map per buffer that still clips every box at the end of
// its group, so a tile never reads another expert's rows or writes past its group.
//
// A row-major [rows, cols] buffer is described as a 3-D map {cols, box_rows, rows + 1} whose two
// outer dimensions both step one row, based box_rows rows before the buffer. The element at
// coordinates (x, y, z) is row y + z − box_rows. To cover rows [row, end) of a box starting at
// `row`, take valid = min(end − row, box_rows), y = box_rows − valid, z = row + valid: box row i
// lands on row + i, and it is in bounds exactly while y + i < box_rows, i.e. i < valid. Rows
// past the group are zero-filled on loads and dropped on stores; z ≤ rows keeps every access
// inside the buffer. (Same idea as Triton's ragged TMA descriptors, with a small base shift.)
#pragma once

#include <cstdint>

#include "megakernel/ptx/common.cuh"

namespace detmoe::gemm {

struct RaggedCoords {
  int32_t y;
  int32_t z;
};

DETMOE_DEVICE RaggedCoords ragged_coords(int32_t row, int32_t end, int32_t box_rows) {
  const int32_t valid = min(max(end - row, 0), box_rows);
  return {box_rows - valid, row + valid};
}

}  // namespace detmoe::gemm
