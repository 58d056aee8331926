// Philox4x32-10 counter-based generator (Salmon et al., SC'11), identical on host and device.
//
// Every generated value is a pure function of (seed, stream, index): a tensor's element i is
// drawn from counter {i_lo, i_hi, stream, 0}, so any element can be produced independently, in
// any order, on any device — the basis of "a failure reproduces from its printed seed alone".
#pragma once

#include <cstdint>

#include "detmoe/numeric.h"

namespace detmoe {

struct Philox4 {
  uint32_t v[4];
};

DETMOE_HD void philox_mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t p = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
}

DETMOE_HD Philox4 philox4x32_10(uint64_t seed, uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  uint32_t x0 = c0, x1 = c1, x2 = c2, x3 = c3;
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    philox_mulhilo(kM0, x0, hi0, lo0);
    philox_mulhilo(kM1, x2, hi1, lo1);
    const uint32_t y0 = hi1 ^ x1 ^ k0, y1 = lo1, y2 = hi0 ^ x3 ^ k1, y3 = lo0;
    x0 = y0; x1 = y1; x2 = y2; x3 = y3;
    k0 += kW0;
    k1 += kW1;
  }
  return Philox4{{x0, x1, x2, x3}};
}

// The first 32-bit word for (seed, stream, index).
DETMOE_HD uint32_t philox_u32(uint64_t seed, uint32_t stream, uint64_t index) {
  return philox4x32_10(seed, static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), stream, 0u).v[0];
}

// Uniform in [0, 1) with 24 random bits: exact in fp32, so host and device agree bit for bit.
DETMOE_HD float philox_uniform(uint64_t seed, uint32_t stream, uint64_t index) {
  return static_cast<float>(philox_u32(seed, stream, index) >> 8) * (1.0f / 16777216.0f);
}

}  // namespace detmoe
