#include "oracle_validate.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "detmoe/routing.h"

namespace detmoe::oracle_detail {
namespace {

struct Field {
  const char* name;
  size_t size;
  int64_t expected;
  const char* formula;  // how `expected` follows from the shape, for the message
};

std::string index_string(int64_t flat, const std::vector<int64_t>& dims) {
  std::vector<int64_t> idx(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    idx[d] = flat % dims[d];
    flat /= dims[d];
  }
  std::string out = "[";
  for (size_t d = 0; d < idx.size(); ++d) {
    if (d > 0) out += ',';
    out += std::to_string(idx[d]);
  }
  out += ']';
  return out;
}

// A branch-free scan first (it vectorises; the oracle is rerun thousands of times by the
// finite-difference tests), then the slow search only when something is wrong.
bool all_finite(const std::vector<double>& v) {
  // Adding one to the exponent field carries into the sign bit exactly when it is all ones.
  constexpr uint64_t kExponent = 0x7ff0000000000000ull, kExponentOne = 0x0010000000000000ull;
  uint64_t bad = 0;
  for (double x : v) bad |= (std::bit_cast<uint64_t>(x) & kExponent) + kExponentOne;
  return (bad >> 63) == 0;
}

Status check_finite(const char* name, const std::vector<double>& v, const std::vector<int64_t>& dims) {
  if (all_finite(v)) return Status::Ok();
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i]))
      return invalid_argument(
          fmt::format("{}{} = {} is not finite", name, index_string(static_cast<int64_t>(i), dims), v[i]));
  return Status::Ok();
}

}  // namespace

Status validate_oracle_inputs(const OracleInputs& in, const OracleOptions& options) {
  const Shape& s = in.shape;
  DETMOE_RETURN_IF_ERROR(validate(s));
  if (options.threads < 0)
    return invalid_argument(fmt::format("threads = {} must be >= 0 (0 = hardware concurrency)", options.threads));
  if (options.mode != OracleMode::kContract && options.mode != OracleMode::kExact)
    return invalid_argument(fmt::format("mode = {} is not an OracleMode", static_cast<int>(options.mode)));
  if (options.grad_precision != GradPrecision::kFP32 && options.grad_precision != GradPrecision::kBF16)
    return invalid_argument(
        fmt::format("grad_precision = {} is not a GradPrecision", static_cast<int>(options.grad_precision)));

  const int64_t N = s.tokens_global();
  const Field fields[] = {
      {"x", in.x.size(), N * s.H, "P·T·H"},
      {"topk_idx", in.topk_idx.size(), N * s.k, "P·T·k"},
      {"topk_w", in.topk_w.size(), N * s.k, "P·T·k"},
      {"w_gate", in.w_gate.size(), s.E * s.F * s.H, "E·F·H"},
      {"w_up", in.w_up.size(), s.E * s.F * s.H, "E·F·H"},
      {"w_down", in.w_down.size(), s.E * s.H * s.F, "E·H·F"},
      {"ws_gate", in.ws_gate.size(), s.Fs * s.H, "Fs·H"},
      {"ws_up", in.ws_up.size(), s.Fs * s.H, "Fs·H"},
      {"ws_down", in.ws_down.size(), s.H * s.Fs, "H·Fs"},
  };
  for (const Field& f : fields)
    if (static_cast<int64_t>(f.size) != f.expected)
      return invalid_argument(fmt::format("{} has {} values, expected {} = {} for shape {}", f.name, f.size, f.formula,
                                          f.expected, s.to_string()));
  if (!in.dout.empty() && static_cast<int64_t>(in.dout.size()) != N * s.H)
    return invalid_argument(
        fmt::format("dout has {} values, expected P·T·H = {} (or none for forward only) for shape {}", in.dout.size(),
                    N * s.H, s.to_string()));

  DETMOE_RETURN_IF_ERROR(check_finite("x", in.x, {N, s.H}));
  DETMOE_RETURN_IF_ERROR(check_finite("topk_w", in.topk_w, {N, s.k}));
  DETMOE_RETURN_IF_ERROR(check_finite("w_gate", in.w_gate, {s.E, s.F, s.H}));
  DETMOE_RETURN_IF_ERROR(check_finite("w_up", in.w_up, {s.E, s.F, s.H}));
  DETMOE_RETURN_IF_ERROR(check_finite("w_down", in.w_down, {s.E, s.H, s.F}));
  DETMOE_RETURN_IF_ERROR(check_finite("ws_gate", in.ws_gate, {s.Fs, s.H}));
  DETMOE_RETURN_IF_ERROR(check_finite("ws_up", in.ws_up, {s.Fs, s.H}));
  DETMOE_RETURN_IF_ERROR(check_finite("ws_down", in.ws_down, {s.H, s.Fs}));
  DETMOE_RETURN_IF_ERROR(check_finite("dout", in.dout, {N, s.H}));

  // validate_routing takes fp32 weights; they are finite here, and clamping keeps a finite
  // fp64 weight beyond fp32's range from being reported as infinite.
  constexpr double kMaxFloat = std::numeric_limits<float>::max();
  std::vector<float> w32(in.topk_w.size());
  for (size_t i = 0; i < w32.size(); ++i) w32[i] = static_cast<float>(std::clamp(in.topk_w[i], -kMaxFloat, kMaxFloat));
  return validate_routing(s, in.topk_idx.data(), w32.data(), N);
}

}  // namespace detmoe::oracle_detail
