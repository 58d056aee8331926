// The layer around the per-expert MLPs: rows per expert in global token order, gather and
// scatter, the slot-order combine, d_topk_w and the slot-order d_x sum. The rounding points and
// summation orders are listed in docs/NUMERICS.md.
#include "detmoe/oracle.h"
#include "detmoe/test_plant.h"

#include <fmt/format.h>

#include <new>
#include <stdexcept>

#include "detmoe/numeric.h"
#include "oracle_mlp.h"
#include "oracle_parallel.h"
#include "oracle_validate.h"

namespace detmoe {

using oracle_detail::MlpActivations;
using oracle_detail::MlpWeights;
using oracle_detail::parallel_rows;
using oracle_detail::Rounding;

namespace {

// The rows each expert receives, sorted by global token id (a token picks an expert at most
// once, so the slot never breaks a tie): a counting sort, the same order as the routing plan.
struct ExpertRows {
  std::vector<int64_t> offset;  // [E+1]
  std::vector<int64_t> token;   // [N·k]
  std::vector<int64_t> slot;    // [N·k]
};

ExpertRows expert_rows(const std::vector<int32_t>& topk_idx, int64_t N, int64_t k, int64_t E) {
  ExpertRows r;
  r.offset.assign(E + 1, 0);
  for (int32_t e : topk_idx) ++r.offset[e + 1];
  for (int64_t e = 0; e < E; ++e) r.offset[e + 1] += r.offset[e];
  std::vector<int64_t> next(r.offset.begin(), r.offset.end() - 1);
  r.token.resize(N * k);
  r.slot.resize(N * k);
  for (int64_t t = 0; t < N; ++t)
    for (int64_t j = 0; j < k; ++j) {
      const int64_t row = next[topk_idx[t * k + j]]++;
      r.token[row] = t;
      r.slot[row] = j;
    }
  return r;
}

OracleOutputs run_validated(const OracleInputs& in, const OracleOptions& options) {
  const Shape& s = in.shape;
  const int64_t N = s.tokens_global(), H = s.H, F = s.F, Fs = s.Fs, k = s.k, E = s.E;
  const int threads = options.threads;
  const bool backward = !in.dout.empty();
  const Rounding rnd{options.mode == OracleMode::kExact, options.grad_precision};

  OracleOutputs out;
  out.y.assign(N * k * H, 0.0);
  std::vector<double> dx_slots;  // [N, k, H] per-slot input-gradient rows (bf16)
  const bool magnitudes = backward && options.weight_grad_magnitudes;
  if (backward) {
    dx_slots.assign(N * k * H, 0.0);
    out.dw_gate.assign(E * F * H, 0.0);  // experts without rows keep these exact zeros
    out.dw_up.assign(E * F * H, 0.0);
    out.dw_down.assign(E * H * F, 0.0);
  }
  if (magnitudes) {
    out.dw_gate_mag.assign(E * F * H, 0.0);
    out.dw_up_mag.assign(E * F * H, 0.0);
    out.dw_down_mag.assign(E * H * F, 0.0);
  }

  // Routed experts, one at a time; each GEMM is split over threads inside.
  const ExpertRows rows = expert_rows(in.topk_idx, N, k, E);
  std::vector<double> xe, dye, dxe;
  MlpActivations act;
  oracle_detail::MlpScratch scratch;
  for (int64_t e = 0; e < E; ++e) {
    const int64_t r0 = rows.offset[e], R = rows.offset[e + 1] - r0;
    if (R == 0) continue;
    const MlpWeights w{in.w_gate.data() + e * F * H, in.w_up.data() + e * F * H, in.w_down.data() + e * H * F, H, F};
    xe.resize(R * H);
    parallel_rows(R, H, threads, [&](int64_t b, int64_t end) {
      for (int64_t i = b; i < end; ++i) {
        const double* src = in.x.data() + rows.token[r0 + i] * H;
        std::copy(src, src + H, xe.data() + i * H);
      }
    });
    oracle_detail::mlp_forward(xe.data(), R, w, rnd, threads, act);
    parallel_rows(R, H, threads, [&](int64_t b, int64_t end) {
      for (int64_t i = b; i < end; ++i) {
        const int64_t ts = rows.token[r0 + i] * k + rows.slot[r0 + i];
        std::copy(act.y.data() + i * H, act.y.data() + (i + 1) * H, out.y.data() + ts * H);
      }
    });
    if (!backward) continue;
    // The weighted dout rows travel back to the expert: bf16(topk_w·dout).
    dye.resize(R * H);
    dxe.resize(R * H);
    parallel_rows(R, H, threads, [&](int64_t b, int64_t end) {
      for (int64_t i = b; i < end; ++i) {
        const int64_t t = rows.token[r0 + i];
        const double wt = in.topk_w[t * k + rows.slot[r0 + i]];
        for (int64_t h = 0; h < H; ++h) dye[i * H + h] = rnd.bf16(wt * in.dout[t * H + h]);
      }
    });
    oracle_detail::WeightGradients dw{out.dw_gate.data() + e * F * H, out.dw_up.data() + e * F * H,
                                      out.dw_down.data() + e * H * F};
    if (magnitudes) {
      dw.mag_gate = out.dw_gate_mag.data() + e * F * H;
      dw.mag_up = out.dw_up_mag.data() + e * F * H;
      dw.mag_down = out.dw_down_mag.data() + e * H * F;
    }
    oracle_detail::mlp_backward(xe.data(), act, dye.data(), w, rnd, threads, scratch, dxe.data(), dw);
    parallel_rows(R, H, threads, [&](int64_t b, int64_t end) {
      for (int64_t i = b; i < end; ++i) {
        const int64_t ts = rows.token[r0 + i] * k + rows.slot[r0 + i];
        std::copy(dxe.data() + i * H, dxe.data() + (i + 1) * H, dx_slots.data() + ts * H);
      }
    });
  }

  // Shared expert: every token, weight 1, so its output gradient is dout itself.
  MlpActivations shared;
  std::vector<double> dx_shared;
  if (Fs > 0) {
    const MlpWeights w{in.ws_gate.data(), in.ws_up.data(), in.ws_down.data(), H, Fs};
    oracle_detail::mlp_forward(in.x.data(), N, w, rnd, threads, shared);
    if (backward) {
      dx_shared.resize(N * H);
      out.dws_gate.resize(Fs * H);
      out.dws_up.resize(Fs * H);
      out.dws_down.resize(H * Fs);
      oracle_detail::WeightGradients dw{out.dws_gate.data(), out.dws_up.data(), out.dws_down.data()};
      if (magnitudes) {
        out.dws_gate_mag.resize(Fs * H);
        out.dws_up_mag.resize(Fs * H);
        out.dws_down_mag.resize(H * Fs);
        dw.mag_gate = out.dws_gate_mag.data();
        dw.mag_up = out.dws_up_mag.data();
        dw.mag_down = out.dws_down_mag.data();
      }
      oracle_detail::mlp_backward(in.x.data(), shared, in.dout.data(), w, rnd, threads, scratch, dx_shared.data(), dw);
    }
  }

  // out[t] = Σ_j w·y (slot order), then + s; one fp64 sum per element.
  out.out.resize(N * H);
  const bool plant_reversed = test_plant_enabled("combine-reversed");  // harness tests only
  parallel_rows(N, k * H, threads, [&](int64_t b, int64_t end) {
    for (int64_t t = b; t < end; ++t)
      for (int64_t h = 0; h < H; ++h) {
        double acc = 0.0;
        if (plant_reversed) {
          float acc32 = 0.0f;
          for (int64_t j = k - 1; j >= 0; --j) acc32 += static_cast<float>(in.topk_w[t * k + j] * out.y[(t * k + j) * H + h]);
          acc = acc32;
        } else {
          for (int64_t j = 0; j < k; ++j) acc += in.topk_w[t * k + j] * out.y[(t * k + j) * H + h];
        }
        if (Fs > 0) acc += shared.y[t * H + h];
        out.out[t * H + h] = rnd.bf16(acc);
      }
  });
  if (!backward) return out;

  out.d_topk_w.resize(N * k);
  out.d_x.resize(N * H);
  parallel_rows(N, k * H, threads, [&](int64_t b, int64_t end) {
    for (int64_t t = b; t < end; ++t) {
      const double* dout = in.dout.data() + t * H;
      for (int64_t j = 0; j < k; ++j) {
        const double* y = out.y.data() + (t * k + j) * H;
        double acc = 0.0;
        for (int64_t h = 0; h < H; ++h) acc += dout[h] * y[h];
        out.d_topk_w[t * k + j] = rnd.fp32(acc);
      }
      for (int64_t h = 0; h < H; ++h) {
        double acc = 0.0;
        for (int64_t j = 0; j < k; ++j) acc += dx_slots[(t * k + j) * H + h];
        if (Fs > 0) acc += dx_shared[t * H + h];
        out.d_x[t * H + h] = rnd.bf16(acc);
      }
    }
  });
  return out;
}

// Over all cores: the named shapes' weights are billions of elements (deepseek-v3 at T = 32:
// 1.4 G, 36 s on one thread — most of a scaled-down oracle run).
std::vector<double> widen(const std::vector<uint16_t>& bits) {
  std::vector<double> v(bits.size());
  oracle_detail::parallel_rows(static_cast<int64_t>(bits.size()), 1, 0, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) v[i] = float_from_bf16_bits(bits[i]);
  });
  return v;
}

}  // namespace

