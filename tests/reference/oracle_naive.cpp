#include "oracle_naive.h"

#include <cmath>
#include <vector>

namespace detmoe::testing {
namespace {

double sigmoid(double g) { return 1.0 / (1.0 + std::exp(-g)); }

struct Rounder {
  bool exact;
  GradPrecision grad;
  double bf16(double v) const { return exact ? v : round_to_bf16(v); }
  double fp32(double v) const { return exact ? v : round_to_fp32(v); }
  double weight_grad(double v) const {
    return exact ? v : grad == GradPrecision::kFP32 ? round_to_fp32(v) : round_to_bf16(v);
  }
};

// One token through one MLP; keeps g, u, a for backward.
struct TokenMlp {
  std::vector<double> g, u, a, y;
};

TokenMlp forward_token(const double* x, const double* wg, const double* wu, const double* wd, int64_t H, int64_t F,
                       const Rounder& r) {
  TokenMlp m{std::vector<double>(F), std::vector<double>(F), std::vector<double>(F), std::vector<double>(H)};
  for (int64_t f = 0; f < F; ++f) {
    double gs = 0.0, us = 0.0;
    for (int64_t h = 0; h < H; ++h) gs += x[h] * wg[f * H + h];
    for (int64_t h = 0; h < H; ++h) us += x[h] * wu[f * H + h];
    m.g[f] = r.bf16(gs);
    m.u[f] = r.bf16(us);
    m.a[f] = r.bf16(m.g[f] * sigmoid(m.g[f]) * m.u[f]);
  }
  for (int64_t h = 0; h < H; ++h) {
    double ys = 0.0;
    for (int64_t f = 0; f < F; ++f) ys += m.a[f] * wd[h * F + f];
    m.y[h] = r.bf16(ys);
  }
  return m;
}

// Adds this token's terms to the weight-gradient sums (callers go in token order) and
// writes its input-gradient row.
void backward_token(const double* x, const TokenMlp& m, const double* dy, const double* wg, const double* wu,
                    const double* wd, int64_t H, int64_t F, const Rounder& r, double* dx, double* dwg, double* dwu,
                    double* dwd) {
  std::vector<double> dg(F), du(F);
  for (int64_t f = 0; f < F; ++f) {
    double da = 0.0;
    for (int64_t h = 0; h < H; ++h) da += dy[h] * wd[h * F + f];
    const double g = m.g[f], s = sigmoid(g);
    dg[f] = r.bf16(da * m.u[f] * s * (1.0 + g * (1.0 - s)));
    du[f] = r.bf16(da * (g * s));
  }
  for (int64_t h = 0; h < H; ++h) {
    double acc = 0.0;
    for (int64_t f = 0; f < F; ++f) acc += dg[f] * wg[f * H + h];
    for (int64_t f = 0; f < F; ++f) acc += du[f] * wu[f * H + h];
    dx[h] = r.bf16(acc);
  }
  for (int64_t h = 0; h < H; ++h)
    for (int64_t f = 0; f < F; ++f) dwd[h * F + f] += dy[h] * m.a[f];
  for (int64_t f = 0; f < F; ++f)
    for (int64_t h = 0; h < H; ++h) {
      dwg[f * H + h] += dg[f] * x[h];
      dwu[f * H + h] += du[f] * x[h];
    }
}

}  // namespace

OracleOutputs naive_oracle(const OracleInputs& in, OracleMode mode, GradPrecision grad_precision) {
  const Shape& s = in.shape;
  const int64_t N = s.tokens_global(), H = s.H, F = s.F, Fs = s.Fs, k = s.k, E = s.E;
  const Rounder r{mode == OracleMode::kExact, grad_precision};
  const bool backward = !in.dout.empty();
  OracleOutputs o;
  o.out.resize(N * H);
  o.y.resize(N * k * H);
  std::vector<TokenMlp> slot(N * k), shared(N);
  for (int64_t t = 0; t < N; ++t) {
    for (int64_t j = 0; j < k; ++j) {
      const int64_t e = in.topk_idx[t * k + j];
      slot[t * k + j] =
          forward_token(&in.x[t * H], &in.w_gate[e * F * H], &in.w_up[e * F * H], &in.w_down[e * H * F], H, F, r);
      for (int64_t h = 0; h < H; ++h) o.y[(t * k + j) * H + h] = slot[t * k + j].y[h];
    }
    if (Fs > 0)
      shared[t] = forward_token(&in.x[t * H], in.ws_gate.data(), in.ws_up.data(), in.ws_down.data(), H, Fs, r);
    for (int64_t h = 0; h < H; ++h) {
      double acc = 0.0;
      for (int64_t j = 0; j < k; ++j) acc += in.topk_w[t * k + j] * o.y[(t * k + j) * H + h];
      if (Fs > 0) acc += shared[t].y[h];
      o.out[t * H + h] = r.bf16(acc);
    }
  }
  if (!backward) return o;

  o.d_topk_w.resize(N * k);
  o.d_x.resize(N * H);
  o.dw_gate.assign(E * F * H, 0.0);
  o.dw_up.assign(E * F * H, 0.0);
  o.dw_down.assign(E * H * F, 0.0);
  o.dws_gate.assign(Fs * H, 0.0);
  o.dws_up.assign(Fs * H, 0.0);
  o.dws_down.assign(H * Fs, 0.0);
  std::vector<double> dy(H), dx(H), dx_sum(H);
  for (int64_t t = 0; t < N; ++t) {
    const double* dout = &in.dout[t * H];
    std::vector<double> dx_rows(k * H);
    for (int64_t j = 0; j < k; ++j) {
      const int64_t e = in.topk_idx[t * k + j];
      double dw = 0.0;
      for (int64_t h = 0; h < H; ++h) dw += dout[h] * o.y[(t * k + j) * H + h];
      o.d_topk_w[t * k + j] = r.fp32(dw);
      for (int64_t h = 0; h < H; ++h) dy[h] = r.bf16(in.topk_w[t * k + j] * dout[h]);
      backward_token(&in.x[t * H], slot[t * k + j], dy.data(), &in.w_gate[e * F * H], &in.w_up[e * F * H],
                     &in.w_down[e * H * F], H, F, r, &dx_rows[j * H], &o.dw_gate[e * F * H], &o.dw_up[e * F * H],
                     &o.dw_down[e * H * F]);
    }
    if (Fs > 0)
      backward_token(&in.x[t * H], shared[t], dout, in.ws_gate.data(), in.ws_up.data(), in.ws_down.data(), H, Fs, r,
                     dx.data(), o.dws_gate.data(), o.dws_up.data(), o.dws_down.data());
    for (int64_t h = 0; h < H; ++h) {
      double acc = 0.0;
      for (int64_t j = 0; j < k; ++j) acc += dx_rows[j * H + h];
      if (Fs > 0) acc += dx[h];
      o.d_x[t * H + h] = r.bf16(acc);
    }
  }
  for (auto* v : {&o.dw_gate, &o.dw_up, &o.dw_down, &o.dws_gate, &o.dws_up, &o.dws_down})
    for (double& g : *v) g = r.weight_grad(g);
  return o;
}

}  // namespace detmoe::testing
