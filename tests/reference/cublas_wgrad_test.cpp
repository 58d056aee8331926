// The reference's weight-gradient GEMM (dW = dyᵀ·a: row-major, A transposed, K = an expert's rows)
// straight through CublasGemm (fp32 per problem, bf16 grouped), against fp64 on the host, for row counts with every K tail and at
// an operand offset like a busy expert's. Session 15 found the reference's dW of one expert
// (4226 rows at row 92320 of T=16384 H=F=64 E=361 k=10 zipf:1.57) off the oracle by a rank-two
// error — two rows' terms — while the layer's other outputs matched the megakernel bit for bit.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cublas_gemm.h"
#include "device_buffer.h"
#include "detmoe/numeric.h"
#include "support/gpu.h"

namespace detmoe {
namespace {

// Deterministic bf16 values in [-1, 1).
std::vector<uint16_t> random_bf16(size_t n, uint64_t seed) {
  std::vector<uint16_t> v(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = bf16_bits_from_float(static_cast<float>(static_cast<int64_t>(s >> 40) - (1 << 23)) / (1 << 23));
  }
  return v;
}

struct WgradCase {
  int64_t K, row0;
};

class CublasWgrad : public ::testing::TestWithParam<WgradCase> {};

// C[H, F] = A[row0 : row0+K, H]ᵀ · B[row0 : row0+K, F], fp32 and bf16 out; every element within
// 2⁻¹⁶ of its Σ|terms| (fp32 accumulation of K ≤ 16386 random-sign terms errs ≈ 2⁻²⁴ of it; two
// rows' terms missing or extra are ≈ 2/K of it, 2⁻¹³ at K = 16386), plus 2⁻⁸ of |C| for bf16's
// one rounding.
TEST_P(CublasWgrad, TransposedAMatchesFp64) {
  DETMOE_REQUIRE_GPU();
  const auto [K, row0] = GetParam();
  constexpr int64_t H = 64, F = 64;
  const int64_t rows = row0 + K;
  const std::vector<uint16_t> a = random_bf16(rows * H, 1 + K), b = random_bf16(rows * F, 2 + K);
  ref::DeviceBuffer da, db, dc, dc16;
  ASSERT_TRUE(da.allocate(a.size() * 2, "A").ok());
  ASSERT_TRUE(db.allocate(b.size() * 2, "B").ok());
  ASSERT_TRUE(dc.allocate(H * F * 4, "C").ok());
  ASSERT_TRUE(dc16.allocate(H * F * 2, "C bf16").ok());
  ASSERT_EQ(cudaMemcpy(da.get(), a.data(), a.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(db.get(), b.data(), b.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(dc.get(), 0xff, H * F * 4), cudaSuccess);  // NaN poison
  ASSERT_EQ(cudaMemset(dc16.get(), 0xff, H * F * 2), cudaSuccess);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  {
    ref::CublasGemm gemm;
    ASSERT_TRUE(gemm.init(stream, 32 << 20, H * F).ok());
    const uint16_t* A = static_cast<const uint16_t*>(da.get()) + row0 * H;
    const uint16_t* B = static_cast<const uint16_t*>(db.get()) + row0 * F;
    const ref::GemmProblem p32{H, F, K, A, H, B, F, dc.get(), F}, p16{H, F, K, A, H, B, F, dc16.get(), F};
    Status st = gemm.run(ReferenceGemm::kPerExpert, true, false, ref::GemmOut::kFP32, {&p32, 1}, "wgrad fp32");
    ASSERT_TRUE(st.ok()) << st.to_string();
    st = gemm.run(ReferenceGemm::kGroupedBatched, true, false, ref::GemmOut::kBF16, {&p16, 1}, "wgrad bf16");
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  }
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  std::vector<float> c(H * F);
  std::vector<uint16_t> c16(H * F);
  ASSERT_EQ(cudaMemcpy(c.data(), dc.get(), c.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(c16.data(), dc16.get(), c16.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  int64_t bad = 0, bad16 = 0;
  double worst = 0, worst16 = 0;
  for (int64_t i = 0; i < H; ++i)
    for (int64_t j = 0; j < F; ++j) {
      double sum = 0, mag = 0;
      for (int64_t r = row0; r < rows; ++r) {
        const double t = static_cast<double>(float_from_bf16_bits(a[r * H + i])) * float_from_bf16_bits(b[r * F + j]);
        sum += t;
        mag += std::fabs(t);
      }
      const double ratio = std::fabs(c[i * F + j] - sum) / (std::ldexp(mag, -16) + 1e-30);
      worst = std::max(worst, std::isnan(ratio) ? INFINITY : ratio);
      bad += !(ratio <= 1.0);
      const double ratio16 = std::fabs(float_from_bf16_bits(c16[i * F + j]) - sum) /
                             (std::ldexp(mag, -16) + std::ldexp(std::fabs(sum), -8) + 1e-30);
      worst16 = std::max(worst16, std::isnan(ratio16) ? INFINITY : ratio16);
      bad16 += !(ratio16 <= 1.0);
    }
  EXPECT_EQ(bad, 0) << "fp32, K = " << K << " at row " << row0 << ": worst error " << worst << " × 2⁻¹⁶·Σ|terms|";
  EXPECT_EQ(bad16, 0) << "bf16, K = " << K << " at row " << row0 << ": worst error " << worst16 << " × bound";
  RecordProperty("worst_over_bound", std::to_string(worst));
}

// The split rule itself (CPU): which GEMMs run as head + tail, and the tail's size.
TEST(WgradTailRows, SplitsTheFailingResiduesEverywhereAndEveryRaggedKOfSmallOutputs) {
  EXPECT_EQ(ref::wgrad_tail_rows(64, 64, 128), 0);      // one block
  EXPECT_EQ(ref::wgrad_tail_rows(64, 64, 100), 0);      // below a block: one call
  EXPECT_EQ(ref::wgrad_tail_rows(64, 64, 4224), 0);     // whole blocks
  EXPECT_EQ(ref::wgrad_tail_rows(64, 64, 4226), 2);     // session 15's K
  EXPECT_EQ(ref::wgrad_tail_rows(64, 64, 4227), 3);     // small output: every ragged K
  EXPECT_EQ(ref::wgrad_tail_rows(1024, 1024, 4227), 3);
  EXPECT_EQ(ref::wgrad_tail_rows(7168, 2048, 4226), 2);   // large output: K ≡ 2 (mod 64)
  EXPECT_EQ(ref::wgrad_tail_rows(7168, 2048, 4289), 65);  // K ≡ 1 (mod 64), tail = K mod 128
  EXPECT_EQ(ref::wgrad_tail_rows(7168, 2048, 4227), 0);   // large output, other residues: one call
  EXPECT_EQ(ref::wgrad_tail_rows(2048, 1024, 65538), 2);
}

INSTANTIATE_TEST_SUITE_P(Tails, CublasWgrad,
                         ::testing::Values(WgradCase{2, 0}, WgradCase{66, 0}, WgradCase{130, 0}, WgradCase{2050, 0},
                                           WgradCase{4098, 0}, WgradCase{4224, 0}, WgradCase{4226, 0},
                                           WgradCase{4227, 0}, WgradCase{4230, 0}, WgradCase{16386, 0},
                                           WgradCase{4226, 92320}, WgradCase{4224, 92320}, WgradCase{16370, 0}),
                         [](const auto& info) {
                           std::string name = "K";
                           name += std::to_string(info.param.K);
                           name += "_at";
                           name += std::to_string(info.param.row0);
                           return name;
                         });

}  // namespace
}  // namespace detmoe