OracleInputs make_oracle_inputs(const LayerData& data, const Routing& routing) {
  OracleInputs in;
  in.shape = data.shape;
  in.x = widen(data.x);
  in.topk_idx = routing.topk_idx;
  in.topk_w.assign(routing.topk_w.begin(), routing.topk_w.end());
  in.w_gate = widen(data.w_gate);
  in.w_up = widen(data.w_up);
  in.w_down = widen(data.w_down);
  in.ws_gate = widen(data.ws_gate);
  in.ws_up = widen(data.ws_up);
  in.ws_down = widen(data.ws_down);
  in.dout = widen(data.dout);
  return in;
}

int64_t oracle_host_bytes(const Shape& s, bool backward, const OracleOptions& options) {
  const int64_t N = s.tokens_global(), H = s.H, F = s.F, k = s.k, EFH = s.E * s.F * s.H, FsH = s.Fs * s.H;
  int64_t doubles = 2 * N * H + 3 * EFH + 3 * FsH + N * k;  // inputs
  doubles += N * H + N * k * H;                             // out, y
  doubles += N * (3 * H + 6 * std::max(F, s.Fs));           // one expert's (or the shared expert's) scratch, rows <= N
  int64_t tensor_bytes = 2 * (N * H + N * k * H);
  if (backward) {
    doubles += N * H + N * k * H + N * k + 3 * EFH + 3 * FsH + N * H;  // d_x, per-slot d_x, d_topk_w, dW, shared d_x
    if (options.weight_grad_magnitudes) doubles += 3 * EFH + 3 * FsH;
    tensor_bytes += 2 * N * H + 4 * N * k + 4 * (3 * EFH + 3 * FsH);
  }
  return 8 * doubles + tensor_bytes;
}

