// Kernel parameters besides the tensor maps: the grouped problem and the epilogue's knobs.
#pragma once

#include <cstdint>

namespace detmoe::gemm {

struct KernelParams {
  const int32_t* group_offsets;  // [groups + 1] on the device; nullptr = one group [0, rows)
  int32_t groups;
  int32_t rows;  // rows of the token-indexed buffers; offsets are clamped to [0, rows]
  int32_t n;     // GEMM N
  int32_t k;     // kForward / kDataGrad reduction length
  int32_t m;     // kWeightGrad rows of each group's output block

  int32_t epilogue;        // detmoe::gemm::Epilogue
  int32_t out_cols;        // columns of C (N, or N/2 after SwiGLU)
  const float* row_scale;  // kRowScaleBF16
  int32_t store_h;         // kSwiGLU: also store the bf16 pre-activation

  unsigned int* tickets;  // the dynamic tile deal's counter, zero at launch; nullptr = static deal
  int32_t band_budget_kb;  // kWeightGrad: GroupedGemm::band_budget_kb (0 = fixed bands)
  int32_t stream_stores;   // C's TMA stores evict-first in L2 (GroupedGemm::stream_stores)
};

}  // namespace detmoe::gemm
