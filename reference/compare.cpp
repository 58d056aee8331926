#include "detmoe/compare.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace detmoe {

int64_t count_nan(const NamedTensor& t) {
  int64_t n = 0;
  for (int64_t i = 0; i < t.numel(); ++i) n += std::isnan(t.at(i)) ? 1 : 0;
  return n;
}

const char* to_string(ToleranceBound b) { return b == ToleranceBound::kTerms ? "terms" : "rms"; }

CompareResult compare_with_tolerance(const NamedTensor& got, const NamedTensor& ref, const ToleranceRule& rule,
                                     const NamedTensor* magnitude) {
  CompareResult r;
  r.name = ref.name;
  r.count = ref.numel();
  if (got.shape != ref.shape) {
    r.problem = fmt::format("shape [{}] differs from the reference's [{}]", fmt::join(got.shape, ","), fmt::join(ref.shape, ","));
    return r;
  }
  if (magnitude && magnitude->shape != ref.shape) {
    r.problem = fmt::format("magnitude shape [{}] differs from the reference's [{}]", fmt::join(magnitude->shape, ","),
                            fmt::join(ref.shape, ","));
    return r;
  }
  double sq = 0;
  for (int64_t i = 0; i < r.count; ++i) sq += ref.at(i) * ref.at(i);
  r.ref_rms = r.count > 0 ? std::sqrt(sq / static_cast<double>(r.count)) : 0.0;
  r.rtol = rule.rtol;
  r.atol = rule.atol_rms * r.ref_rms;
  r.has_magnitude = magnitude != nullptr;
  r.terms_rtol = r.has_magnitude ? rule.terms_rtol : 0.0;
  for (int64_t i = 0; i < r.count; ++i) {
    const double g = got.at(i), f = ref.at(i);
    const double err = std::fabs(g - f), by_rms = r.atol + r.rtol * std::fabs(f);
    // A NaN or negative magnitude allows nothing: the rms rule alone decides.
    const double m = r.has_magnitude ? magnitude->at(i) : 0.0;
    const double by_terms = m > 0 ? r.terms_rtol * m : 0.0;
    const double allowed = std::max(by_rms, by_terms);
    const bool nan = std::isnan(g) || std::isnan(f);
    r.nan_count += nan ? 1 : 0;
    if (!nan) {
      r.max_abs_err = std::max(r.max_abs_err, err);
      const double ratio = allowed > 0 ? err / allowed : (err > 0 ? INFINITY : 0.0);
      if (ratio > r.max_err_ratio) {
        r.max_err_ratio = ratio;
        r.worst_bound = by_terms > by_rms ? ToleranceBound::kTerms : ToleranceBound::kRms;
      }
      r.passed_by_terms += (err > by_rms && err <= by_terms) ? 1 : 0;
    }
    if (nan || err > allowed) {
      if (r.violations == 0) {
        r.first_bad = i;
        r.first_bad_index = multi_index(i, ref.shape);
        r.first_bad_got = g;
        r.first_bad_ref = f;
      }
      ++r.violations;
    }
  }
  return r;
}

std::vector<CompareResult> compare_all_with_tolerance(const std::vector<NamedTensor>& got,
                                                      const std::vector<NamedTensor>& ref, const ToleranceRule& rule,
                                                      const std::vector<NamedTensor>& magnitudes) {
  std::vector<CompareResult> out;
  for (const NamedTensor& f : ref) {
    const NamedTensor* g = find_tensor(got, f.name);
    if (!g) {
      CompareResult r;
      r.name = f.name;
      r.count = f.numel();
      r.problem = "missing from the GPU outputs";
      out.push_back(r);
      continue;
    }
    out.push_back(compare_with_tolerance(*g, f, rule, find_tensor(magnitudes, f.name)));
  }
  return out;
}

BitwiseResult compare_bitwise(const NamedTensor& a, const NamedTensor& b) {
  BitwiseResult r;
  r.name = a.name;
  r.count = a.numel();
  if (a.dtype != b.dtype || a.shape != b.shape || a.bytes.size() != b.bytes.size()) {
    r.problem = fmt::format("{} [{}] vs {} [{}]", to_string(a.dtype), fmt::join(a.shape, ","), to_string(b.dtype),
                            fmt::join(b.shape, ","));
    return r;
  }
  const int64_t size = dtype_size(a.dtype);
  for (int64_t i = 0; i < r.count; ++i) {
    if (std::memcmp(a.bytes.data() + i * size, b.bytes.data() + i * size, size) == 0) continue;
    if (r.differing == 0) {
      r.first_diff = i;
      r.first_diff_index = multi_index(i, a.shape);
      r.first_a = a.at(i);
      r.first_b = b.at(i);
    }
    ++r.differing;
  }
  r.equal = r.differing == 0;
  return r;
}

std::vector<BitwiseResult> compare_all_bitwise(const std::vector<NamedTensor>& a, const std::vector<NamedTensor>& b,
                                               const std::vector<std::string>& skip) {
  std::vector<BitwiseResult> out;
  for (const NamedTensor& x : a) {
    if (std::find(skip.begin(), skip.end(), x.name) != skip.end()) continue;
    auto it = std::find_if(b.begin(), b.end(), [&](const NamedTensor& y) { return y.name == x.name; });
    if (it == b.end()) {
      BitwiseResult r;
      r.name = x.name;
      r.problem = "missing from the second run";
      out.push_back(r);
      continue;
    }
    out.push_back(compare_bitwise(x, *it));
  }
  return out;
}

std::string format_tolerance_table(const std::vector<CompareResult>& results) {
  // "by": the clause that allowed the most at the worst element (rms, or Σ|terms| with a magnitude).
  std::string s = fmt::format("{:<12} {:>10} {:>11} {:>11} {:>9} {:>5} {:>10} {:>6}  {}\n", "output", "elements",
                              "max |err|", "atol", "err/tol", "by", "violations", "NaN", "verdict");
  for (const CompareResult& r : results) {
    std::string verdict = r.ok() ? "ok" : "FAIL";
    if (!r.problem.empty()) verdict += " (" + r.problem + ")";
    else if (r.violations > 0)
      verdict += fmt::format(" (first {}: got {:.6g}, oracle {:.6g})", r.first_bad_index, r.first_bad_got, r.first_bad_ref);
    if (r.passed_by_terms > 0) verdict += fmt::format(" ({} passed by Σ|terms| only)", r.passed_by_terms);
    s += fmt::format("{:<12} {:>10} {:>11.3e} {:>11.3e} {:>9.3f} {:>5} {:>10} {:>6}  {}\n", r.name, r.count, r.max_abs_err,
                     r.atol, r.max_err_ratio, to_string(r.worst_bound), r.violations, r.nan_count, verdict);
  }
  return s;
}

std::string format_bitwise_table(const std::vector<BitwiseResult>& results) {
  std::string s = fmt::format("{:<12} {:>10} {:>10}  {}\n", "output", "elements", "differing", "verdict");
  for (const BitwiseResult& r : results) {
    std::string verdict = r.equal ? "identical" : "DIFFERENT";
    if (!r.problem.empty()) verdict += " (" + r.problem + ")";
    else if (!r.equal)
      verdict += fmt::format(" (first {}: {:.9g} vs {:.9g})", r.first_diff_index, r.first_a, r.first_b);
    s += fmt::format("{:<12} {:>10} {:>10}  {}\n", r.name, r.count, r.differing, verdict);
  }
  return s;
}

}  // namespace detmoe
