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

// Rows of a weight-gradient GEMM (A transposed, K = an expert's or the shared expert's rows) that
// CublasGemm runs as a second call with β = 1 after the first K − tail rows: 0 for one call.
// cuBLAS 13.1.0.3 on the H200 drops one or two rows' terms in the one-call form at some K: at a
// 64 × 64 output, 65 of K = 1..8448, all K ≡ 1 or 2 (mod 64) from 2561 up (4226 is session 15's
// counterexample); at 128 × 64 … 384 × 192, K = 4225; at 256 × 256 and 1024 × 512, K = 32770 and
// 65538 (tests/reference/cublas_wgrad_sweep_test). So: every K ≡ 1 or 2 (mod 64) above 128, and
// every ragged K above 128 of an output of at most 2²⁰ elements (there the second pass over C
// costs next to nothing); the tail is K mod 128 rows, which the sweep found clean at every size.
int64_t wgrad_tail_rows(int64_t M, int64_t N, int64_t K);

class CublasGemm {
 public:
  CublasGemm() = default;
  CublasGemm(const CublasGemm&) = delete;
  CublasGemm& operator=(const CublasGemm&) = delete;
  ~CublasGemm();

  // On the current device. split_scratch_elems: fp32 elements of the scratch that a split
  // weight-gradient GEMM with bf16 output accumulates in before rounding (its M·N at most; 0
  // when no bf16 weight gradient is computed).
  Status init(cudaStream_t stream, int64_t workspace_bytes, int64_t split_scratch_elems = 0);

  // Runs every problem (same flags and output type) in list order: one cublasGemmEx each, or
  // (grouped mode, bf16 output) one cublasGemmGroupedBatchedEx with a group per problem. Weight
  // gradients (trans_a, not trans_b) with wgrad_tail_rows > 0 run as two calls each (head, then
  // tail with β = 1; bf16 output through the fp32 scratch). Problems with an empty dimension are
  // refused: the caller zero-fills instead (an expert without rows).
  Status run(ReferenceGemm mode, bool trans_a, bool trans_b, GemmOut out, std::span<const GemmProblem> problems,
             const char* what);

 private:
  Status run_one(bool trans_a, bool trans_b, GemmOut out, const GemmProblem& p, const char* what);
  Status run_split(GemmOut out, const GemmProblem& p, int64_t tail, const char* what);
  Status gemm_ex(bool trans_a, bool trans_b, const GemmProblem& p, float beta, cudaDataType_t c_type, const char* what);
  Status run_grouped(bool trans_a, bool trans_b, GemmOut out, std::span<const GemmProblem> problems, const char* what);

  cublasHandle_t handle_ = nullptr;
  cudaStream_t stream_ = nullptr;
  DeviceBuffer workspace_;
  DeviceBuffer pointer_table_;  // grouped mode: device arrays of A, B, C pointers
  DeviceBuffer split_scratch_;  // fp32 accumulation of a split bf16 weight gradient
  int64_t split_scratch_elems_ = 0;
};

}  // namespace detmoe::ref
