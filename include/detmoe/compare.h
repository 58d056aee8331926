// Comparing a GPU path's outputs with the oracle (tolerance) or with another run (bits).
//
// Tolerance rule (docs/NUMERICS.md, "GPU paths against the oracle"): element i of output X
// passes when |got_i − ref_i| ≤ atol_X + rtol·|ref_i|, with rtol = 2⁻⁶ and
// atol_X = 2⁻⁵·rms(ref_X). A few bf16 rounding flips (2⁻⁸ relative each, propagated through a
// sum) stay well inside it; a wrong row, slot, expert, rounding point or a missing term is
// O(rms) and does not. NaN never passes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "detmoe/tensor.h"

namespace detmoe {

struct ToleranceRule {
  double rtol = 1.0 / 64;
  double atol_rms = 1.0 / 32;  // atol = atol_rms · rms(reference)
};

struct CompareResult {
  std::string name;
  int64_t count = 0;
  int64_t violations = 0;
  int64_t nan_count = 0;
  double rtol = 0, atol = 0, ref_rms = 0;
  double max_abs_err = 0;
  double max_err_ratio = 0;  // max of |got − ref| / (atol + rtol·|ref|): ≤ 1 passes
  int64_t first_bad = -1;    // flat index of the first violating element
  std::string first_bad_index;  // "[t,j,h]"
  double first_bad_got = 0, first_bad_ref = 0;
  std::string problem;  // set when the tensors cannot be compared (missing, shape)
  bool ok() const { return problem.empty() && violations == 0; }
};

CompareResult compare_with_tolerance(const NamedTensor& got, const NamedTensor& ref, const ToleranceRule& rule = {});
// Every reference tensor against the one of the same name in `got` (missing = failure).
std::vector<CompareResult> compare_all_with_tolerance(const std::vector<NamedTensor>& got,
                                                      const std::vector<NamedTensor>& ref,
                                                      const ToleranceRule& rule = {});

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
