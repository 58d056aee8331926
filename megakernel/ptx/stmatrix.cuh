// stmatrix (sm_90): a warp stores four 8x8 b16 matrices whose fragments sit in registers in
// the mma accumulator layout (lane l holds row l/4, columns 2(l%4)..+1 of each matrix), so an
// epilogue can write bf16 accumulator pairs to shared memory without shuffles.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "megakernel/ptx/common.cuh"

namespace detmoe::ptx {

// Lanes 8i..8i+7 give the row addresses of matrix i; register ri holds this lane's pair of
// matrix i.
DETMOE_DEVICE void stmatrix_x4(uint32_t smem_addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(smem_addr), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
}

// ldmatrix (sm_75+), stmatrix's inverse: lanes 8i..8i+7 give the row addresses of matrix i, and
// register ri receives this lane's pair of matrix i (row l/4, columns 2(l%4)..+1), so bf16 data
// a TMA load put in a swizzled slab comes back in the accumulator layout.
DETMOE_DEVICE void ldmatrix_x4(uint32_t smem_addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr)
               : "memory");
}

// Two floats rounded to bf16 (nearest even) and packed: `lo` in the low half (the lower column).
DETMOE_DEVICE uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

DETMOE_DEVICE void st_shared_v2_f32(uint32_t smem_addr, float x, float y) {
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(smem_addr), "f"(x), "f"(y) : "memory");
}

// 16 bytes of shared memory (read back out of a staging slab).
DETMOE_DEVICE uint4 ld_shared_v4(uint32_t smem_addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(smem_addr) : "memory");
  return v;
}

DETMOE_DEVICE void st_shared_v4(uint32_t smem_addr, uint4 v) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(smem_addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

// The two bf16 halves of a packed pair as floats (exact).
DETMOE_DEVICE float bf16_lo(uint32_t v) { return __uint_as_float(v << 16); }
DETMOE_DEVICE float bf16_hi(uint32_t v) { return __uint_as_float(v & 0xffff0000u); }

}  // namespace detmoe::ptx
