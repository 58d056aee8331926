// gemm::swiglu_batch (GEMM1's SwiGLU epilogue in the layer kernel) against contract_swiglu, bit
// for bit, for every bf16 gate value, in the batch of 8 the layer uses (its copier warps' SwiGLU, 16 bytes
// of g and u at a time). Most batches are on the
// branch-free fast path; the ones holding a gate ≤ −87.5, −inf or NaN must take the per-element
// fallback — the path no layer test reaches, since real gates are never that negative. Were the
// fallback wrong (say, the fast reciprocal used anyway), 1 / (1 + e^87.5) would flush to zero
// and those elements' bits would differ.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "detmoe/contract_math.h"
#include "detmoe/numeric.h"
#include "megakernel/gemm/swiglu_batch.cuh"
#include "tests/support/gpu.h"

namespace detmoe::gemm {
namespace {

constexpr int kBatch = 8;        // as swiglu_slab_in_place calls it (megakernel/layer/epilogue_copier.cuh)
constexpr uint32_t kGates = 65536;  // every bf16 bit pattern

// The mutant the test must catch: the fast reciprocal for every element, no fallback.
template <int N, class Gate, class Up>
__device__ void swiglu_always_fast(float (&out)[N], Gate&& gate, Up&& up) {
  for (int j = 0; j < N; ++j) out[j] = (gate(j) * ptx::rcp_rn_fast(1.0f + expf(-gate(j)))) * up(j);
}

// Thread i takes gates i·8 … i·8 + 7 (consecutive bf16 patterns, so the slow values sit in
// batches beside fast ones) and an up value per element from a fixed hash, and counts the
// elements whose bits differ from contract_swiglu's.
template <bool kMutant>
__global__ void compare_batches(uint32_t rotate, unsigned long long* mismatches, uint32_t* first) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= kGates / kBatch) return;
  auto gate = [&](int j) { return __uint_as_float(((i * kBatch + (j + rotate) % kBatch) & 0xffffu) << 16); };
  auto up = [&](int j) {
    const uint32_t h = (i * kBatch + static_cast<uint32_t>(j)) * 2654435761u;
    return __uint_as_float((0x3f00u + (h >> 24)) << 16) * ((h & 1u) ? -1.0f : 1.0f);  // ±[0.5, 2)
  };
  float out[kBatch];
  if constexpr (kMutant) {
    swiglu_always_fast(out, gate, up);
  } else {
    swiglu_batch(out, gate, up);
  }
  for (int j = 0; j < kBatch; ++j) {
    const float want = contract_swiglu(gate(j), up(j));
    const bool both_nan = isnan(want) && isnan(out[j]);
    if (!both_nan && __float_as_uint(out[j]) != __float_as_uint(want)) {
      if (atomicAdd(mismatches, 1ull) == 0) *first = __float_as_uint(gate(j));
    }
  }
}

