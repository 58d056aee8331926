// The checks of `detmoe accept`, one function each. Every check returns a report::CheckResult:
// Pass / Fail / Skip / Warn with a detail that says what was measured; "could not run" on a
// GPU that is present is Fail, never Skip (DCGM's rule).
#pragma once

#include <string>
#include <vector>

#include "detmoe/report.h"
#include "detmoe/shapes.h"
#include "detmoe/tensor.h"

namespace detmoe::cli {

// The oracle on `tiny`, twice: identical hashes (the CPU side of D0).
report::CheckResult check_oracle_rerun();

// One GPU layer run as a check body: outputs of two runs of the reference layer on `gpu`, with
// NaN-poisoned outputs before each run.
struct GpuRun {
  std::vector<NamedTensor> first, second;
  double seconds = 0;
  std::string error;  // non-empty: could not run
};
GpuRun run_reference_twice(int gpu, const Shape& shape, const std::string& routing, uint64_t seed, bool backward);

// Rerun bits equal, nothing left NaN; and, when `against_oracle`, within tolerance of the oracle.
report::CheckResult check_layer(const std::string& name, int gpu, const Shape& shape, const std::string& routing,
                                uint64_t seed, bool against_oracle, std::vector<std::string>* hashes_out = nullptr,
                                bool backward = true);

// Every GPU of the same model must produce the same bits for the same problem: a mismatch names
// the GPU whose hashes differ from GPU `reference_gpu`'s.
report::CheckResult check_cross_gpu(const std::vector<int>& gpus, const std::vector<std::string>& names,
                                    const std::vector<std::vector<std::string>>& hashes);

// Scaled copy of a named shape (T tokens) for an oracle comparison that finishes in seconds.
Shape scaled_shape(const Shape& s, int64_t T);

}  // namespace detmoe::cli
