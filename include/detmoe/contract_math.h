// The elementwise formulas and per-row sums of DESIGN.md §2 in fp32, written once so every GPU
// path (the reference and the megakernel) computes the same bits for SwiGLU, dSwiGLU, the
// combine and d_topk_w; docs/NUMERICS.md lists the orders. Fused multiply-adds are spelled out
// (fmaf) and the rest has no product-plus-sum for the compiler to contract, so the bits do not
// depend on the caller's -fmad setting or inlining.
#pragma once

#include <cmath>

#include "detmoe/numeric.h"

namespace detmoe {

// σ(g) = 1/(1 + e^−g); e^−g overflows to +inf for very negative g, giving σ = 0 as it should.
DETMOE_HD float contract_sigmoid(float g) { return 1.0f / (1.0f + expf(-g)); }

// a = silu(g)·u = (g·σ(g))·u; the caller rounds a to bf16.
DETMOE_HD float contract_swiglu(float g, float u) { return (g * contract_sigmoid(g)) * u; }

// Given da = ∂L/∂a (fp32, not rounded): dg = da·u·σ·(1 + g·(1 − σ)), du = da·(g·σ).
// The caller rounds both to bf16 (they are GEMM operands).
struct DSwiGluGrad {
  float dg;
  float du;
};
DETMOE_HD DSwiGluGrad contract_dswiglu(float g, float u, float da) {
  const float s = contract_sigmoid(g);
  return {((da * u) * s) * fmaf(g, 1.0f - s, 1.0f), da * (g * s)};
}

// One step of the combine out[t] = Σ_j w_j·y_j (+ s): acc ← fma(w_j, y_j, acc), j = 0..k−1 from
// acc = 0, then acc + s. Slot order is part of the contract.
DETMOE_HD float contract_combine_step(float acc, float w, float y) { return fmaf(w, y, acc); }

}  // namespace detmoe
