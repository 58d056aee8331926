#include "cublas_gemm.h"

#include <fmt/format.h>

#include <vector>

#include "glue_kernels.h"
#include "pointer_table.h"

namespace detmoe::ref {

Status cublas_status(cublasStatus_t s, const char* call) {
  if (s == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return {ErrorCode::kCublasError, fmt::format("{} failed: {} ({})", call, cublasGetStatusName(s), cublasGetStatusString(s))};
}

#define DETMOE_CUBLAS_RETURN(call) DETMOE_RETURN_IF_ERROR(cublas_status((call), #call))

CublasGemm::~CublasGemm() {
  if (handle_ != nullptr) cublasDestroy(handle_);
}

int64_t wgrad_tail_rows(int64_t M, int64_t N, int64_t K) {
  if (K <= 128 || K % 128 == 0) return 0;
  const bool failing_residue = K % 64 == 1 || K % 64 == 2;
  const bool small_output = M * N <= (int64_t{1} << 20);
  return failing_residue || small_output ? K % 128 : 0;
}

Status CublasGemm::init(cudaStream_t stream, int64_t workspace_bytes, int64_t split_scratch_elems) {
  if (workspace_bytes < 0) return invalid_argument(fmt::format("cublas_workspace_bytes = {} must be >= 0", workspace_bytes));
  if (split_scratch_elems < 0) return invalid_argument(fmt::format("split_scratch_elems = {} must be >= 0", split_scratch_elems));
  split_scratch_elems_ = split_scratch_elems;
  if (split_scratch_elems > 0)
    DETMOE_RETURN_IF_ERROR(split_scratch_.allocate(static_cast<size_t>(split_scratch_elems) * sizeof(float),
                                                   "the split weight-gradient scratch"));
  stream_ = stream;
  DETMOE_CUBLAS_RETURN(cublasCreate(&handle_));
  DETMOE_CUBLAS_RETURN(cublasSetStream(handle_, stream));
  DETMOE_RETURN_IF_ERROR(workspace_.allocate(static_cast<size_t>(workspace_bytes), "the cuBLAS workspace"));
  DETMOE_CUBLAS_RETURN(cublasSetWorkspace(handle_, workspace_.get(), static_cast<size_t>(workspace_bytes)));
  DETMOE_CUBLAS_RETURN(cublasSetMathMode(
      handle_, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
  DETMOE_CUBLAS_RETURN(cublasSetAtomicsMode(handle_, CUBLAS_ATOMICS_NOT_ALLOWED));
  DETMOE_CUBLAS_RETURN(cublasSetPointerMode(handle_, CUBLAS_POINTER_MODE_HOST));
  return pointer_table_.allocate(3 * kMaxTablePointers * sizeof(void*), "the grouped-GEMM pointer table");
}

// Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ, and a row-major matrix read as
// column-major is its transpose: so cuBLAS gets (B, A) swapped, the flags unchanged, m = N, n = M.
Status CublasGemm::gemm_ex(bool trans_a, bool trans_b, const GemmProblem& p, float beta, cudaDataType_t c_type,
                           const char* what) {
  const float alpha = 1.0f;
  const cublasStatus_t s = cublasGemmEx(
      handle_, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(p.N),
      static_cast<int>(p.M), static_cast<int>(p.K), &alpha, p.B, CUDA_R_16BF, static_cast<int>(p.ldb), p.A, CUDA_R_16BF,
      static_cast<int>(p.lda), &beta, p.C, c_type, static_cast<int>(p.ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (s != CUBLAS_STATUS_SUCCESS)
    return cublas_status(s, fmt::format("cublasGemmEx ({}: M={} N={} K={})", what, p.M, p.N, p.K).c_str());
  return Status::Ok();
}

namespace {

// The tail rows a problem is split at (wgrad_tail_rows), 0 for one call: only weight gradients
// (A transposed, not B) are split.
int64_t split_tail(bool trans_a, bool trans_b, const GemmProblem& p) {
  return trans_a && !trans_b ? wgrad_tail_rows(p.M, p.N, p.K) : 0;
}

}  // namespace

Status CublasGemm::run_one(bool trans_a, bool trans_b, GemmOut out, const GemmProblem& p, const char* what) {
  if (const int64_t tail = split_tail(trans_a, trans_b, p); tail > 0) return run_split(out, p, tail, what);
  return gemm_ex(trans_a, trans_b, p, 0.0f, out == GemmOut::kBF16 ? CUDA_R_16BF : CUDA_R_32F, what);
}

// C = A[0:head]ᵀ·B[0:head], then C += A[head:K]ᵀ·B[head:K] (A is [K, M], B is [K, N], row major),
// in fp32: into C itself, or into the scratch and rounded once to bf16 (the contract's one rounding
// of the fp32 sum).
Status CublasGemm::run_split(GemmOut out, const GemmProblem& p, int64_t tail, const char* what) {
  const int64_t head = p.K - tail;
  GemmProblem first = p, second = p;
  first.K = head;
  second.K = tail;
  second.A = static_cast<const uint16_t*>(p.A) + head * p.lda;
  second.B = static_cast<const uint16_t*>(p.B) + head * p.ldb;
  if (out == GemmOut::kBF16) {
    if (p.M * p.N > split_scratch_elems_)
      return Status(ErrorCode::kInternal,
                    fmt::format("{}: a split bf16 weight gradient of M={} N={} needs {} fp32 scratch elements, the "
                                "handle has {}",
                                what, p.M, p.N, p.M * p.N, split_scratch_elems_));
    first.C = second.C = split_scratch_.get();
    first.ldc = second.ldc = p.N;
  }
  DETMOE_RETURN_IF_ERROR(gemm_ex(true, false, first, 0.0f, CUDA_R_32F, what));
  DETMOE_RETURN_IF_ERROR(gemm_ex(true, false, second, 1.0f, CUDA_R_32F, what));
  if (out == GemmOut::kBF16)
    return launch_round_to_bf16(split_scratch_.as<float>(), p.M, p.N, static_cast<uint16_t*>(p.C), p.ldc, stream_);
  return Status::Ok();
}

Status CublasGemm::run_grouped(bool trans_a, bool trans_b, GemmOut out, std::span<const GemmProblem> problems,
                               const char* what) {
  const int n = static_cast<int>(problems.size());
  std::vector<cublasOperation_t> ta(n, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N), tb(n, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N);
  std::vector<int> m(n), nn(n), k(n), lda(n), ldb(n), ldc(n), sizes(n, 1);
  std::vector<float> alpha(n, 1.0f), beta(n, 0.0f);
  PointerTableArgs table;
  table.count = 3 * n;
  for (int i = 0; i < n; ++i) {
    const GemmProblem& p = problems[i];
    m[i] = static_cast<int>(p.N);
    nn[i] = static_cast<int>(p.M);
    k[i] = static_cast<int>(p.K);
    lda[i] = static_cast<int>(p.ldb);
    ldb[i] = static_cast<int>(p.lda);
    ldc[i] = static_cast<int>(p.ldc);
    table.pointers[i] = p.B;
    table.pointers[n + i] = p.A;
    table.pointers[2 * n + i] = p.C;
  }
  const void** device_table = pointer_table_.as<const void*>();
  DETMOE_RETURN_IF_ERROR(launch_write_pointer_table(table, device_table, stream_));
  const cublasStatus_t s = cublasGemmGroupedBatchedEx(
      handle_, ta.data(), tb.data(), m.data(), nn.data(), k.data(), alpha.data(), device_table, CUDA_R_16BF, lda.data(),
      device_table + n, CUDA_R_16BF, ldb.data(), beta.data(), const_cast<void* const*>(device_table + 2 * n),
      out == GemmOut::kBF16 ? CUDA_R_16BF : CUDA_R_32F, ldc.data(), n, sizes.data(), CUBLAS_COMPUTE_32F);
  if (s != CUBLAS_STATUS_SUCCESS)
    return cublas_status(s, fmt::format("cublasGemmGroupedBatchedEx ({}: {} groups)", what, n).c_str());
  return Status::Ok();
}

Status CublasGemm::run(ReferenceGemm mode, bool trans_a, bool trans_b, GemmOut out,
                       std::span<const GemmProblem> problems, const char* what) {
  for (const GemmProblem& p : problems)
    if (p.M <= 0 || p.N <= 0 || p.K <= 0)
      return Status(ErrorCode::kInternal, fmt::format("{}: GEMM with an empty dimension M={} N={} K={}", what, p.M, p.N, p.K));
  if (problems.empty()) return Status::Ok();
  // cublasGemmGroupedBatchedEx documents bf16 → bf16 with fp32 compute; the fp32-output GEMMs
  // (da, fp32 weight gradients) stay per expert in grouped mode.
  if (mode == ReferenceGemm::kGroupedBatched && out == GemmOut::kBF16) {
    // Split weight gradients run on their own, the rest grouped.
    std::vector<GemmProblem> grouped;
    for (const GemmProblem& p : problems) {
      if (const int64_t tail = split_tail(trans_a, trans_b, p); tail > 0)
        DETMOE_RETURN_IF_ERROR(run_split(out, p, tail, what));
      else
        grouped.push_back(p);
    }
    const std::span<const GemmProblem> rest(grouped);
    for (size_t first = 0; first < rest.size(); first += kMaxTablePointers) {
      const size_t count = std::min<size_t>(kMaxTablePointers, rest.size() - first);
      DETMOE_RETURN_IF_ERROR(run_grouped(trans_a, trans_b, out, rest.subspan(first, count), what));
    }
    return Status::Ok();
  }
  for (const GemmProblem& p : problems) DETMOE_RETURN_IF_ERROR(run_one(trans_a, trans_b, out, p, what));
  return Status::Ok();
}

}  // namespace detmoe::ref
