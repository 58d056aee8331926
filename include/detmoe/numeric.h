// bf16 <-> fp32 conversions that give the same bits on host and device (round to nearest even,
// NaN kept quiet), so data generated from a seed is identical wherever it is made.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define DETMOE_HD __host__ __device__ __forceinline__
#else
#define DETMOE_HD inline
#endif

namespace detmoe {

DETMOE_HD uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

DETMOE_HD float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// fp32 -> bf16 bits, round to nearest even; NaN stays NaN (quiet), infinities stay infinite.
DETMOE_HD uint16_t bf16_bits_from_float(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

DETMOE_HD float float_from_bf16_bits(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

// Rounds through bf16 and back: the value a bf16 tensor would hold.
DETMOE_HD float round_bf16(float f) { return float_from_bf16_bits(bf16_bits_from_float(f)); }

}  // namespace detmoe
