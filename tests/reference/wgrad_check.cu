// GPU helpers of the cuBLAS weight-gradient sweep (wgrad_check.h).
#include <cmath>

#include "detmoe/numeric.h"
#include "wgrad_check.h"

namespace detmoe::testing {
namespace {

__global__ void fill_kernel(uint16_t* p, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint64_t z = (seed + 1) * 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(i) * 0xBF58476D1CE4E5B9ull);
    z = (z ^ (z >> 31)) * 0x94D049BB133111EBull;
    z ^= z >> 29;
    p[i] = bf16_bits_from_float(static_cast<float>(static_cast<int64_t>(z >> 40) - (1 << 23)) / (1 << 23));
  }
}

// One thread per output; bad[0] counts misses, bad[1] holds the worst ratio's bits (ratios ≥ 0
// order like their bits as unsigned 64-bit integers).
__global__ void check_kernel(const uint16_t* A, const uint16_t* B, const float* C, int64_t M, int64_t N, int64_t K,
                             int64_t col_step, double rel, unsigned long long* bad) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x, j = blockIdx.y * col_step;
  if (i >= M) return;
  double sum = 0, mag = 0;
  for (int64_t r = 0; r < K; ++r) {
    const double t = static_cast<double>(float_from_bf16_bits(A[r * M + i])) * float_from_bf16_bits(B[r * N + j]);
    sum += t;
    mag += fabs(t);
  }
  double ratio = fabs(static_cast<double>(C[i * N + j]) - sum) / (rel * mag + 1e-300);
  if (!(ratio <= 1.0)) atomicAdd(bad, 1ull);
  if (isnan(ratio)) ratio = INFINITY;
  atomicMax(bad + 1, static_cast<unsigned long long>(__double_as_longlong(ratio)));
}

}  // namespace

void fill_bf16(uint16_t* p, int64_t n, uint64_t seed, cudaStream_t stream) {
  fill_kernel<<<264, 256, 0, stream>>>(p, n, seed);
}

cublasStatus_t wgrad_gemm(cublasHandle_t handle, const uint16_t* A, const uint16_t* B, float* C, int64_t M, int64_t N,
                          int64_t K, int64_t tail_rows) {
  // Row-major C = Aᵀ·B is column-major Cᵀ = Bᵀ·A: cuBLAS gets (B, A), m = N, n = M, A transposed.
  const int64_t head = K - tail_rows;
  const float one = 1.0f, zero = 0.0f;
  cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
  if (head > 0)
    s = cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_T, static_cast<int>(N), static_cast<int>(M), static_cast<int>(head),
                     &one, B, CUDA_R_16BF, static_cast<int>(N), A, CUDA_R_16BF, static_cast<int>(M), &zero, C, CUDA_R_32F,
                     static_cast<int>(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (s != CUBLAS_STATUS_SUCCESS || tail_rows == 0) return s;
  return cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_T, static_cast<int>(N), static_cast<int>(M),
                      static_cast<int>(tail_rows), &one, B + head * N, CUDA_R_16BF, static_cast<int>(N), A + head * M,
                      CUDA_R_16BF, static_cast<int>(M), head > 0 ? &one : &zero, C, CUDA_R_32F, static_cast<int>(N),
                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

int64_t count_wgrad_errors(const uint16_t* A, const uint16_t* B, const float* C, int64_t M, int64_t N, int64_t K,
                           int64_t col_step, int log2_rel, double* worst, cudaStream_t stream) {
  unsigned long long* bad = nullptr;
  if (cudaMallocAsync(&bad, 2 * sizeof(unsigned long long), stream) != cudaSuccess) return -1;
  cudaMemsetAsync(bad, 0, 2 * sizeof(unsigned long long), stream);
  check_kernel<<<dim3(static_cast<unsigned>((M + 127) / 128), static_cast<unsigned>((N + col_step - 1) / col_step)), 128, 0, stream>>>(
      A, B, C, M, N, K, col_step, std::ldexp(1.0, log2_rel), bad);
  unsigned long long host[2] = {0, 0};
  cudaMemcpyAsync(host, bad, sizeof host, cudaMemcpyDeviceToHost, stream);
  cudaFreeAsync(bad, stream);
  if (cudaStreamSynchronize(stream) != cudaSuccess) return -1;
  double w;
  static_assert(sizeof w == sizeof host[1]);
  __builtin_memcpy(&w, &host[1], sizeof w);
  *worst = w;
  return static_cast<int64_t>(host[0]);
}

}  // namespace detmoe::testing
