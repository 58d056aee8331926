// Host encoding of the GEMM's TMA maps (see megakernel/gemm/ragged_map.cuh for the ragged form).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "detmoe/status.h"

namespace detmoe::gemm::host {

enum class ElementType { kBF16, kFP32 };

struct MatrixView {
  const void* base = nullptr;
  ElementType type = ElementType::kBF16;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t pitch = 0;  // elements between consecutive rows
};

// A 3-D ragged map over a row-major matrix: boxes of box_cols × box_rows, 128-byte swizzle.
// cuTensorMapEncodeTiled is reached through cudaGetDriverEntryPointByVersion, so nothing links
// libcuda directly.
StatusOr<CUtensorMap> encode_ragged_map(const MatrixView& m, int box_cols, int box_rows);

// A plain 2-D map {cols, rows} with boxes of box_cols × 1 row, 128-byte swizzle: row `rows` (or
// any row past the end) reads zeros. Experimental: the gathered-A producer's second form.
StatusOr<CUtensorMap> encode_row_map(const MatrixView& m, int box_cols);

}  // namespace detmoe::gemm::host