// Launches `kernel` (rotate, mismatches, first) over `blocks` blocks of 256 threads and returns its
// mismatch count; *first gets the first mismatching gate's bits.
template <class Kernel>
unsigned long long count_mismatches(Kernel kernel, unsigned blocks, uint32_t rotate, uint32_t* first) {
  unsigned long long* d_mismatches = nullptr;
  uint32_t* d_first = nullptr;
  unsigned long long mismatches = ~0ull;
  EXPECT_EQ(cudaMalloc(&d_mismatches, sizeof *d_mismatches), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&d_first, sizeof *d_first), cudaSuccess);
  EXPECT_EQ(cudaMemset(d_mismatches, 0, sizeof *d_mismatches), cudaSuccess);
  kernel<<<blocks, 256>>>(rotate, d_mismatches, d_first);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(&mismatches, d_mismatches, sizeof mismatches, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(first, d_first, sizeof *first, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(d_mismatches);
  cudaFree(d_first);
  return mismatches;
}

TEST(SwigluBatch, EqualsContractSwigluForEveryBf16GateOnBothPaths) {
  // Batches the fast path must refuse: any gate NaN or below −87 (1 + e^−g ≥ 2^126).
  int slow_batches = 0;
  for (uint32_t b = 0; b < kGates / kBatch; ++b) {
    bool slow = false;
    for (uint32_t j = 0; j < kBatch; ++j) {
      const float g = float_from_bf16_bits(static_cast<uint16_t>(b * kBatch + j));
      slow = slow || std::isnan(g) || g < -87.0f;
    }
    slow_batches += slow;
  }
  // Without slow batches the fallback would go untested; without fast ones, the fast path.
  ASSERT_GT(slow_batches, 100);
  ASSERT_LT(slow_batches, static_cast<int>(kGates / kBatch) - 100);
  DETMOE_REQUIRE_GPU();

  auto run = [](auto kernel, uint32_t rotate, uint32_t* first) {
    return count_mismatches(kernel, kGates / kBatch / 256, rotate, first);
  };
  // Rotating the batch changes where the slow elements sit in it.
  for (uint32_t rotate : {0u, 5u, 15u}) {
    uint32_t first = 0;
    EXPECT_EQ(run(compare_batches<false>, rotate, &first), 0u)
        << "rotate " << rotate << ": first mismatch at gate bits 0x" << std::hex << first;
  }
  // The comparison has teeth: without the fallback the gates ≤ −87.5 come out wrong.
  uint32_t first = 0;
  EXPECT_GT(run(compare_batches<true>, 0, &first), 0u) << "the always-fast mutant went unnoticed";
}

// gemm::dswiglu_batch (the backward's da epilogue, batches of 8) against contract_dswiglu, bit for
// bit, for every bf16 g, with u and da from a hash; the always-fast mutant must be caught.
constexpr int kDBatch = 8;

template <bool kMutant>
__global__ void compare_dswiglu_batches(uint32_t rotate, unsigned long long* mismatches, uint32_t* first) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= kGates / kDBatch) return;
  auto g = [&](int j) { return __uint_as_float(((i * kDBatch + (j + rotate) % kDBatch) & 0xffffu) << 16); };
  auto hashed = [&](int j, uint32_t salt) {
    const uint32_t h = (i * kDBatch + static_cast<uint32_t>(j)) * 2654435761u + salt;
    return __uint_as_float((0x3f00u + (h >> 24)) << 16) * ((h & 1u) ? -1.0f : 1.0f);  // ±[0.5, 2)
  };
  auto u = [&](int j) { return hashed(j, 0u); };
  auto da = [&](int j) { return hashed(j, 0x9e3779b9u) * 0.37f; };
  float dg[kDBatch], du[kDBatch];
  if constexpr (kMutant) {
    for (int j = 0; j < kDBatch; ++j) {
      const float s = ptx::rcp_rn_fast(1.0f + expf(-g(j)));
      dg[j] = ((da(j) * u(j)) * s) * fmaf(g(j), 1.0f - s, 1.0f);
      du[j] = da(j) * (g(j) * s);
    }
  } else {
    dswiglu_batch<kDBatch>(g, u, da, [&](int j, float a, float b) {
      dg[j] = a;
      du[j] = b;
    });
  }
  for (int j = 0; j < kDBatch; ++j) {
    const DSwiGluGrad want = contract_dswiglu(g(j), u(j), da(j));
    const bool dg_ok = (isnan(want.dg) && isnan(dg[j])) || __float_as_uint(dg[j]) == __float_as_uint(want.dg);
    const bool du_ok = (isnan(want.du) && isnan(du[j])) || __float_as_uint(du[j]) == __float_as_uint(want.du);
    if (!dg_ok || !du_ok) {
      if (atomicAdd(mismatches, 1ull) == 0) *first = __float_as_uint(g(j));
    }
  }
}

TEST(DSwigluBatch, EqualsContractDSwigluForEveryBf16GateOnBothPaths) {
  DETMOE_REQUIRE_GPU();
  auto run = [](auto kernel, uint32_t rotate, uint32_t* first) {
    return count_mismatches(kernel, kGates / kDBatch / 256, rotate, first);
  };
  for (uint32_t rotate : {0u, 3u, 7u}) {
    uint32_t first = 0;
    EXPECT_EQ(run(compare_dswiglu_batches<false>, rotate, &first), 0u)
        << "rotate " << rotate << ": first mismatch at g bits 0x" << std::hex << first;
  }
  uint32_t first = 0;
  EXPECT_GT(run(compare_dswiglu_batches<true>, 0, &first), 0u) << "the always-fast mutant went unnoticed";
}

}  // namespace
}  // namespace detmoe::gemm
