// GPU helpers of the cuBLAS weight-gradient sweep: seeded bf16 operands, cuBLAS's transposed-A
// GEMM as the reference calls it (one call, or the K range cut into a head and a tail), and an
// fp64 check of C[M, N] = A[K, M]ᵀ·B[K, N] on the GPU (a sweep of thousands of K is too slow on
// the host).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace detmoe::testing {

// p[0, n) = bf16 values in [-1, 1) from (seed, index).
void fill_bf16(uint16_t* p, int64_t n, uint64_t seed, cudaStream_t stream);

// C = Aᵀ·B through cublasGemmEx (bf16 in, fp32 out, CUBLAS_COMPUTE_32F), A [K, M] and B [K, N] row
// major. tail_rows > 0: two calls, the first K − tail_rows rows (β = 0), then the last tail_rows
// (β = 1), the reference's way around the one-call failures.
cublasStatus_t wgrad_gemm(cublasHandle_t handle, const uint16_t* A, const uint16_t* B, float* C, int64_t M, int64_t N,
                          int64_t K, int64_t tail_rows);

// How many elements of C (in the columns 0, col_step, 2·col_step, …) miss the fp64 Aᵀ·B by more than 2^log2_rel · Σ|terms|; *worst gets the
// largest |error| / (2^log2_rel · Σ|terms|). Synchronizes the stream.
int64_t count_wgrad_errors(const uint16_t* A, const uint16_t* B, const float* C, int64_t M, int64_t N, int64_t K,
                           int64_t col_step, int log2_rel, double* worst, cudaStream_t stream);

}  // namespace detmoe::testing