StatusOr<OracleOutputs> run_oracle(const OracleInputs& in, const OracleOptions& options) {
  DETMOE_RETURN_IF_ERROR(oracle_detail::validate_oracle_inputs(in, options));
  try {
    return run_validated(in, options);
  } catch (const std::bad_alloc&) {
    return invalid_argument(
        fmt::format("shape {} needs more host memory than is available to the CPU oracle "
                    "(it is meant for small problems)",
                    in.shape.to_string()));
  } catch (const std::length_error&) {
    return invalid_argument(fmt::format("shape {} is too large for the CPU oracle's buffers", in.shape.to_string()));
  }
}

std::vector<NamedTensor> oracle_output_tensors(const OracleOutputs& out, const Shape& s, const OracleOptions& options) {
  const bool exact = options.mode == OracleMode::kExact;
  const DType act = exact ? DType::kFP64 : DType::kBF16;
  const DType fp32 = exact ? DType::kFP64 : DType::kFP32;
  const DType grad =
      exact ? DType::kFP64 : (options.grad_precision == GradPrecision::kFP32 ? DType::kFP32 : DType::kBF16);
  const int64_t N = s.tokens_global();
  std::vector<NamedTensor> t;
  t.push_back(make_tensor("out", act, {N, s.H}, out.out));
  t.push_back(make_tensor("y", act, {N, s.k, s.H}, out.y));
  if (out.d_x.empty()) return t;
  t.push_back(make_tensor("d_x", act, {N, s.H}, out.d_x));
  t.push_back(make_tensor("d_topk_w", fp32, {N, s.k}, out.d_topk_w));
  t.push_back(make_tensor("dw_gate", grad, {s.E, s.F, s.H}, out.dw_gate));
  t.push_back(make_tensor("dw_up", grad, {s.E, s.F, s.H}, out.dw_up));
  t.push_back(make_tensor("dw_down", grad, {s.E, s.H, s.F}, out.dw_down));
  if (s.Fs > 0) {
    t.push_back(make_tensor("dws_gate", grad, {s.Fs, s.H}, out.dws_gate));
    t.push_back(make_tensor("dws_up", grad, {s.Fs, s.H}, out.dws_up));
    t.push_back(make_tensor("dws_down", grad, {s.H, s.Fs}, out.dws_down));
  }
  return t;
}

std::vector<NamedTensor> oracle_magnitude_tensors(const OracleOutputs& out, const Shape& s) {
  std::vector<NamedTensor> t;
  if (out.dw_gate_mag.empty()) return t;
  t.push_back(make_tensor("dw_gate", DType::kFP32, {s.E, s.F, s.H}, out.dw_gate_mag));
  t.push_back(make_tensor("dw_up", DType::kFP32, {s.E, s.F, s.H}, out.dw_up_mag));
  t.push_back(make_tensor("dw_down", DType::kFP32, {s.E, s.H, s.F}, out.dw_down_mag));
  if (!out.dws_gate_mag.empty()) {
    t.push_back(make_tensor("dws_gate", DType::kFP32, {s.Fs, s.H}, out.dws_gate_mag));
    t.push_back(make_tensor("dws_up", DType::kFP32, {s.Fs, s.H}, out.dws_up_mag));
    t.push_back(make_tensor("dws_down", DType::kFP32, {s.H, s.Fs}, out.dws_down_mag));
  }
  return t;
}

}  // namespace detmoe
