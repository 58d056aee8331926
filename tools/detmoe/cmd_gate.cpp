// detmoe gate --baseline FILE: the CI gate for a kernel change. Three kinds of checks, each
// listed in the baseline file (ci/gate-baseline.json is the project's):
//   golden      every output's bits against the recorded hashes (first differing element)
//   accuracy    an implementation against the oracle within the docs/NUMERICS.md tolerance
//   performance benchmark medians against stored ones; a slowdown counts only when every
//               one of `repeats` fresh measurements is slower than the threshold allows
// Exit 0 all passed, 1 any failed, 3 the gate could not run. A run report (detmoe.run/1) is
// written with --report.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "commands.h"
#include "data_paths.h"
#include "detmoe/compare.h"
#include "detmoe/report.h"
#include "gate_performance.h"
#include "golden/golden.h"
#include "golden_run.h"
#include "impl_registry.h"

namespace detmoe::cli {
namespace {

using nlohmann::json;

struct GateArgs {
  std::string baseline;
  std::string report_path;
  std::vector<std::string> argv;
};

std::string resolve(const std::string& base_dir, const std::string& p) {
  if (p.empty() || p.front() == '/') return p;
  return base_dir + "/" + p;
}

struct Gate {
  report::RunReport report;
  std::string report_path;
  bool failed = false;

