// The SwiGLU formula of the math contract (DESIGN.md §2), in one place so every GPU path
// (this epilogue, the reference path's elementwise kernel, later the megakernel) computes the
// same bits: a = bf16(silu(g)·u) where g and u are the bf16-rounded gate and up values and
// silu(g) = g / (1 + exp(−g)), every step a single correctly rounded fp32 operation except
// expf (the CUDA device expf, ≤ 2 ulp). No contraction into FMA.
#pragma once

#include <cmath>

#if defined(__CUDACC__)
#define DETMOE_SWIGLU_HD __host__ __device__ __forceinline__
#else
#define DETMOE_SWIGLU_HD inline
#endif

namespace detmoe::gemm {

// silu(g) · u in fp32; g and u are already bf16 values. The caller rounds the result to bf16.
// On the host this uses std::exp, which may differ from the device expf in the last bit: use
// it on the host only for tolerance checks, never for bitwise comparisons with the device.
DETMOE_SWIGLU_HD float silu_times(float g, float u) {
#if defined(__CUDA_ARCH__)
  const float denom = __fadd_rn(1.0f, expf(-g));
  return __fmul_rn(__fdiv_rn(g, denom), u);
#else
  const float denom = 1.0f + std::exp(-g);
  return (g / denom) * u;
#endif
}

}  // namespace detmoe::gemm
