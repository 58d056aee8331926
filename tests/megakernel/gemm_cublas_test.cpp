// Random bf16 data against cuBLAS (bf16 inputs, fp32 accumulation and output), group by group.
//
// Tolerance: both sides sum the same exact products in fp32, in different orders, so
// |ours − cuBLAS| ≤ 2·γ_K·Σ_k |a_k·b_k| in the worst case (γ_K ≈ K·2^-24). Rounding errors of
// random data grow like √K, far below that; we allow 2^-16 · Σ|a·b| (computed by cuBLAS on |A|,
// |B|), tight enough that one wrong or missing product of unit size fails. The bf16 epilogue
// must equal bf16(fp32 result) bit for bit: it is the same accumulator, rounded once.
#include <cublas_v2.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "gemm_test_util.h"
#include "support/gpu.h"

namespace detmoe::gemm::testing {
namespace {

class Cublas {
 public:
  Cublas() { ok_ = cublasCreate(&h_) == CUBLAS_STATUS_SUCCESS; }
  ~Cublas() {
    if (ok_) cublasDestroy(h_);
  }
  cublasHandle_t get() const { return h_; }
  bool ok() const { return ok_; }

 private:
  cublasHandle_t h_{};
  bool ok_ = false;
};

// C (fp32, dense pitch n) = the problem's product, one cublasGemmEx per group.
void cublas_product(cublasHandle_t h, const Problem& p, const uint16_t* a, const uint16_t* b, float* c) {
  const float one = 1.0f, zero = 0.0f;
  cudaMemset(c, 0, static_cast<size_t>(p.c_rows() * p.n) * sizeof(float));
  const int n = static_cast<int>(p.n);
  for (int32_t g = 0; g < p.groups(); ++g) {
    const int32_t r0 = p.offsets[g], r1 = p.offsets[g + 1], rows = r1 - r0;
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    if (p.layout == Layout::kForward && rows > 0) {
      // Column-major view: C_gᵀ [n, rows] = B_g [n, k] (stored [k, n] col-major, op T) · A_gᵀ.
      st = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, rows, static_cast<int>(p.k), &one,
                        b + g * p.n * p.pitch_b(), CUDA_R_16BF, static_cast<int>(p.pitch_b()), a + r0 * p.pitch_a(),
                        CUDA_R_16BF, static_cast<int>(p.pitch_a()), &zero, c + r0 * p.n, CUDA_R_32F, n,
                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    } else if (p.layout == Layout::kDataGrad && rows > 0) {
      st = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, rows, static_cast<int>(p.k), &one,
                        b + g * p.k * p.pitch_b(), CUDA_R_16BF, static_cast<int>(p.pitch_b()), a + r0 * p.pitch_a(),
                        CUDA_R_16BF, static_cast<int>(p.pitch_a()), &zero, c + r0 * p.n, CUDA_R_32F, n,
                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    } else if (p.layout == Layout::kWeightGrad && rows > 0) {
      st = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, n, static_cast<int>(p.m), rows, &one, b + r0 * p.pitch_b(),
                        CUDA_R_16BF, static_cast<int>(p.pitch_b()), a + r0 * p.pitch_a(), CUDA_R_16BF,
                        static_cast<int>(p.pitch_a()), &zero, c + g * p.m * p.n, CUDA_R_32F, n, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT);
    }
    ASSERT_EQ(st, CUBLAS_STATUS_SUCCESS) << "cublasGemmEx group " << g;
  }
}

std::vector<uint16_t> absolute(std::vector<uint16_t> v) {
  for (auto& x : v) x &= 0x7fffu;
  return v;
}

void check_against_cublas(const Problem& p, uint64_t seed, int32_t grid = 0) {
  Cublas blas;
  ASSERT_TRUE(blas.ok());
  const auto a = normal_bf16(static_cast<size_t>(p.a_rows() * p.pitch_a()), seed);
  const auto b = normal_bf16(static_cast<size_t>(p.b_rows() * p.pitch_b()), seed + 1);

  DeviceProblem d32, d16;
  upload_problem(p, a, b, Epilogue::kStoreFP32, d32);
  upload_problem(p, a, b, Epilogue::kStoreBF16, d16);
  const Status s32 = run_problem(p, Epilogue::kStoreFP32, d32, grid);
  ASSERT_TRUE(s32.ok()) << describe(p) << ": " << s32.to_string();
  const Status s16 = run_problem(p, Epilogue::kStoreBF16, d16, grid);
  ASSERT_TRUE(s16.ok()) << describe(p) << ": " << s16.to_string();
  const size_t count = static_cast<size_t>(p.c_rows() * p.n);
  const auto ours = download<float>(d32.c, count);
  const auto ours16 = download<uint16_t>(d16.c, count);

  DeviceBuffer ref(count * sizeof(float)), bound(count * sizeof(float));
  const DeviceBuffer abs_a = upload(absolute(a)), abs_b = upload(absolute(b));
  cublas_product(blas.get(), p, d32.a.as<uint16_t>(), d32.b.as<uint16_t>(), ref.as<float>());
  cublas_product(blas.get(), p, abs_a.as<uint16_t>(), abs_b.as<uint16_t>(), bound.as<float>());
  DETMOE_CUDA_CHECK(cudaDeviceSynchronize());
  const auto want = download<float>(ref, count);
  const auto mag = download<float>(bound, count);

  // Rows inside a group (kWeightGrad: all rows).
  std::vector<bool> in_group(static_cast<size_t>(p.c_rows()), p.layout == Layout::kWeightGrad);
  if (p.layout != Layout::kWeightGrad)
    for (int32_t g = 0; g < p.groups(); ++g)
      for (int32_t r = p.offsets[g]; r < p.offsets[g + 1]; ++r) in_group[r] = true;

  int64_t bad = 0, bad16 = 0, poisoned = 0;
  double worst = 0;
  for (int64_t r = 0; r < p.c_rows(); ++r) {
    for (int64_t j = 0; j < p.n; ++j) {
      const size_t i = static_cast<size_t>(r * p.n + j);
      if (!in_group[r]) {
        poisoned += !std::isnan(ours[i]);
        continue;
      }
      const double err = std::fabs(static_cast<double>(ours[i]) - want[i]);
      const double tol = std::ldexp(static_cast<double>(mag[i]), -16);
      if (!(err <= tol)) ++bad;
      if (mag[i] > 0) worst = std::max(worst, err / mag[i]);
      if (ours16[i] != float_to_bf16(ours[i])) ++bad16;
    }
  }
  EXPECT_EQ(bad, 0) << describe(p) << ": elements outside 2^-16·Σ|ab| of cuBLAS (worst relative " << worst << ")";
  EXPECT_EQ(bad16, 0) << describe(p) << ": bf16 epilogue differs from bf16(fp32 epilogue)";
  EXPECT_EQ(poisoned, 0) << describe(p) << ": rows outside every group were written";
  ::testing::Test::RecordProperty("worst_error_over_abs_product", std::to_string(worst));
  std::printf("[ cuBLAS   ] %s: worst |ours - cuBLAS| / sum|ab| = %.3g\n", describe(p).c_str(), worst);
}

TEST(GemmCublas, ForwardGrouped) {
  DETMOE_REQUIRE_GPU();
  Problem p;
  p.layout = Layout::kForward;
  p.offsets = offsets_from_sizes({1000, 0, 333, 2048, 1, 255}, 17);
  p.rows = p.offsets.back() + 9;
  p.n = 1536;
  p.k = 1024;
  check_against_cublas(p, 31);
}

Problem data_grad_case(int64_t n, int64_t k) {
  Problem p;
  p.layout = Layout::kDataGrad;
  p.offsets = offsets_from_sizes({777, 0, 1, 1300, 64}, 0);
  p.rows = p.offsets.back();
  p.n = n;
  p.k = k;
  return p;
}

TEST(GemmCublas, DataGradGrouped) {
  DETMOE_REQUIRE_GPU();
  check_against_cublas(data_grad_case(776, 2048), 32);
}

// Variants of the case above that isolate one property each (n a multiple of 64, a short
// reduction, a grid smaller than the tile count).
TEST(GemmCublas, DataGradGroupedTileAlignedN) {
  DETMOE_REQUIRE_GPU();
  check_against_cublas(data_grad_case(768, 2048), 35);
}

TEST(GemmCublas, DataGradGroupedShortK) {
  DETMOE_REQUIRE_GPU();
  check_against_cublas(data_grad_case(776, 256), 36);
}

TEST(GemmCublas, DataGradGroupedSmallGrid) {
  DETMOE_REQUIRE_GPU();
  check_against_cublas(data_grad_case(776, 2048), 37, /*grid=*/3);
}

TEST(GemmCublas, ForwardGroupedUnalignedN) {
  DETMOE_REQUIRE_GPU();
  Problem p;
  p.layout = Layout::kForward;
  p.offsets = offsets_from_sizes({777, 0, 1, 1300, 64}, 0);
  p.rows = p.offsets.back();
  p.n = 776;
  p.k = 2048;
  check_against_cublas(p, 38);
}

// Large buffers with partial column boxes: the cases where boxes wholly past the last column
// once made the TMA unit fault (an illegal address that memcheck's allocation layout hid).
TEST(GemmCublas, DataGradLargeUnalignedN) {
  DETMOE_REQUIRE_GPU();
  Problem p;
  p.layout = Layout::kDataGrad;
  p.offsets = offsets_from_sizes({3100, 0, 1, 5200, 256}, 0);
  p.rows = p.offsets.back();
  p.n = 776;
  p.k = 4096;
  check_against_cublas(p, 39);
}

TEST(GemmCublas, WeightGradLargeUnalignedMN) {
  DETMOE_REQUIRE_GPU();
  Problem p;
  p.layout = Layout::kWeightGrad;
  p.offsets = offsets_from_sizes({3000, 0, 1, 5999, 77}, 0);
  p.rows = p.offsets.back();
  p.m = 520;
  p.n = 776;
  check_against_cublas(p, 40);
}

TEST(GemmCublas, ForwardLargePartialK) {
  DETMOE_REQUIRE_GPU();
  Problem p;
  p.layout = Layout::kForward;
  p.offsets = offsets_from_sizes({3000, 0, 1, 5999, 77}, 0);
  p.rows = p.offsets.back();
  p.n = 1032;
  p.k = 2056;  // the last k-block holds 8 columns
  check_against_cublas(p, 41);
}

TEST(GemmCublas, WeightGradGrouped) {
  DETMOE_REQUIRE_GPU();
  Problem p;
  p.layout = Layout::kWeightGrad;
  p.offsets = offsets_from_sizes({1000, 0, 1, 2500, 63}, 5);
  p.rows = p.offsets.back() + 3;
  p.m = 520;
  p.n = 768;
  check_against_cublas(p, 33);
}

TEST(GemmCublas, ForwardDenseLarge) {
  DETMOE_REQUIRE_GPU();
  Problem p;
  p.layout = Layout::kForward;
  p.rows = 2048;
  p.offsets = {0, 2048};
  p.n = 2048;
  p.k = 4096;
  check_against_cublas(p, 34);
}

}  // namespace
}  // namespace detmoe::gemm::testing
