// ptx::rcp_rn_fast against `1.0f / x` (rcp.rn) for every float bit pattern where
// ptx::rcp_rn_fast_path holds, and the sigmoid built on it against contract_sigmoid for every
// bf16 input (GEMM1's epilogue rounds g to bf16 before the sigmoid, so that is every input it
// sees). Exhaustive, on the GPU; skipped without one.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "detmoe/contract_math.h"
#include "detmoe/numeric.h"
#include "megakernel/ptx/rcp.cuh"
#include "tests/support/gpu.h"

namespace detmoe::ptx {
namespace {

struct Mismatches {
  unsigned long long count;
  unsigned long long fast;  // patterns on the fast path
  uint32_t first;           // first mismatching bit pattern (valid when count > 0)
};

// Counts per thread and adds once at the end: one atomic per pattern on one address would take
// longer than the comparisons.
__global__ void compare_rcp(uint64_t begin, uint64_t end, Mismatches* m) {
  unsigned long long fast = 0;
  for (uint64_t i = begin + blockIdx.x * blockDim.x + threadIdx.x; i < end; i += gridDim.x * blockDim.x) {
    const uint32_t bits = static_cast<uint32_t>(i);
    const float x = __uint_as_float(bits);
    if (!rcp_rn_fast_path(x)) continue;
    ++fast;
    const float want = 1.0f / x;
    if (__float_as_uint(rcp_rn_fast(x)) != __float_as_uint(want)) {
      if (atomicAdd(&m->count, 1ull) == 0) m->first = bits;
    }
  }
  atomicAdd(&m->fast, fast);
}

// The sigmoid as GEMM1's epilogue would compute it with the fast reciprocal, for bf16 g.
__global__ void compare_sigmoid(Mismatches* m) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= 65536) return;
  const float g = __uint_as_float(i << 16);
  const float x = 1.0f + expf(-g);
  const float want = contract_sigmoid(g);
  if (!rcp_rn_fast_path(x)) return;  // the caller falls back to contract_sigmoid
  atomicAdd(&m->fast, 1ull);
  if (__float_as_uint(rcp_rn_fast(x)) != __float_as_uint(want)) {
    if (atomicAdd(&m->count, 1ull) == 0) m->first = i;
  }
}

Mismatches run(void (*launch)(Mismatches*)) {
  Mismatches* d = nullptr;
  Mismatches h{};
  EXPECT_EQ(cudaMalloc(&d, sizeof h), cudaSuccess);
  EXPECT_EQ(cudaMemset(d, 0, sizeof h), cudaSuccess);
  launch(d);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(d);
  return h;
}

TEST(PtxRcp, FastPathEqualsRcpRnForEveryFloat) {
  DETMOE_REQUIRE_GPU();
  const Mismatches m = run([](Mismatches* d) { compare_rcp<<<1024, 256>>>(0, uint64_t{1} << 32, d); });
  // Normal |x| below 2^126: exponents 1 … 252 of both signs, 2^23 mantissas each.
  EXPECT_EQ(m.fast, uint64_t{2} * 252 * (uint64_t{1} << 23));
  EXPECT_EQ(m.count, 0u) << "first mismatch at bit pattern 0x" << std::hex << m.first;
}

TEST(PtxRcp, FastSigmoidEqualsContractSigmoidForEveryBf16) {
  DETMOE_REQUIRE_GPU();
  const Mismatches m = run([](Mismatches* d) { compare_sigmoid<<<256, 256>>>(d); });
  // 1 + e^−g stays below 2^126 exactly for g ≥ −87 among bf16 values (e^87 ≈ 6.1e37 < 2^126 ≈
  // 8.5e37 < e^87.5, and −87.5 is the next bf16 down), +inf included; NaN and g ≤ −87.5 fall back.
  uint64_t expected = 0;
  for (uint32_t i = 0; i < 65536; ++i) {
    const float g = float_from_bf16_bits(static_cast<uint16_t>(i));
    if (!std::isnan(g) && g >= -87.0f) ++expected;
  }
  EXPECT_EQ(m.fast, expected) << "bf16 inputs on the fast path";
  EXPECT_EQ(m.count, 0u) << "first mismatch at bf16 0x" << std::hex << m.first;
}

// CPU: the range test on its edges — 2^126 leaves the fast path, 2^126 − ulp and the smallest
// normal stay on it, denormals, infinities and NaN leave it, and the sign does not matter.
TEST(PtxRcp, FastPathIsNormalAndBelowTwoTo126) {
  auto fast = rcp_rn_fast_path_bits;
  EXPECT_FALSE(fast(0x7e800000u));  // 2^126
  EXPECT_TRUE(fast(0x7e7fffffu));
  EXPECT_TRUE(fast(0x00800000u));   // smallest normal
  EXPECT_FALSE(fast(0x007fffffu));  // largest denormal
  EXPECT_FALSE(fast(0x7f800000u));  // +inf
  EXPECT_FALSE(fast(0x7fc00000u));  // NaN
  EXPECT_TRUE(fast(0x3f800000u));   // 1
  EXPECT_TRUE(fast(0xbf800000u));   // -1
  EXPECT_FALSE(fast(0xfe800000u));  // -2^126
  EXPECT_FALSE(fast(0x00000000u));  // 0
}

}  // namespace
}  // namespace detmoe::ptx
