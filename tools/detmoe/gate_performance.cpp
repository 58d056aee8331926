#include "gate_performance.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "child_process.h"
#include "detmoe/median.h"
#include "data_paths.h"

namespace detmoe::cli {
namespace {

report::CheckResult could_not_run(const std::string& name, const std::string& why) {
  return {"performance/" + name, report::CheckTarget::cpu(), report::Verdict::kSkip, "could not run: " + why, {}, 0};
}

std::string last_line(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  const size_t nl = s.rfind('\n');
  return nl == std::string::npos ? s : s.substr(nl + 1);
}

// The stored medians, or why there are none usable.
std::string read_stored(const std::string& path, std::vector<std::pair<std::string, double>>& stored) {
  std::ifstream f(path);
  if (!f) return fmt::format("cannot open stored results {}", path);
  try {
    stored = benchmark_medians(nlohmann::json::parse(f));
  } catch (const nlohmann::json::exception& e) {
    return fmt::format("stored results {} are not Google Benchmark JSON with named rows: {}", path, e.what());
  }
  if (stored.empty()) return fmt::format("stored results {} hold no benchmark", path);
  for (const auto& [name, med] : stored)
    if (!(med > 0) || !std::isfinite(med)) return fmt::format("stored results {} have no usable median for {} ({})", path, name, med);
  return {};
}

}  // namespace

std::vector<std::pair<std::string, double>> benchmark_medians(const nlohmann::json& gbench) {
  std::map<std::string, std::vector<double>> iters;
  std::map<std::string, double> medians;
  std::vector<std::string> order;
  for (const auto& b : gbench.at("benchmarks")) {
    const std::string run_name = b.contains("run_name") ? b.at("run_name").get<std::string>() : b.at("name").get<std::string>();
    if (std::find(order.begin(), order.end(), run_name) == order.end()) order.push_back(run_name);
    if (b.value("run_type", "iteration") == "aggregate") {
      if (b.value("aggregate_name", "") == "median") medians[run_name] = b.at("real_time").get<double>();
    } else {
      iters[run_name].push_back(b.at("real_time").get<double>());
    }
  }
  std::vector<std::pair<std::string, double>> out;
  for (const auto& n : order) out.emplace_back(n, medians.count(n) ? medians[n] : median(iters[n]));
  return out;
}

report::CheckResult judge_slowdown(const std::string& name, double stored, const std::vector<double>& fresh,
                                   double max_slowdown) {
  if (fresh.empty())
    return could_not_run(name, "it is in the stored results but the fresh runs did not produce it (renamed or filtered out?)");
  report::CheckResult c{"performance/" + name, report::CheckTarget::cpu(), report::Verdict::kPass, "", {}, 0};
  const double limit = stored * (1 + max_slowdown);
  const bool all_slower = std::all_of(fresh.begin(), fresh.end(), [&](double f) { return f > limit; });
  const bool some_slower = std::any_of(fresh.begin(), fresh.end(), [&](double f) { return f > limit; });
  std::string runs;
  for (double f : fresh) runs += fmt::format("{}{:.4g}", runs.empty() ? "" : ", ", f);
  c.detail = fmt::format("stored median {:.4g}, fresh medians [{}], limit {:.4g} (+{:.0f}%)", stored, runs, limit, 100 * max_slowdown);
  if (all_slower) {
    c.verdict = report::Verdict::kFail;
    c.detail = "slower in every repeat: " + c.detail;
  } else if (some_slower) {
    c.verdict = report::Verdict::kWarn;
    c.detail = "slower in some repeats only (noise, not counted): " + c.detail;
  }
  return c;
}

void run_performance_checks(const std::vector<PerformanceSuite>& suites, const volatile std::sig_atomic_t* stop,
                            const std::function<void(report::CheckResult)>& add) {
  for (const PerformanceSuite& suite : suites) {
    if (stop != nullptr && *stop != 0) return;
    const auto t0 = std::chrono::steady_clock::now();
    const std::string binary = helper_program(suite.binary);
    std::error_code ec;
    if (!std::filesystem::is_regular_file(binary, ec) || ::access(binary.c_str(), X_OK) != 0) {
      add(could_not_run(suite.binary, fmt::format("no benchmark binary {} (is it built?)", binary)));
      continue;
    }
    std::vector<std::pair<std::string, double>> stored;
    if (const std::string why = read_stored(suite.stored_path, stored); !why.empty()) {
      add(could_not_run(suite.binary, why));
      continue;
    }
    std::vector<std::string> argv{binary};
    argv.insert(argv.end(), suite.args.begin(), suite.args.end());
    for (std::string a : {"--benchmark_filter=" + suite.filter, std::string("--benchmark_format=json"),
                          fmt::format("--benchmark_min_time={}", suite.min_time), std::string("--benchmark_repetitions=5"),
                          std::string("--benchmark_report_aggregates_only=true")})
      argv.push_back(std::move(a));
    std::map<std::string, std::vector<double>> fresh;
    std::string why_not;
    for (int r = 0; r < suite.repeats && why_not.empty(); ++r) {
      const ChildResult run = run_child(argv, suite.timeout_s, stop);
      if (!run.ok()) {
        const std::string err = last_line(run.err_tail);
        why_not = fmt::format("{} {} (repeat {} of {}){}", binary, run.describe(suite.timeout_s), r + 1, suite.repeats,
                              err.empty() ? "" : "; its last error line: " + err);
        break;
      }
      try {
        for (const auto& [name, med] : benchmark_medians(nlohmann::json::parse(run.out))) fresh[name].push_back(med);
      } catch (const nlohmann::json::exception& e) {
        why_not = fmt::format("{} printed no Google Benchmark JSON (repeat {} of {}): {}", binary, r + 1, suite.repeats, e.what());
      }
    }
    if (!why_not.empty()) {
      add(could_not_run(suite.binary, fmt::format("{}; {} stored benchmarks not judged", why_not, stored.size())));
      continue;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const auto& [name, med] : stored) {
      report::CheckResult c = judge_slowdown(name, med, fresh[name], suite.max_slowdown);
      c.duration_s = seconds / static_cast<double>(stored.size());
      add(std::move(c));
    }
    for (const auto& [name, meds] : fresh)
      if (std::none_of(stored.begin(), stored.end(), [&](const auto& s) { return s.first == name; }))
        add({"performance/" + name, report::CheckTarget::cpu(), report::Verdict::kWarn,
             fmt::format("not judged: no stored median in {} (store one from a good commit)", suite.stored_path), {}, 0});
  }
}

}  // namespace detmoe::cli
