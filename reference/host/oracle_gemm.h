// The oracle's one matrix product, in fp64 with a canonical summation order.
//
// Every output element is the plain left-to-right sum c = ((c0 + a0·b0) + a1·b1) + … over
// p = 0..K−1, each product rounded to fp64 before the add (no fused multiply-add; the oracle
// is built with -ffp-contract=off). That order is a function of the operands only: blocking,
// vector width and threads change speed, never bits, and a naive triple loop reproduces the
// result exactly (tests/reference/oracle_gemm_test.cpp checks it).
#pragma once

#include <cstdint>

namespace detmoe::oracle_detail {

// Element (i, p) is data[i·row_stride + p·col_stride]: any row-major matrix or its transpose.
struct StridedMatrix {
  const double* data = nullptr;
  int64_t row_stride = 0;
  int64_t col_stride = 0;
  double at(int64_t i, int64_t p) const { return data[i * row_stride + p * col_stride]; }
  StridedMatrix transposed() const { return {data, col_stride, row_stride}; }
};

// C[i, j] = (accumulate ? C[i, j] : 0) + Σ_{p=0..K−1} A(i, p)·B(p, j), in p order.
// C is row-major [M, N] with row pitch ldc. threads: 0 = hardware concurrency; small products
// run on the calling thread.
void gemm_fp64(int64_t M, int64_t N, int64_t K, StridedMatrix A, StridedMatrix B, double* C, int64_t ldc,
               bool accumulate, int threads);

}  // namespace detmoe::oracle_detail
