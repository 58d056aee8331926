#include "gate_performance.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include "data_paths.h"

namespace detmoe::cli {
namespace {

namespace fs = std::filesystem;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

// Runs a command and returns its standard output; throws nothing, empty on failure.
bool capture(const std::string& cmd, std::string& out) {
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  if (!p) return false;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p.get())) > 0) out.append(buf.data(), n);
  return pclose(p.release()) == 0;
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

std::vector<std::pair<std::string, double>> benchmark_medians(const nlohmann::json& gbench) {
  std::map<std::string, std::vector<double>> iters;
  std::map<std::string, double> medians;
  std::vector<std::string> order;
  for (const auto& b : gbench.at("benchmarks")) {
    const std::string run_name = b.value("run_name", b.at("name").get<std::string>());
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
  report::CheckResult c{"performance/" + name, report::CheckTarget::cpu(), report::Verdict::kPass, "", {}, 0};
  const double limit = stored * (1 + max_slowdown);
  const bool all_slower = !fresh.empty() && std::all_of(fresh.begin(), fresh.end(), [&](double f) { return f > limit; });
  const bool some_slower = std::any_of(fresh.begin(), fresh.end(), [&](double f) { return f > limit; });
  std::string runs;
  for (double f : fresh) runs += fmt::format("{}{:.4g}", runs.empty() ? "" : ", ", f);
  c.detail = fmt::format("stored median {:.4g}, fresh medians [{}], limit {:.4g} (+{:.0f}%)", stored, runs, limit, 100 * max_slowdown);
  if (fresh.empty()) {
    c.verdict = report::Verdict::kFail;
    c.detail = "benchmark did not run";
  } else if (all_slower) {
    c.verdict = report::Verdict::kFail;
    c.detail = "slower in every repeat: " + c.detail;
  } else if (some_slower) {
    c.verdict = report::Verdict::kWarn;
    c.detail = "slower in some repeats only (noise, not counted): " + c.detail;
  }
  return c;
}

std::vector<report::CheckResult> run_performance_checks(const nlohmann::json& spec, const std::string& base_dir) {
  std::vector<report::CheckResult> checks;
  for (const auto& suite : spec.at("suites")) {
    const std::string binary = helper_program(suite.at("binary").get<std::string>());
    const std::string filter = suite.value("filter", std::string("."));
    std::string stored_path = suite.at("stored").get<std::string>();
    if (!stored_path.empty() && stored_path.front() != '/') stored_path = base_dir + "/" + stored_path;
    const int repeats = suite.value("repeats", 3);
    const double max_slowdown = suite.value("max_slowdown", 0.05);
    const double min_time = suite.value("min_time", 0.2);
    std::string extra;
    for (const auto& arg : suite.value("args", std::vector<std::string>{})) extra += " " + shell_quote(arg);
    std::ifstream f(stored_path);
    if (!f) {
      checks.push_back({"performance/" + binary, report::CheckTarget::cpu(), report::Verdict::kFail,
                        fmt::format("cannot open stored results {}", stored_path), {}, 0});
      continue;
    }
    std::vector<std::pair<std::string, double>> stored;
    try {
      stored = benchmark_medians(nlohmann::json::parse(f));
    } catch (const nlohmann::json::exception& e) {
      checks.push_back({"performance/" + binary, report::CheckTarget::cpu(), report::Verdict::kFail,
                        fmt::format("stored results {} are not Google Benchmark JSON: {}", stored_path, e.what()), {}, 0});
      continue;
    }
    if (stored.empty()) {
      checks.push_back({"performance/" + binary, report::CheckTarget::cpu(), report::Verdict::kFail,
                        fmt::format("stored results {} hold no benchmark", stored_path), {}, 0});
      continue;
    }
    std::map<std::string, std::vector<double>> fresh;
    for (int r = 0; r < repeats; ++r) {
      std::string out;
      const std::string cmd = fmt::format("{}{} --benchmark_filter={} --benchmark_format=json --benchmark_min_time={} "
                                          "--benchmark_repetitions=5 --benchmark_report_aggregates_only=true 2>/dev/null",
                                          shell_quote(binary), extra, shell_quote(filter), min_time);
      if (!capture(cmd, out)) {
        checks.push_back({"performance/" + binary, report::CheckTarget::cpu(), report::Verdict::kFail,
                          fmt::format("could not run {} (repeat {})", binary, r + 1), {}, 0});
        break;
      }
      try {
        for (const auto& [name, med] : benchmark_medians(nlohmann::json::parse(out))) fresh[name].push_back(med);
      } catch (const nlohmann::json::exception& e) {
        checks.push_back({"performance/" + binary, report::CheckTarget::cpu(), report::Verdict::kFail,
                          fmt::format("{} printed no Google Benchmark JSON (repeat {}): {}", binary, r + 1, e.what()), {}, 0});
        break;
      }
    }
    for (const auto& [name, med] : stored) checks.push_back(judge_slowdown(name, med, fresh[name], max_slowdown));
  }
  return checks;
}

}  // namespace detmoe::cli
