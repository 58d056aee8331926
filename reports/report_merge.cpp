// merge_run_reports: the shards of one campaign (a fuzz run split over processes or calls, each
// with its own report) as one report. Only reports of one command, one commit and one machine
// merge; a check (name and target) in two shards means the shards overlapped, and is refused.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "detmoe/report.h"

namespace detmoe::report {

StatusOr<RunReport> merge_run_reports(std::span<const RunReport> shards) {
  if (shards.empty()) return invalid_argument("merge: no reports given");
  const RunReport& first = shards.front();
  RunReport merged;
  merged.run = first.run;
  merged.inventory = first.inventory;
  merged.perf_ceiling = first.perf_ceiling;
  merged.bandwidth = first.bandwidth;
  std::map<std::string, size_t> check_shard;
  bool running = false, aborted = false;
  for (size_t i = 0; i < shards.size(); ++i) {
    const RunReport& r = shards[i];
    if (r.run.command != first.run.command)
      return invalid_argument(fmt::format("merge: report {} is of `{}`, report 0 of `{}`", i, r.run.command, first.run.command));
    if (r.run.git_sha != first.run.git_sha)
      return invalid_argument(fmt::format("merge: report {} ran commit '{}', report 0 commit '{}'", i, r.run.git_sha,
                                          first.run.git_sha));
    if (r.run.tool_version != first.run.tool_version)
      return invalid_argument(fmt::format("merge: report {} is of detmoe {}, report 0 of {}", i, r.run.tool_version,
                                          first.run.tool_version));
    if (!(r.inventory == first.inventory))
      return invalid_argument(fmt::format("merge: report {} ran on other GPUs (or another driver) than report 0", i));
    if (r.perf_ceiling != first.perf_ceiling || r.bandwidth != first.bandwidth)
      return invalid_argument(fmt::format("merge: report {} has another perf ceiling or bandwidth matrix than report 0", i));
    for (const CheckResult& c : r.checks) {
      // One report may hold a check name once per target (and repeat it); two shards may not.
      const auto [at, fresh] = check_shard.emplace(c.name + " on " + c.target.to_string(), i);
      if (!fresh && at->second != i)
        return invalid_argument(fmt::format("merge: check '{}' on {} is in report {} and report {}: the shards overlap",
                                            c.name, c.target.to_string(), at->second, i));
      merged.checks.push_back(c);
    }
    merged.benchmarks.insert(merged.benchmarks.end(), r.benchmarks.begin(), r.benchmarks.end());
    merged.golden.insert(merged.golden.end(), r.golden.begin(), r.golden.end());
    // ISO 8601 UTC strings of one format order as text.
    merged.run.started_at = std::min(merged.run.started_at, r.run.started_at);
    if (r.run.finished_at.empty()) running = true;
    merged.run.finished_at = std::max(merged.run.finished_at, r.run.finished_at);
    running = running || r.run.state == RunState::kRunning;
    aborted = aborted || r.run.state == RunState::kAborted;
  }
  merged.run.state = aborted ? RunState::kAborted : running ? RunState::kRunning : RunState::kFinished;
  if (merged.run.state == RunState::kRunning) merged.run.finished_at.clear();
  return merged;
}

}  // namespace detmoe::report
