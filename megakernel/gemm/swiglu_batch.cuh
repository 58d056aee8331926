// SwiGLU for a thread's batch of N (gate, up) pairs, bitwise equal to contract_swiglu on each.
//
// `contract_swiglu` compiled per element puts every element's reciprocal in its own branch region
// around rcp.rn's slow-path test, so a thread's sigmoids hardly overlap (docs/perf-journal/megakernel-forward.md step 8: the
// sigmoid was 11.7 % of the layer kernel's executed instructions). Here the batch computes every
// 1 + e^−g first, tests them all once, and on the fast path (|x| normal and below 2^126: every
// g above about −87) takes rcp.rn's fast-path instructions branch-free (ptx::rcp_rn_fast, equal
// to 1.0f / x there, tests/megakernel/rcp_test.cu). A batch with any element off the fast path
// falls back to contract_swiglu per element. The operation order is the contract's: (g·σ)·u.
#pragma once

#include "detmoe/contract_math.h"
#include "detmoe/numeric.h"
#include "megakernel/ptx/rcp.cuh"

namespace detmoe::gemm {

// out[j] = contract_swiglu(gate(j), up(j)) for j in [0, N); gate and up give the bf16-rounded
// fp32 operands.
template <int N, class Gate, class Up>
DETMOE_DEVICE void swiglu_batch(float (&out)[N], Gate&& gate, Up&& up) {
  float x[N];
  bool fast = true;
#pragma unroll
  for (int j = 0; j < N; ++j) {
    out[j] = gate(j);
    x[j] = 1.0f + expf(-out[j]);
    fast = fast && ptx::rcp_rn_fast_path(x[j]);
  }
  if (fast) {
#pragma unroll
    for (int j = 0; j < N; ++j) out[j] = (out[j] * ptx::rcp_rn_fast(x[j])) * up(j);
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) out[j] = contract_swiglu(out[j], up(j));
  }
}

// dSwiGLU for a batch of N (g, u, da): out(j, dg, du) with dg, du = contract_dswiglu(g(j), u(j), da(j))
// bit for bit,
// with the sigmoids' reciprocals branch-free on the fast path as above (the backward's da
// epilogue; per element, contract_dswiglu's 1/x branch regions kept its 128 elements per thread
// from overlapping: 32–37 µs per tile on the H200 against a 25–90 µs mainloop).
template <int N, class G, class U, class Da, class Out>
DETMOE_DEVICE void dswiglu_batch(G&& g, U&& u, Da&& da, Out&& out) {
  float x[N];
  bool fast = true;
#pragma unroll
  for (int j = 0; j < N; ++j) {
    x[j] = 1.0f + expf(-g(j));
    fast = fast && ptx::rcp_rn_fast_path(x[j]);
  }
  if (fast) {
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const float s = ptx::rcp_rn_fast(x[j]), gj = g(j), dj = da(j);
      out(j, ((dj * u(j)) * s) * fmaf(gj, 1.0f - s, 1.0f), dj * (gj * s));
    }
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const DSwiGluGrad d = contract_dswiglu(g(j), u(j), da(j));
      out(j, d.dg, d.du);
    }
  }
}

}  // namespace detmoe::gemm
