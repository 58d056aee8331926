// rcp.rn (the IEEE reciprocal, what `1.0f / x` compiles to) without its per-call slow-path branch.
//
// ptxas expands rcp.rn.f32 into a range test, a branch to a slow-path subroutine, and the fast
// path MUFU.RCP; FFMA t = x·r − 1; FADD.FTZ t = −t; FFMA r = r·t + r (nvdisasm of the layer
// kernel, nvcc 13.0, sm_90a). In GEMM1's SwiGLU epilogue every element sits in its own
// branch region around that test, so a thread's 64 sigmoids barely overlap (docs/perf-journal/megakernel-forward.md step 8:
// the sigmoid is 11.7 % of the kernel's executed instructions). Where the test passes, the same
// four instructions written out below give the same bits; a caller tests a whole batch with
// rcp_rn_fast_path and keeps `1.0f / x` for a batch that fails. tests/megakernel/rcp_test.cu checks
// the equality for every float bit pattern on the GPU.
#pragma once

#include <cstdint>

#include "detmoe/numeric.h"
#include "megakernel/ptx/common.cuh"

namespace detmoe::ptx {

// ptxas's own test for rcp.rn's fast path, on x's bits: |x| normal and below 2^126.
DETMOE_HD bool rcp_rn_fast_path_bits(uint32_t bits) { return ((bits + 0x1800000u) & 0x7f800000u) > 0x1ffffffu; }

DETMOE_DEVICE bool rcp_rn_fast_path(float x) { return rcp_rn_fast_path_bits(__float_as_uint(x)); }

// rcp.rn's fast path; equals 1.0f / x wherever rcp_rn_fast_path(x).
DETMOE_DEVICE float rcp_rn_fast(float x) {
  float r;
  asm("{\n"
      ".reg .f32 a, t;\n"
      "rcp.approx.ftz.f32 a, %1;\n"
      "fma.rn.f32 t, %1, a, 0fBF800000;\n"
      "neg.ftz.f32 t, t;\n"
      "fma.rn.f32 %0, a, t, a;\n"
      "}"
      : "=f"(r)
      : "f"(x));
  return r;
}

}  // namespace detmoe::ptx
