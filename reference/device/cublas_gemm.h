// cuBLAS in its reproducible configuration, behind row-major GEMM calls.
//
// One handle per rank, bound to the rank's one stream, with a fixed workspace
// (cublasSetWorkspace), atomics not allowed, and reduced-precision reductions disallowed so a
// split-K never rounds partial sums to bf16: each output is bf16(fp32 accumulation) or the
// fp32 accumulation itself — the contract's rounding points. cuBLAS then gives the same bits on
// every run for the same (M, N, K, layout) on the same GPU model and SM count.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>

#include "detmoe/reference_layer.h"
#include "detmoe/status.h"
#include "device_buffer.h"

namespace detmoe::ref {

enum class GemmOut { kBF16, kFP32 };

// Row-major C[M, N] = op(A)[M, K]·op(B)[K, N] with op(X) = X or Xᵀ per the call's flags; A and
// B are bf16 with leading dimensions lda / ldb (elements, of the stored matrix); C has ldc.
struct GemmProblem {
  int64_t M = 0, N = 0, K = 0;
  const void* A = nullptr;
  int64_t lda = 0;
  const void* B = nullptr;
  int64_t ldb = 0;
  void* C = nullptr;
  int64_t ldc = 0;
};

Status cublas_status(cublasStatus_t s, const char* call);

class CublasGemm {
 public:
  CublasGemm() = default;
  CublasGemm(const CublasGemm&) = delete;
  CublasGemm& operator=(const CublasGemm&) = delete;
  ~CublasGemm();

  // On the current device.
  Status init(cudaStream_t stream, int64_t workspace_bytes);

  // Runs every problem (same flags and output type) in list order: one cublasGemmEx each, or
  // (grouped mode, bf16 output) one cublasGemmGroupedBatchedEx with a group per problem. Problems
  // with an empty dimension are refused:
  // the caller zero-fills instead (an expert without rows).
  Status run(ReferenceGemm mode, bool trans_a, bool trans_b, GemmOut out, std::span<const GemmProblem> problems,
             const char* what);

 private:
  Status run_one(bool trans_a, bool trans_b, GemmOut out, const GemmProblem& p, const char* what);
  Status run_grouped(bool trans_a, bool trans_b, GemmOut out, std::span<const GemmProblem> problems, const char* what);

  cublasHandle_t handle_ = nullptr;
  cudaStream_t stream_ = nullptr;
  DeviceBuffer workspace_;
  DeviceBuffer pointer_table_;  // grouped mode: device arrays of A, B, C pointers
};

}  // namespace detmoe::ref
