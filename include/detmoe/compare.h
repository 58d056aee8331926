// Comparing a GPU path's outputs with the oracle (tolerance) or with another run (bits).
//
// Tolerance rule (docs/NUMERICS.md §4, "GPU paths against the oracle"): element i of output X
// passes when |got_i − ref_i| ≤ atol_X + rtol·|ref_i|, with rtol = 2⁻⁶ and
// atol_X = 2⁻⁵·rms(ref_X). A few bf16 rounding flips (2⁻⁸ relative each, propagated through a
// sum) stay well inside it; a wrong row, slot, expert, rounding point or a missing term is
// O(rms) and does not. NaN never passes.
//
// Where the oracle also gives a magnitude M for X (the weight gradients: M_i = Σ|terms| of the
// sum that makes ref_i), element i also passes when |got_i − ref_i| ≤ terms_rtol·M_i, with
// terms_rtol = 4·2⁻⁸: a sum of few terms that nearly cancel carries errors of the size of its
// terms, not of the tensor's rms; a missing or wrong term is the size of one whole term.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "detmoe/tensor.h"

namespace detmoe {

struct ToleranceRule {
  double rtol = 1.0 / 64;
  double atol_rms = 1.0 / 32;     // atol = atol_rms · rms(reference)
  double terms_rtol = 4.0 / 256;  // c·2⁻⁸, c = 4: allowance terms_rtol·M_i where a magnitude is given
};

// Which clause allowed the most for an element: the rms rule, or Σ|terms| (magnitude given).
enum class ToleranceBound { kRms, kTerms };
const char* to_string(ToleranceBound b);

struct CompareResult {
  std::string name;
  int64_t count = 0;
  int64_t violations = 0;
  int64_t nan_count = 0;
  double rtol = 0, atol = 0, ref_rms = 0;
  double max_abs_err = 0;
  double max_err_ratio = 0;  // max of |got − ref| / allowance: ≤ 1 passes
  // allowance_i = max(atol + rtol·|ref_i|, terms_rtol·M_i) with a magnitude M, else the first.
  bool has_magnitude = false;
  double terms_rtol = 0;
  ToleranceBound worst_bound = ToleranceBound::kRms;  // the larger clause at the max_err_ratio element
  int64_t passed_by_terms = 0;  // elements outside the rms rule that the Σ|terms| clause passed
  int64_t first_bad = -1;    // flat index of the first violating element
  std::string first_bad_index;  // "[t,j,h]"
  double first_bad_got = 0, first_bad_ref = 0;
  std::string problem;  // set when the tensors cannot be compared (missing, shape)
  bool ok() const { return problem.empty() && violations == 0; }
};

// `magnitude` (may be null): M_i ≥ 0 per element of ref, same shape, e.g. from
// oracle_magnitude_tensors.
CompareResult compare_with_tolerance(const NamedTensor& got, const NamedTensor& ref, const ToleranceRule& rule = {},
                                     const NamedTensor* magnitude = nullptr);
// Every reference tensor against the one of the same name in `got` (missing = failure), with
// the magnitude tensor of the same name in `magnitudes` where there is one.
std::vector<CompareResult> compare_all_with_tolerance(const std::vector<NamedTensor>& got,
                                                      const std::vector<NamedTensor>& ref,
                                                      const ToleranceRule& rule = {},
                                                      const std::vector<NamedTensor>& magnitudes = {});

struct BitwiseResult {
  std::string name;
  bool equal = false;
  int64_t count = 0;
  int64_t differing = 0;
  int64_t first_diff = -1;
  std::string first_diff_index;
  double first_a = 0, first_b = 0;
  std::string problem;
};
BitwiseResult compare_bitwise(const NamedTensor& a, const NamedTensor& b);
// Same names in both lists, compared bit for bit (names in `skip` are left out).
std::vector<BitwiseResult> compare_all_bitwise(const std::vector<NamedTensor>& a, const std::vector<NamedTensor>& b,
                                               const std::vector<std::string>& skip = {});

int64_t count_nan(const NamedTensor& t);
// Aligned text tables for the CLI and test logs.
std::string format_tolerance_table(const std::vector<CompareResult>& results);
std::string format_bitwise_table(const std::vector<BitwiseResult>& results);

}  // namespace detmoe
