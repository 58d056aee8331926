// Device reference of the SwiGLU epilogue's elementwise step, from an fp32 GEMM output with
// gate/up columns interleaved by 8: out[r, j] = bf16(contract_swiglu(bf16 g, bf16 u)).
#pragma once

#include <cstdint>

namespace detmoe::gemm::testing {

// rows × n fp32 input (pitch n) → rows × n/2 bf16 bits. Synchronous; returns false on a CUDA error.
bool swiglu_reference(const float* gemm_out, int64_t rows, int64_t n, uint16_t* out);

}  // namespace detmoe::gemm::testing
