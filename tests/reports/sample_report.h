// Report fixtures for the reports/ tests: one with every section filled, one with none.
#pragma once

#include "detmoe/report.h"

namespace detmoe::report::testing {

// Two GPUs; checks on cpu, each GPU, a pair and the node (one Fail, one Warn, one Skip);
// benchmarks for two impls and a baseline in both passes; a ceiling; a 2x2 bandwidth matrix;
// golden results with one changed output.
RunReport full_sample();
// Run metadata only: no GPUs, checks, benchmarks, bandwidth or golden results.
RunReport empty_sample();

}  // namespace detmoe::report::testing