  void add(report::CheckResult c) {
    failed |= c.verdict == report::Verdict::kFail;
    fmt::print("{:<4} {:<40} {}\n", report::to_string(c.verdict), c.name, c.detail);
    report.checks.push_back(std::move(c));
  }
};

void run_golden(Gate& g, const json& spec, const std::string& base_dir) {
  const std::string cases_path = resolve(base_dir, spec.value("cases", data_path("golden/cases.json")));
  const std::string hashes_dir = resolve(base_dir, spec.value("hashes", data_path("golden/hashes")));
  const std::string store = resolve(base_dir, spec.value("store", std::string()));
  const auto cases = golden::load_cases(cases_path).value();
  for (const std::string& impl_name : spec.at("impls").get<std::vector<std::string>>()) {
    auto impl = find_impl(impl_name);
    if (!impl.ok()) {
      g.add({"golden/" + impl_name, report::CheckTarget::cpu(), report::Verdict::kFail, impl.status().message(), {}, 0});
      continue;
    }
    const std::string platform = impl->platform();
    auto file = golden::read_hash_file(golden::hash_file_path(hashes_dir, impl_name, platform));
    if (!file.ok()) {
      g.add({"golden/" + impl_name, report::CheckTarget::cpu(), report::Verdict::kFail,
             fmt::format("no recorded hashes for platform {}: {}", platform, file.status().message()), {}, 0});
      continue;
    }
    for (const auto& c : cases) {
      if (std::find(c.impls.begin(), c.impls.end(), impl_name) == c.impls.end()) continue;
      const auto t0 = std::chrono::steady_clock::now();
      // The same per-case check as `golden check` (golden::check_case, both ways).
      const GoldenCaseRun run = run_golden_case(*impl, c, *file, store);
      for (const golden::OutputVerdict& o : run.verdict.outputs) {
        report::GoldenResult gr;
        gr.case_name = c.name;
        gr.output = o.output;
        gr.expected_hash = o.expected_hash;
        gr.actual_hash = o.actual_hash;
        gr.match = o.match;
        g.report.golden.push_back(std::move(gr));
      }
      report::CheckResult check{"golden/" + impl_name + "/" + c.name, report::CheckTarget::cpu(),
                                run.outcome == GoldenOutcome::kPass ? report::Verdict::kPass : report::Verdict::kFail,
                                run.detail, {}, 0};
      check.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      g.add(std::move(check));
    }
  }
}

void run_accuracy(Gate& g, const json& spec, const std::string& base_dir) {
  const std::string cases_path = resolve(base_dir, spec.value("cases_file", data_path("golden/cases.json")));
  const auto all = golden::load_cases(cases_path).value();
  const auto names = spec.at("cases").get<std::vector<std::string>>();
  const ImplEntry oracle = find_impl("oracle").value();
  for (const std::string& impl_name : spec.at("impls").get<std::vector<std::string>>()) {
    auto impl = find_impl(impl_name);
    for (const std::string& name : names) {
      const auto t0 = std::chrono::steady_clock::now();
      report::CheckResult check{"accuracy/" + impl_name + "/" + name, report::CheckTarget::cpu(), report::Verdict::kPass, "", {}, 0};
      auto c = std::find_if(all.begin(), all.end(), [&](const auto& x) { return x.name == name; });
      if (!impl.ok() || c == all.end()) {
        check.verdict = report::Verdict::kFail;
        check.detail = !impl.ok() ? impl.status().message() : fmt::format("case {} is not in {}", name, cases_path);
        g.add(std::move(check));
        continue;
      }
      const HostProblem problem = golden::make_case_problem(*c).value();
      auto got = impl->run(problem);
      auto ref = oracle.run(problem);
      if (!got.ok() || !ref.ok()) {
        check.verdict = report::Verdict::kFail;
        check.detail = "could not run: " + (!got.ok() ? got.status() : ref.status()).to_string();
      } else {
        double worst = 0;
        for (const CompareResult& r : compare_all_with_tolerance(*got, *ref)) {
          worst = std::max(worst, r.max_err_ratio);
          if (!r.ok()) {
            check.verdict = report::Verdict::kFail;
            check.detail += fmt::format("{}{}: {} of {} out of tolerance, first {} got {} want {}{}", check.detail.empty() ? "" : "; ",
                                        r.name, r.violations, r.count, r.first_bad_index, r.first_bad_got, r.first_bad_ref,
                                        r.problem.empty() ? "" : " (" + r.problem + ")");
          }
        }
        if (check.verdict == report::Verdict::kPass) check.detail = fmt::format("worst error {:.3f} of the allowance", worst);
      }
      check.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      g.add(std::move(check));
    }
  }
}

int run_gate(const GateArgs& a) {
  std::ifstream f(a.baseline);
  if (!f) throw Error({ErrorCode::kIoError, fmt::format("cannot open --baseline {}", a.baseline)});
  json spec;
  try {
    spec = json::parse(f);
  } catch (const json::exception& e) {
    throw Error(invalid_argument(fmt::format("--baseline {} is not JSON: {}", a.baseline, e.what())));
  }
  if (spec.value("schema", "") != "detmoe.gate-baseline/1")
    throw Error(invalid_argument(fmt::format("--baseline {}: schema must be \"detmoe.gate-baseline/1\"", a.baseline)));
  const std::string base_dir = std::filesystem::absolute(a.baseline).parent_path().string();

  Gate g;
  g.report.run = report::current_run_info("gate", a.argv);
  try {
    if (spec.contains("golden")) run_golden(g, spec["golden"], base_dir);
    if (spec.contains("accuracy")) run_accuracy(g, spec["accuracy"], base_dir);
    if (spec.contains("performance")) {
      for (auto& c : run_performance_checks(spec["performance"], base_dir)) g.add(std::move(c));
    }
  } catch (const json::exception& e) {
    throw Error(invalid_argument(fmt::format("--baseline {}: {}", a.baseline, e.what())));
  }
  g.report.run.state = report::RunState::kFinished;
  g.report.run.finished_at = report::utc_now_iso8601();
  if (!a.report_path.empty()) throw_if_error(report::save_run_report(a.report_path, g.report));
  const auto n_fail = std::count_if(g.report.checks.begin(), g.report.checks.end(),
                                    [](const auto& c) { return c.verdict == report::Verdict::kFail; });
  fmt::print("gate: {} checks, {} failed: {}\n", g.report.checks.size(), n_fail, g.failed ? "FAIL" : "PASS");
  return g.failed ? kExitCheckFailed : kExitOk;
}

}  // namespace

void add_gate_command(CLI::App& app, Action& run) {
  auto args = std::make_shared<GateArgs>();
  CLI::App* cmd = app.add_subcommand("gate", "CI gate for kernel changes: golden bits + accuracy + performance vs a baseline file");
  cmd->add_option("--baseline", args->baseline, "gate specification (schema detmoe.gate-baseline/1)")->required();
  cmd->add_option("--report", args->report_path, "write a run report (detmoe.run/1)");
  cmd->callback([args, &run] {
    args->argv = {"detmoe", "gate", "--baseline", args->baseline};
    run = [args] { return run_gate(*args); };
  });
}

}  // namespace detmoe::cli
