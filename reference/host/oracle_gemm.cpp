#include "oracle_gemm.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "oracle_parallel.h"

namespace detmoe::oracle_detail {
namespace {

// Goto-style blocking: a kMR×kNR register tile runs over a kKC slab of K (A panel in L1/L2,
// B slab in L2/L3). Splitting K into slabs stores and reloads the fp64 partial sums exactly,
// so the sum is still the one left-to-right sum over p.
constexpr int64_t kMR = 4;
constexpr int64_t kNR = 8;
constexpr int64_t kKC = 256;
constexpr int64_t kMC = 64;
constexpr int64_t kNC = 1024;

using v4d = double __attribute__((vector_size(32)));

struct GemmArgs {
  int64_t M, N, K;
  StridedMatrix A, B;
  double* C;
  int64_t ldc;
  bool accumulate;
};

// B(pc.., jc..) as ceil(nc/kNR) panels, each kc rows of kNR values (columns past nc are zero).
// The inner loop walks B's contiguous dimension: strided walks thrash the cache sets.
[[gnu::always_inline]] inline void pack_b(const StridedMatrix& B, int64_t pc, int64_t kc, int64_t jc, int64_t nc,
                                          double* dst) {
  for (int64_t q = 0; q < nc; q += kNR) {
    const int64_t nr = std::min(kNR, nc - q);
    double* panel = dst + q * kc;
    const double* src = B.data + pc * B.row_stride + (jc + q) * B.col_stride;
    if (B.col_stride <= B.row_stride) {
      for (int64_t p = 0; p < kc; ++p)
        for (int64_t j = 0; j < kNR; ++j) panel[p * kNR + j] = j < nr ? src[p * B.row_stride + j * B.col_stride] : 0.0;
    } else {
      for (int64_t j = 0; j < kNR; ++j)
        for (int64_t p = 0; p < kc; ++p) panel[p * kNR + j] = j < nr ? src[p * B.row_stride + j * B.col_stride] : 0.0;
    }
  }
}

// A(ic.., pc..) as ceil(mc/kMR) panels, each kc columns of kMR values (rows past mc are zero).
[[gnu::always_inline]] inline void pack_a(const StridedMatrix& A, int64_t ic, int64_t mc, int64_t pc, int64_t kc,
                                          double* dst) {
  for (int64_t q = 0; q < mc; q += kMR) {
    const int64_t mr = std::min(kMR, mc - q);
    double* panel = dst + q * kc;
    const double* src = A.data + (ic + q) * A.row_stride + pc * A.col_stride;
    if (A.row_stride <= A.col_stride) {
      for (int64_t p = 0; p < kc; ++p)
        for (int64_t i = 0; i < kMR; ++i) panel[p * kMR + i] = i < mr ? src[i * A.row_stride + p * A.col_stride] : 0.0;
    } else {
      for (int64_t i = 0; i < kMR; ++i)
        for (int64_t p = 0; p < kc; ++p) panel[p * kMR + i] = i < mr ? src[i * A.row_stride + p * A.col_stride] : 0.0;
    }
  }
}

// tile[i][j] += Σ_p ap[p][i]·bp[p][j], p in order: one mul and one add per term.
[[gnu::always_inline]] inline void micro_kernel(int64_t kc, const double* ap, const double* bp, double* tile) {
  v4d acc[kMR][2];
  for (int64_t i = 0; i < kMR; ++i) {
    std::memcpy(&acc[i][0], tile + i * kNR, sizeof(v4d));
    std::memcpy(&acc[i][1], tile + i * kNR + 4, sizeof(v4d));
  }
  for (int64_t p = 0; p < kc; ++p) {
    v4d b0, b1;
    std::memcpy(&b0, bp + p * kNR, sizeof(v4d));
    std::memcpy(&b1, bp + p * kNR + 4, sizeof(v4d));
    for (int64_t i = 0; i < kMR; ++i) {
      const double s = ap[p * kMR + i];
      const v4d a = {s, s, s, s};
      acc[i][0] += a * b0;
      acc[i][1] += a * b1;
    }
  }
  for (int64_t i = 0; i < kMR; ++i) {
    std::memcpy(tile + i * kNR, &acc[i][0], sizeof(v4d));
    std::memcpy(tile + i * kNR + 4, &acc[i][1], sizeof(v4d));
  }
}

// The block [m0, m1) × [n0, n1) of C. Compiled for AVX2 and for baseline x86-64; both give the
// same bits (same operations in the same order, only the vector width differs).
__attribute__((target_clones("avx2", "default"))) void gemm_block(const GemmArgs& g, int64_t m0, int64_t m1, int64_t n0,
                                                                  int64_t n1, double* apack, double* bpack) {
  alignas(32) double tile[kMR * kNR];
  for (int64_t jc = n0; jc < n1; jc += kNC) {
    const int64_t nc = std::min(kNC, n1 - jc);
    for (int64_t pc = 0; pc < g.K; pc += kKC) {
      const int64_t kc = std::min(kKC, g.K - pc);
      const bool load_c = pc > 0 || g.accumulate;
      pack_b(g.B, pc, kc, jc, nc, bpack);
      for (int64_t ic = m0; ic < m1; ic += kMC) {
        const int64_t mc = std::min(kMC, m1 - ic);
        pack_a(g.A, ic, mc, pc, kc, apack);
        for (int64_t jr = 0; jr < nc; jr += kNR) {
          const int64_t nr = std::min(kNR, nc - jr);
          for (int64_t ir = 0; ir < mc; ir += kMR) {
            const int64_t mr = std::min(kMR, mc - ir);
            double* c = g.C + (ic + ir) * g.ldc + (jc + jr);
            for (int64_t i = 0; i < kMR; ++i)
              for (int64_t j = 0; j < kNR; ++j)
                tile[i * kNR + j] = (load_c && i < mr && j < nr) ? c[i * g.ldc + j] : 0.0;
            micro_kernel(kc, apack + ir * kc, bpack + jr * kc, tile);
            for (int64_t i = 0; i < mr; ++i)
              for (int64_t j = 0; j < nr; ++j) c[i * g.ldc + j] = tile[i * kNR + j];
          }
        }
      }
    }
  }
}

}  // namespace

void gemm_fp64(int64_t M, int64_t N, int64_t K, StridedMatrix A, StridedMatrix B, double* C, int64_t ldc,
               bool accumulate, int threads) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    if (!accumulate)
      for (int64_t i = 0; i < M; ++i) std::fill(C + i * ldc, C + i * ldc + N, 0.0);
    return;
  }
  const GemmArgs g{M, N, K, A, B, C, ldc, accumulate};

  // Below ~1M multiply-adds a thread costs more than it saves.
  constexpr double kMinWorkPerThread = double(1 << 20);
  const double work = double(M) * double(N) * double(K);
  int workers = static_cast<int>(std::min<double>(resolve_threads(threads), std::max(1.0, work / kMinWorkPerThread)));
  // Split the longer side in whole register tiles: rows when there are enough, else columns.
  const int64_t row_tiles = (M + kMR - 1) / kMR;
  const int64_t col_tiles = (N + kNR - 1) / kNR;
  const bool split_rows = row_tiles >= 4 * workers || row_tiles >= col_tiles;
  workers = static_cast<int>(std::min<int64_t>(workers, split_rows ? row_tiles : col_tiles));

  // Pack buffers sized to this product: small products must not pay for page-faulting
  // full-size blocks on every call.
  const int64_t kc_max = std::min(kKC, K);
  const int64_t apack_size = std::min(kMC, (M + kMR - 1) / kMR * kMR) * kc_max;
  const int64_t bpack_size = std::min(kNC, (N + kNR - 1) / kNR * kNR) * kc_max;
  std::vector<double> apack(static_cast<size_t>(apack_size) * workers);
  std::vector<double> bpack(static_cast<size_t>(bpack_size) * workers);

  parallel_ranges(split_rows ? row_tiles : col_tiles, workers, [&](int w, int64_t b, int64_t e) {
    double* ap = apack.data() + w * apack_size;
    double* bp = bpack.data() + w * bpack_size;
    if (split_rows)
      gemm_block(g, b * kMR, std::min(M, e * kMR), 0, N, ap, bp);
    else
      gemm_block(g, 0, M, b * kNR, std::min(N, e * kNR), ap, bp);
  });
}

}  // namespace detmoe::oracle_detail
