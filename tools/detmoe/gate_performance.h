// Performance part of `detmoe gate`: Google Benchmark suites rerun and compared with stored
// medians. A slowdown is reported only when every one of `repeats` fresh runs is slower than
// stored·(1 + max_slowdown): one noisy run never fails a gate, a real regression always does.
// What could not be measured (no binary, no usable stored medians, a run that crashed, printed
// no JSON or ran past timeout_s, a stored benchmark the fresh runs lack) is a Skip whose detail
// starts "could not run:" — never a Fail: `git bisect run` must not blame a commit for it.
#pragma once

#include <nlohmann/json.hpp>

#include <csignal>
#include <functional>
#include <string>
#include <vector>

#include "detmoe/report.h"
#include "gate_baseline.h"

namespace detmoe::cli {

// Runs every suite and hands each check to `add` as soon as it is judged. Stops early (the
// running binary's process group killed) when *stop becomes non-zero.
void run_performance_checks(const std::vector<PerformanceSuite>& suites, const volatile std::sig_atomic_t* stop,
                            const std::function<void(report::CheckResult)>& add);

// Pure part, tested on the CPU: median real_time per benchmark name of a Google Benchmark JSON
// (aggregate rows named "<name>_median" when present, else the median of iteration rows).
// Throws nlohmann::json::exception when a row has no name or no real_time.
std::vector<std::pair<std::string, double>> benchmark_medians(const nlohmann::json& gbench);
// Judges one benchmark: `fresh` medians of the repeats against `stored`. No fresh median is a
// could-not-run Skip.
report::CheckResult judge_slowdown(const std::string& name, double stored, const std::vector<double>& fresh,
                                   double max_slowdown);

}  // namespace detmoe::cli
