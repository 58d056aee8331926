// cuBLAS's transposed-A weight-gradient GEMM (dW = dyᵀ·a, K = an expert's rows) over every row
// count up to 8448 at a 64 × 64 output and over windows of row counts at the layer's output
// sizes, checked in fp64 on the GPU: which K the one-call form gets wrong (session 15: K = 4226 at
// 64 × 64 lost two rows' terms), and that the reference's form (head of whole 128-row blocks,
// then the tail with β = 1) gets none wrong.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cublas_gemm.h"
#include "support/gpu.h"
#include "wgrad_check.h"

namespace detmoe {
namespace {

struct SweepResult {
  std::vector<int64_t> failed;  // K values with at least one element out of bound
  double worst = 0;
};

std::string list(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < 24; ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  if (v.size() > 24) s += ", … (" + std::to_string(v.size()) + ")";
  return s;
}

class WgradSweep {
 public:
  WgradSweep(int64_t M, int64_t N, int64_t max_k) : M_(M), N_(N), col_step_(N >= 512 ? N / 32 : 1) {
    EXPECT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
    EXPECT_EQ(cublasCreate(&handle_), CUBLAS_STATUS_SUCCESS);
    cublasSetStream(handle_, stream_);
    EXPECT_EQ(cudaMalloc(&workspace_, 32 << 20), cudaSuccess);
    cublasSetWorkspace(handle_, workspace_, 32 << 20);  // the reference's configuration
    cublasSetMathMode(handle_,
                      static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
    cublasSetAtomicsMode(handle_, CUBLAS_ATOMICS_NOT_ALLOWED);
    EXPECT_EQ(cudaMalloc(&a_, max_k * M * 2), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&b_, max_k * N * 2), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&c_, M * N * 4), cudaSuccess);
    testing::fill_bf16(a_, max_k * M, 11, stream_);
    testing::fill_bf16(b_, max_k * N, 12, stream_);
  }
  ~WgradSweep() {
    cublasDestroy(handle_);
    cudaFree(a_);
    cudaFree(b_);
    cudaFree(c_);
    cudaFree(workspace_);
    cudaStreamDestroy(stream_);
  }
  // reference_form: split as the reference does (ref::wgrad_tail_rows); otherwise one call.
  void run(int64_t K, bool reference_form, SweepResult& r) {
    cudaMemsetAsync(c_, 0xff, M_ * N_ * 4, stream_);  // NaN poison
    const int64_t tail = reference_form ? ref::wgrad_tail_rows(M_, N_, K) : 0;
    ASSERT_EQ(testing::wgrad_gemm(handle_, a_, b_, c_, M_, N_, K, tail), CUBLAS_STATUS_SUCCESS) << "K " << K;
    double worst = 0;
    const int64_t bad = testing::count_wgrad_errors(a_, b_, c_, M_, N_, K, col_step_, -16, &worst, stream_);
    ASSERT_GE(bad, 0) << "the check failed to run at K " << K;
    if (bad > 0) r.failed.push_back(K);
    r.worst = std::max(r.worst, worst);
  }

 private:
  int64_t M_, N_;
  int64_t col_step_;  // wide outputs: 32 of their columns (a lost row touches every column)
  cudaStream_t stream_{};
  cublasHandle_t handle_{};
  void* workspace_ = nullptr;
  uint16_t *a_ = nullptr, *b_ = nullptr;
  float* c_ = nullptr;
};

void sweep(int64_t M, int64_t N, const std::vector<int64_t>& ks) {
  int64_t max_k = 1;
  for (int64_t k : ks) max_k = std::max(max_k, k);
  WgradSweep s(M, N, max_k);
  SweepResult one, split;
  for (int64_t K : ks) {
    s.run(K, false, one);
    s.run(K, true, split);
    if (::testing::Test::HasFatalFailure()) return;
  }
  std::printf("M=%lld N=%lld, %zu K values: one call failed %zu (worst %.3g × 2^-16·Σ|terms|): %s\n"
              "                     the reference's form failed %zu (worst %.3g)%s%s\n",
              static_cast<long long>(M), static_cast<long long>(N), ks.size(), one.failed.size(), one.worst,
              list(one.failed).c_str(), split.failed.size(), split.worst, split.failed.empty() ? "" : ": ",
              list(split.failed).c_str());
  ::testing::Test::RecordProperty("one_call_failures", static_cast<int>(one.failed.size()));
  EXPECT_TRUE(split.failed.empty()) << "the reference's split form failed at K = " << list(split.failed);
}

std::vector<int64_t> range(int64_t first, int64_t last, int64_t step = 1) {
  std::vector<int64_t> v;
  for (int64_t k = first; k <= last; k += step) v.push_back(k);
  return v;
}

TEST(CublasWgradSweep, EveryRowCountAt64x64) {
  DETMOE_REQUIRE_GPU();
  sweep(64, 64, range(1, 8448));
}

TEST(CublasWgradSweep, RowCountWindowsAtLayerSizes) {
  DETMOE_REQUIRE_GPU();
  std::vector<int64_t> ks = range(4096, 4352, 3);
  for (int64_t k : range(1, 400, 7)) ks.push_back(k);
  for (int64_t k : {8190, 8194, 8226, 12354, 16386, 16418, 32770, 65538}) ks.push_back(k);
  for (auto [M, N] : {std::pair<int64_t, int64_t>{128, 64}, {64, 128}, {256, 256}, {384, 192}, {1024, 512}})
    sweep(M, N, ks);
}

// Every residue mod 128 above 4096 and 2048 rows at the named shapes' per-expert outputs (where
// the reference splits only K ≡ 1, 2 mod 64: a second pass over a large C is not free).
TEST(CublasWgradSweep, EveryResidueAtNamedShapeSizes) {
  DETMOE_REQUIRE_GPU();
  std::vector<int64_t> ks = range(4097, 4224);
  for (int64_t k : range(2049, 2176)) ks.push_back(k);
  for (auto [M, N] : {std::pair<int64_t, int64_t>{2048, 768}, {1536, 2048}, {2880, 2880}, {7168, 2048}, {1024, 1536}})
    sweep(M, N, ks);
}

TEST(CublasWgradSweep, RowCountsAtNamedShapeSizes) {
  DETMOE_REQUIRE_GPU();
  // dW_down [H, F] and dW_gate|up [2F, H] of deepseek-v3 (7168, 2048) and qwen3 (2048, 768).
  const std::vector<int64_t> ks = {130, 1026, 2050, 2051, 4226, 4227, 6150, 8194};
  for (auto [M, N] : {std::pair<int64_t, int64_t>{7168, 2048}, {4096, 7168}, {2048, 768}, {1536, 2048}}) sweep(M, N, ks);
}

}  // namespace
}  // namespace detmoe
