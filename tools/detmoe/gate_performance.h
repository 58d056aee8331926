// Performance part of `detmoe gate`: Google Benchmark suites rerun and compared with stored
// medians. A slowdown is reported only when every one of `repeats` fresh runs is slower than
// stored·(1 + max_slowdown): one noisy run never fails a gate, a real regression always does.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "detmoe/report.h"

namespace detmoe::cli {

// spec: {"suites": [{"binary": "perf/detmoe_perf_layer" (relative to the build folder, i.e. the
// folder of the detmoe executable), "filter": "regex", "stored": "results.json" (a Google
// Benchmark JSON of the good commit, relative to the baseline file), "args": [extra flags],
// "max_slowdown": 0.05, "repeats": 3, "min_time": 0.2}]}
std::vector<report::CheckResult> run_performance_checks(const nlohmann::json& spec, const std::string& base_dir);

// Pure part, tested on the CPU: median real_time per benchmark name of a Google Benchmark JSON
// (aggregate rows named "<name>_median" when present, else the median of iteration rows).
std::vector<std::pair<std::string, double>> benchmark_medians(const nlohmann::json& gbench);
// Judges one benchmark: `fresh` medians of the repeats against `stored`.
report::CheckResult judge_slowdown(const std::string& name, double stored, const std::vector<double>& fresh,
                                   double max_slowdown);

}  // namespace detmoe::cli
