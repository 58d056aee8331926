#include "oracle_mlp.h"

#include <cmath>

#include "detmoe/tensor.h"
#include "oracle_gemm.h"
#include "oracle_parallel.h"

namespace detmoe::oracle_detail {

double Rounding::bf16(double v) const { return exact ? v : round_to_bf16(v); }
double Rounding::fp32(double v) const { return exact ? v : round_to_fp32(v); }
double Rounding::weight_grad(double v) const {
  if (exact) return v;
  return grad == GradPrecision::kFP32 ? round_to_fp32(v) : round_to_bf16(v);
}

namespace {

// σ(g) = 1/(1 + e^−g); exp overflows to inf for very negative g, giving σ = 0 as it should.
double sigmoid(double g) { return 1.0 / (1.0 + std::exp(-g)); }

void round_in_place(double* v, int64_t n, double (Rounding::*round)(double) const, const Rounding& r, int threads) {
  parallel_rows(n, 1, threads, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) v[i] = (r.*round)(v[i]);
  });
}

void round_in_place(std::vector<double>& v, double (Rounding::*round)(double) const, const Rounding& r, int threads) {
  round_in_place(v.data(), static_cast<int64_t>(v.size()), round, r, threads);
}

void abs_copy(const double* v, int64_t n, std::vector<double>& dst, int threads) {
  dst.resize(n);
  parallel_rows(n, 1, threads, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) dst[i] = std::fabs(v[i]);
  });
}

// Σ_rows |A|·|B| for each weight gradient: the same products on absolute values, summed in the
// same row order, so M ≥ |dW| before rounding and M = |dW| when all terms share a sign. A GPU
// path's error in dW is a sum of per-term errors, each a few bf16 ulps of its |term|, which M
// bounds where the rms of the whole tensor does not (docs/NUMERICS.md §4).
void weight_grad_magnitudes(const double* x, const MlpActivations& act, const double* dy, int64_t H, int64_t F,
                            int threads, MlpScratch& s, const WeightGradients& dw) {
  const int64_t rows = act.rows;
  abs_copy(x, rows * H, s.abs_x, threads);
  abs_copy(dy, rows * H, s.abs_dy, threads);
  abs_copy(act.a.data(), rows * F, s.abs_a, threads);
  abs_copy(s.dh.data(), rows * 2 * F, s.abs_dh, threads);
  gemm_fp64(H, F, rows, {s.abs_dy.data(), 1, H}, {s.abs_a.data(), F, 1}, dw.mag_down, F, false, threads);
  gemm_fp64(F, H, rows, {s.abs_dh.data(), 1, 2 * F}, {s.abs_x.data(), H, 1}, dw.mag_gate, H, false, threads);
  gemm_fp64(F, H, rows, {s.abs_dh.data() + F, 1, 2 * F}, {s.abs_x.data(), H, 1}, dw.mag_up, H, false, threads);
}

}  // namespace

void mlp_forward(const double* x, int64_t rows, const MlpWeights& w, const Rounding& r, int threads,
                 MlpActivations& act) {
  const int64_t H = w.H, F = w.F;
  act.rows = rows;
  act.g.resize(rows * F);
  act.u.resize(rows * F);
  act.a.resize(rows * F);
  act.y.resize(rows * H);
  const StridedMatrix xm{x, H, 1};
  // h = x·Wᵀ: B(p = h, j = f) = W[f, h].
  gemm_fp64(rows, F, H, xm, {w.w_gate, 1, H}, act.g.data(), F, false, threads);
  gemm_fp64(rows, F, H, xm, {w.w_up, 1, H}, act.u.data(), F, false, threads);
  round_in_place(act.g, &Rounding::bf16, r, threads);
  round_in_place(act.u, &Rounding::bf16, r, threads);
  parallel_rows(rows * F, 16, threads, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const double g = act.g[i];
      act.a[i] = r.bf16(g * sigmoid(g) * act.u[i]);
    }
  });
  gemm_fp64(rows, H, F, {act.a.data(), F, 1}, {w.w_down, 1, F}, act.y.data(), H, false, threads);
  round_in_place(act.y, &Rounding::bf16, r, threads);
}

void mlp_backward(const double* x, const MlpActivations& act, const double* dy, const MlpWeights& w, const Rounding& r,
                  int threads, MlpScratch& scratch, double* dx, const WeightGradients& dw) {
  const int64_t H = w.H, F = w.F, rows = act.rows;
  // da = dy·W_down stays unrounded: it only feeds the elementwise dSwiGLU.
  std::vector<double>& da = scratch.da;
  da.resize(rows * F);
  gemm_fp64(rows, F, H, {dy, H, 1}, {w.w_down, F, 1}, da.data(), F, false, threads);

  // dh = [dg | du] per row, a GEMM operand, hence bf16.
  std::vector<double>& dh = scratch.dh;
  dh.resize(rows * 2 * F);
  parallel_rows(rows, 16 * F, threads, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      for (int64_t f = 0; f < F; ++f) {
        const double g = act.g[i * F + f], u = act.u[i * F + f], d = da[i * F + f];
        const double s = sigmoid(g);
        dh[i * 2 * F + f] = r.bf16(d * u * s * (1.0 + g * (1.0 - s)));
        dh[i * 2 * F + F + f] = r.bf16(d * (g * s));
      }
    }
  });

  // dx = dg·W_gate + du·W_up: one sum over p = [gate f = 0..F−1, then up f = 0..F−1].
  gemm_fp64(rows, H, F, {dh.data(), 2 * F, 1}, {w.w_gate, H, 1}, dx, H, false, threads);
  gemm_fp64(rows, H, F, {dh.data() + F, 2 * F, 1}, {w.w_up, H, 1}, dx, H, true, threads);
  round_in_place(dx, rows * H, &Rounding::bf16, r, threads);

  // Weight gradients: sums over rows (K = rows), parallel over output rows.
  gemm_fp64(H, F, rows, {dy, 1, H}, {act.a.data(), F, 1}, dw.dw_down, F, false, threads);
  gemm_fp64(F, H, rows, {dh.data(), 1, 2 * F}, {x, H, 1}, dw.dw_gate, H, false, threads);
  gemm_fp64(F, H, rows, {dh.data() + F, 1, 2 * F}, {x, H, 1}, dw.dw_up, H, false, threads);
  round_in_place(dw.dw_down, H * F, &Rounding::weight_grad, r, threads);
  round_in_place(dw.dw_gate, F * H, &Rounding::weight_grad, r, threads);
  round_in_place(dw.dw_up, F * H, &Rounding::weight_grad, r, threads);
  if (dw.mag_gate && dw.mag_up && dw.mag_down) weight_grad_magnitudes(x, act, dy, H, F, threads, scratch, dw);
}

}  // namespace detmoe::oracle_detail
