#include "detmoe/problem.h"

#include <fmt/format.h>

#include <algorithm>

#include "detmoe/config.h"
#include "detmoe/enum_names.h"

namespace detmoe {

const char* to_string(Precision p) { return p == Precision::kBF16 ? "bf16" : "fp8"; }
const char* to_string(GradPrecision p) { return p == GradPrecision::kFP32 ? "fp32" : "bf16"; }

double Shape::forward_flops_per_rank() const {
  return 6.0 * static_cast<double>(T) * static_cast<double>(k) * static_cast<double>(H) * static_cast<double>(F) +
         6.0 * static_cast<double>(T) * static_cast<double>(H) * static_cast<double>(Fs);
}

std::string Shape::to_string() const {
  return fmt::format("T={} H={} F={} E={} k={} P={} Fs={}", T, H, F, E, k, P, Fs);
}

namespace {

Status check_range(const char* name, int64_t value, int64_t lo, int64_t hi) {
  if (value < lo || value > hi)
    return invalid_argument(fmt::format("{} = {} is out of range [{}, {}]", name, value, lo, hi));
  return Status::Ok();
}

Status check_multiple(const char* name, int64_t value, int64_t multiple) {
  if (value % multiple != 0)
    return invalid_argument(fmt::format("{} = {} must be a multiple of {} (one 128-byte bf16 swizzle span)",
                                        name, value, multiple));
  return Status::Ok();
}

}  // namespace

Status validate(const Shape& s) {
  DETMOE_RETURN_IF_ERROR(check_range("T", s.T, 1, kMaxTokensPerRank));
  DETMOE_RETURN_IF_ERROR(check_range("H", s.H, 1, kMaxDim));
  DETMOE_RETURN_IF_ERROR(check_range("F", s.F, 1, kMaxDim));
  DETMOE_RETURN_IF_ERROR(check_range("E", s.E, 1, kMaxExperts));
  DETMOE_RETURN_IF_ERROR(check_range("k", s.k, 1, kMaxTopK));
  DETMOE_RETURN_IF_ERROR(check_range("P", s.P, 1, kMaxRanks));
  DETMOE_RETURN_IF_ERROR(check_range("Fs", s.Fs, 0, kMaxDim));
  DETMOE_RETURN_IF_ERROR(check_multiple("H", s.H, kHiddenMultiple));
  DETMOE_RETURN_IF_ERROR(check_multiple("F", s.F, kIntermediateMultiple));
  DETMOE_RETURN_IF_ERROR(check_multiple("Fs", s.Fs, kIntermediateMultiple));
  if (s.k > s.E) return invalid_argument(fmt::format("k = {} exceeds E = {} (top-k picks distinct experts)", s.k, s.E));
  if (s.E % s.P != 0)
    return invalid_argument(fmt::format("E = {} is not divisible by P = {} (experts are split evenly over ranks)", s.E, s.P));
  // Row ids are int32 on the device.
  if (s.T * s.P * s.k > (int64_t{1} << 31) - 1)
    return invalid_argument(fmt::format("P·T·k = {} rows exceed the int32 row index", s.T * s.P * s.k));
  return Status::Ok();
}

const char* to_string(WeightGradLaunch w) {
  switch (w) {
    case WeightGradLaunch::kAuto: return "auto";
    case WeightGradLaunch::kFused: return "fused";
    case WeightGradLaunch::kGateUpLater: return "gate-up-later";
    case WeightGradLaunch::kSecondLaunch: return "second";
  }
  return "?";
}

StatusOr<WeightGradLaunch> parse_weight_grad_launch(std::string_view s) {
  return parse_name(s, kWeightGradLaunches, "weight_grad_launch");
}

int64_t worst_case_recv_rows(const Shape& s) { return s.P * s.T * std::min(s.k, s.experts_per_rank()); }

Status validate(const LayerConfig& c, const Shape& s) {
  DETMOE_RETURN_IF_ERROR(validate(s));
  if (c.precision != Precision::kBF16)
    return {ErrorCode::kNotImplemented, fmt::format("precision = {} is not implemented yet (bf16 only)", to_string(c.precision))};
  if (c.num_sms < 0) return invalid_argument(fmt::format("num_sms = {} must be >= 0 (0 = all)", c.num_sms));
  if (c.comm_sms < 0) return invalid_argument(fmt::format("comm_sms = {} must be >= 0", c.comm_sms));
  if (c.num_sms > 0 && c.comm_sms >= c.num_sms)
    return invalid_argument(fmt::format("comm_sms = {} leaves no compute SM of num_sms = {}", c.comm_sms, c.num_sms));
  if (c.overlap_rows < 0) return invalid_argument(fmt::format("overlap_rows = {} must be >= 0", c.overlap_rows));
  if (c.recv_capacity_rows < 0)
    return invalid_argument(fmt::format("recv_capacity_rows = {} must be >= 0 (0 = worst case)", c.recv_capacity_rows));
  // An enum cast from an out-of-range integer: named by its value, against kWeightGradLaunches' list.
  if (std::find(kWeightGradLaunches.begin(), kWeightGradLaunches.end(), c.weight_grad_launch) == kWeightGradLaunches.end())
    return invalid_argument(fmt::format("weight_grad_launch = {} is not one of {}", static_cast<int32_t>(c.weight_grad_launch),
                                        name_list(kWeightGradLaunches, /*with_values=*/true)));
  if (c.weight_grad_band_budget_kb < 0)
    return invalid_argument(
        fmt::format("weight_grad_band_budget_kb = {} must be >= 0 (0 = fixed bands)", c.weight_grad_band_budget_kb));
  if (c.spin_timeout_ms <= 0) return invalid_argument(fmt::format("spin_timeout_ms = {} must be > 0", c.spin_timeout_ms));
  return Status::Ok();
}

}  // namespace detmoe
