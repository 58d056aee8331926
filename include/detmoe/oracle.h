// CPU oracle of the whole layer, forward and backward, exactly per DESIGN.md §2: fp64
// accumulation, bf16 rounding at the contract's rounding points, slot-order sums. The oracle
// sees the global batch (P·T tokens): EP is a distribution of the same math, not other math.
//
// Mode kExact drops every rounding (fp64 throughout) so finite differences can check each
// gradient; kContract is the tier-1 truth every GPU path is compared against.
#pragma once

#include <cstdint>
#include <vector>

#include "detmoe/data.h"
#include "detmoe/problem.h"
#include "detmoe/routing.h"
#include "detmoe/status.h"
#include "detmoe/tensor.h"

namespace detmoe {

enum class OracleMode { kContract, kExact };

// All values as doubles (in kContract mode they should be bf16-representable, as generated).
struct OracleInputs {
  Shape shape;                    // per rank; the oracle uses N = P·T tokens
  std::vector<double> x;          // [N, H]
  std::vector<int32_t> topk_idx;  // [N, k]
  std::vector<double> topk_w;     // [N, k]
  std::vector<double> w_gate;     // [E, F, H]
  std::vector<double> w_up;       // [E, F, H]
  std::vector<double> w_down;     // [E, H, F]
  std::vector<double> ws_gate;    // [Fs, H]
  std::vector<double> ws_up;      // [Fs, H]
  std::vector<double> ws_down;    // [H, Fs]
  std::vector<double> dout;       // [N, H]; empty = forward only
};

struct OracleOptions {
  OracleMode mode = OracleMode::kContract;
  GradPrecision grad_precision = GradPrecision::kFP32;
  int threads = 0;  // 0 = hardware concurrency
  // Also return the magnitude of each weight gradient (OracleOutputs::*_mag), from which a
  // comparison allows for terms that cancel (docs/NUMERICS.md §4). Opt-in: it doubles the
  // weight-gradient work and memory; it changes no output bit.
  bool weight_grad_magnitudes = false;
};

struct OracleOutputs {
  std::vector<double> out;       // [N, H]    bf16 values (kContract)
  std::vector<double> y;         // [N, k, H] per-slot expert outputs, bf16
  std::vector<double> d_x;       // [N, H]    bf16
  std::vector<double> d_topk_w;  // [N, k]    fp32
  std::vector<double> dw_gate;   // [E, F, H] fp32 or bf16 per grad_precision
  std::vector<double> dw_up;     // [E, F, H]
  std::vector<double> dw_down;   // [E, H, F]
  std::vector<double> dws_gate;  // [Fs, H]
  std::vector<double> dws_up;    // [Fs, H]
  std::vector<double> dws_down;  // [H, Fs]
  // With OracleOptions::weight_grad_magnitudes and a backward, beside each weight gradient dW
  // (same shape): M[i] = Σ over the rows summed into dW[i] of |term|, e.g. for
  // dw_down[e,h,f] = Σ_r dy[r,h]·a[r,f], M = Σ_r |dy[r,h]|·|a[r,f]|; fp64, never rounded, same
  // row order, so M ≥ |dW| before dW's rounding and M = |dW| when all terms share a sign.
  // Experts without rows get 0. Empty otherwise (dws_*_mag also when Fs = 0).
  std::vector<double> dw_gate_mag, dw_up_mag, dw_down_mag;
  std::vector<double> dws_gate_mag, dws_up_mag, dws_down_mag;
};

// Upper estimate of the host bytes a whole oracle run takes (its fp64 inputs, outputs, scratch
// and the output tensors; not the LayerData it starts from, see problem_host_bytes). Callers
// check it with require_host_bytes before building inputs, so a problem too large for the
// machine fails at once with the amount instead of a std::bad_alloc after minutes.
int64_t oracle_host_bytes(const Shape& shape, bool backward, const OracleOptions& options);

// Builds oracle inputs from seeded data and routing (bf16 values widened to double).
OracleInputs make_oracle_inputs(const LayerData& data, const Routing& routing);

// Validates shape, routing and buffer sizes (naming the offending value), then runs.
StatusOr<OracleOutputs> run_oracle(const OracleInputs& in, const OracleOptions& options);

// The outputs as named tensors in their storage dtypes (out, y, and if backward ran: d_x,
// d_topk_w, dw_*, dws_* when Fs > 0), in a fixed order — what gets hashed.
std::vector<NamedTensor> oracle_output_tensors(const OracleOutputs& out, const Shape& shape,
                                               const OracleOptions& options);

// The weight-gradient magnitudes as fp32 tensors named after the gradient each one bounds
// (dw_gate, dw_up, dw_down, and dws_* when Fs > 0), for compare_all_with_tolerance; empty when
// they were not computed. fp32 because they only scale an allowance (2⁻²⁴ relative does not
// matter there) and they are as large as the weight gradients themselves.
std::vector<NamedTensor> oracle_magnitude_tensors(const OracleOutputs& out, const Shape& shape);

}  // namespace detmoe
