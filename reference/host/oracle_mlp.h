// One SwiGLU MLP — a routed expert or the shared expert — over a set of gathered rows, forward
// and backward, with the rounding points of DESIGN.md §2 (docs/NUMERICS.md has the table).
#pragma once

#include <cstdint>
#include <vector>

#include "detmoe/problem.h"

namespace detmoe::oracle_detail {

// Where the contract rounds, and to what. exact = round nowhere (fp64 throughout).
struct Rounding {
  bool exact = false;
  GradPrecision grad = GradPrecision::kFP32;
  double bf16(double v) const;
  double fp32(double v) const;
  double weight_grad(double v) const;  // fp32 or bf16 per `grad`
};

// Row-major weights of one MLP: w_gate, w_up [F, H]; w_down [H, F].
struct MlpWeights {
  const double* w_gate;
  const double* w_up;
  const double* w_down;
  int64_t H, F;
};

// What the forward keeps for backward, as the contract saves it (rounded in kContract).
struct MlpActivations {
  int64_t rows = 0;
  std::vector<double> g, u;  // [rows, F] bf16(x·W_gateᵀ), bf16(x·W_upᵀ)
  std::vector<double> a;     // [rows, F] bf16(silu(g)·u)
  std::vector<double> y;     // [rows, H] bf16(a·W_downᵀ)
};

// x: [rows, H] row-major. `act` is overwritten; passing the same one for every expert reuses
// its buffers (fresh multi-MB buffers cost page faults).
void mlp_forward(const double* x, int64_t rows, const MlpWeights& w, const Rounding& r, int threads,
                 MlpActivations& act);

// Backward temporaries, reusable across experts like MlpActivations.
struct MlpScratch {
  std::vector<double> da;  // [rows, F] dy·W_down, unrounded
  std::vector<double> dh;  // [rows, 2F] [dg | du], bf16
  std::vector<double> abs_x, abs_dy, abs_a, abs_dh;  // |operands| of the weight-gradient sums
};

// Where mlp_backward writes the weight gradients, dw_gate, dw_up [F, H] and dw_down [H, F], and,
// only when the mag_* pointers are set, their magnitudes (same shapes): for each element the
// sum over the rows of |term|, e.g. mag_down[h, f] = Σ_r |dy[r, h]|·|a[r, f]|, fp64, unrounded.
struct WeightGradients {
  double* dw_gate = nullptr;
  double* dw_up = nullptr;
  double* dw_down = nullptr;
  double* mag_gate = nullptr;
  double* mag_up = nullptr;
  double* mag_down = nullptr;
};

// Backward for rows whose output gradient is dy [rows, H] (already the bf16 weighted dout).
// Writes the per-row input gradient bf16(dg·W_gate + du·W_up) to dx [rows, H] and the weight
// gradients, rounded per r.weight_grad, to `dw`. Every weight-gradient sum runs over the rows in
// the order given (global token order).
void mlp_backward(const double* x, const MlpActivations& act, const double* dy, const MlpWeights& w, const Rounding& r,
                  int threads, MlpScratch& scratch, double* dx, const WeightGradients& dw);

}  // namespace detmoe::oracle_detail
