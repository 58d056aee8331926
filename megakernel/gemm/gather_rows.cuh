// Gathered K-major operand rows: one 128-byte row of a k-block (64 bf16) copied with cp.async to
// where a 128-byte-swizzled TMA box would put it, so the stage reads as the box load's would.
// Piece c (16 bytes) of row r lands at r·128 + (c ⊕ r mod 8)·16 of a 1024-byte-aligned stage:
// the swizzle XORs a row's 16-byte chunks with address bits 7–9.
#pragma once

#include <cstdint>

#include "megakernel/ptx/common.cuh"
#include "megakernel/ptx/cp_async.cuh"

namespace detmoe::gemm {

// `dst_row`: the row's shared address (stage + r·128); `src_row`: its source (null: zeros);
// columns [k0, k0 + 64) of which those ≥ k_end read as zeros; `any`: a valid global address for
// the zero-filled pieces (never read).
DETMOE_DEVICE void cp_async_swizzled_row(uint32_t dst_row, uint32_t r, const uint16_t* src_row, int32_t k0,
                                         int32_t k_end, const void* any) {
#pragma unroll
  for (int c = 0; c < 8; ++c) {
    const int32_t col = k0 + 8 * c;
    const bool load = src_row != nullptr && col < k_end;
    ptx::cp_async_16(dst_row + ((static_cast<uint32_t>(c) ^ (r & 7u)) << 4),
                     load ? static_cast<const void*>(src_row + col) : any, load ? 16u : 0u);
  }
}

}  // namespace detmoe::gemm
