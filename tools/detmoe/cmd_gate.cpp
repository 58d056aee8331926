// detmoe gate --baseline FILE: the CI gate for a kernel change. Three kinds of checks, each
// listed in the baseline file (ci/gate-baseline.json is the project's; gate_baseline.h has the
// format, read strictly: an unknown key, a wrong type, an empty list or a baseline that selects
// no check is a usage error, exit 2 — it must never come out as "0 checks, PASS"):
//   golden      every output's bits against the recorded hashes, both ways: an output produced
//               but not recorded, or recorded but not produced, fails (golden::check_case)
//   accuracy    an implementation against the oracle within the docs/NUMERICS.md tolerance
//   performance benchmark medians against stored ones; a slowdown counts only when every
//               one of `repeats` fresh measurements is slower than the threshold allows; each
//               run of a suite is killed (its process group) after `timeout_s`
// A check that could not run here (no CUDA device, no hash file for this platform, no
// benchmark binary or stored medians, a suite that timed out) is a Skip, "could not run: ...",
// not a Fail, so `git bisect run` (ci/bisect.sh) skips the commit instead of blaming it.
// Exit: 1 when any check that ran failed (even if others could not run: both are printed),
// else 3 when any could not run, else 0 when at least one check passed; 2 usage errors.
// --report FILE is written as the gate goes (state "running"), "finished" at the end, and
// "aborted" after SIGINT/SIGTERM (taken between checks; a second signal stops at once).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include "commands.h"
#include "detmoe/compare.h"
#include "detmoe/output_file.h"
#include "detmoe/report.h"
#include "gate_baseline.h"
#include "gate_performance.h"
#include "golden/golden.h"
#include "golden_run.h"
#include "impl_registry.h"
#include "interrupt.h"

namespace detmoe::cli {
namespace {

struct GateArgs {
  std::string baseline;
  std::string report_path;
  bool validate_only = false;
  std::vector<std::string> argv;
};

// After request_graceful_interrupt() the first SIGINT/SIGTERM/SIGHUP is only recorded: the gate
// stops between checks (and kills a running benchmark's process group), then marks the report
// "aborted" (interrupt.h). A second one removes half-written files and dies at once.
bool stopping() { return interrupt_signal() != 0; }

std::string could_not_run(const std::string& why) { return "could not run: " + why; }

struct Gate {
  std::optional<report::RunReportWriter> writer;
  report::RunReport report;  // without --report
  int passed = 0, failed = 0, skipped = 0;

  void add(report::CheckResult c) {
    // In the gate a Skip is always a check that could not run here (nothing is "not applicable").
    switch (c.verdict) {
      case report::Verdict::kFail: ++failed; break;
      case report::Verdict::kSkip: ++skipped; break;
      default: ++passed; break;
    }
    fmt::print("{:<4} {:<40} {}\n", report::to_string(c.verdict), c.name, c.detail);
    std::fflush(stdout);
    if (writer) throw_if_error(writer->add_check(std::move(c)));
    else report.checks.push_back(std::move(c));
  }
  void add_golden(report::GoldenResult r) {
    if (writer) throw_if_error(writer->add_golden(std::move(r)));
    else report.golden.push_back(std::move(r));
  }
};

void run_golden(Gate& g, const GoldenGateSpec& spec) {
  for (const std::string& impl_name : spec.impls) {
    const ImplEntry impl = find_impl(impl_name).value();  // known: the baseline reader checked
    std::vector<golden::GoldenCase> cases;
    for (const auto& c : spec.cases)
      if (std::find(c.impls.begin(), c.impls.end(), impl_name) != c.impls.end()) cases.push_back(c);
    if (const std::string why = why_impl_cannot_run(impl); !why.empty()) {
      g.add({"golden/" + impl_name, report::CheckTarget::cpu(), report::Verdict::kSkip,
             could_not_run(fmt::format("{} ({} cases not checked)", why, cases.size())), {}, 0});
      continue;
    }
    const std::string platform = impl.platform();
    auto file = load_recorded_hashes(spec.hashes_dir, impl_name, platform);
    if (!file.ok()) {
      g.add({"golden/" + impl_name, report::CheckTarget::cpu(), report::Verdict::kSkip,
             could_not_run(fmt::format("{} ({} cases not checked)", file.status().message(), cases.size())), {}, 0});
      continue;
    }
    for (const auto& c : cases) {
      if (stopping()) return;
      const auto t0 = std::chrono::steady_clock::now();
      const GoldenCaseRun run = run_golden_case(impl, c, *file, spec.store_dir);
      for (const golden::OutputVerdict& o : run.verdict.outputs) {
        report::GoldenResult gr;
        gr.case_name = c.name;
        gr.output = o.output;
        gr.expected_hash = o.expected_hash;
        gr.actual_hash = o.actual_hash;
        gr.match = o.match;
        g.add_golden(std::move(gr));
      }
      const report::Verdict verdict = run.outcome == GoldenOutcome::kPass   ? report::Verdict::kPass
                                      : run.outcome == GoldenOutcome::kFail ? report::Verdict::kFail
                                                                            : report::Verdict::kSkip;
      g.add({"golden/" + impl_name + "/" + c.name, report::CheckTarget::cpu(), verdict, run.detail, {},
             std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()});
    }
  }
}

void run_accuracy(Gate& g, const AccuracyGateSpec& spec) {
  const ImplEntry oracle = find_impl("oracle").value();
  for (const std::string& impl_name : spec.impls) {
    const ImplEntry impl = find_impl(impl_name).value();
    if (const std::string why = why_impl_cannot_run(impl); !why.empty()) {
      g.add({"accuracy/" + impl_name, report::CheckTarget::cpu(), report::Verdict::kSkip,
             could_not_run(fmt::format("{} ({} cases not checked)", why, spec.cases.size())), {}, 0});
      continue;
    }
    for (const golden::GoldenCase& c : spec.cases) {
      if (stopping()) return;
      const auto t0 = std::chrono::steady_clock::now();
      report::CheckResult check{"accuracy/" + impl_name + "/" + c.name, report::CheckTarget::cpu(), report::Verdict::kPass, "", {}, 0};
      const HostProblem problem = runnable_problem(impl, golden::make_case_problem(c).value());
      auto got = impl.run(problem);
      auto ref = oracle.run(problem);
      if (!got.ok() || !ref.ok()) {
        const Status& s = !got.ok() ? got.status() : ref.status();
        check.verdict = could_not_run_here(s) ? report::Verdict::kSkip : report::Verdict::kFail;
        check.detail = (check.verdict == report::Verdict::kSkip ? "could not run: " : "run failed: ") + s.to_string();
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
  auto loaded = load_gate_baseline(a.baseline);
  if (!loaded.ok()) throw Error(loaded.status());
  const GateBaseline& baseline = *loaded;
  if (a.validate_only) {
    fmt::print("--baseline {} is valid: golden {}, accuracy {}, {} performance suites\n", a.baseline,
               baseline.golden ? fmt::format("[{}]", fmt::join(baseline.golden->impls, ", ")) : "none",
               baseline.accuracy ? fmt::format("[{}] on {} cases", fmt::join(baseline.accuracy->impls, ", "), baseline.accuracy->cases.size())
                                 : "none",
               baseline.suites.size());
    return kExitOk;
  }

  Gate g;
  report::RunReport initial;
  initial.run = report::current_run_info("gate", a.argv);
  if (!a.report_path.empty()) g.writer = report::RunReportWriter::open(a.report_path, initial).value();
  else g.report = initial;
  request_graceful_interrupt();

  if (baseline.golden && !stopping()) run_golden(g, *baseline.golden);
  if (baseline.accuracy && !stopping()) run_accuracy(g, *baseline.accuracy);
  if (!baseline.suites.empty() && !stopping())
    run_performance_checks(baseline.suites, interrupt_flag(), [&](report::CheckResult c) { g.add(std::move(c)); });

  const int sig = interrupt_signal();
  if (g.writer) throw_if_error(g.writer->finish(sig ? report::RunState::kAborted : report::RunState::kFinished));
  const int total = g.passed + g.failed + g.skipped;
  if (sig) {
    fmt::print("gate: interrupted by signal {} after {} checks ({} failed, {} could not run){}\n", sig, total, g.failed,
               g.skipped, a.report_path.empty() ? "" : "; report marked aborted: " + a.report_path);
    die_of_signal(sig);
  }
  // Order matters: wrong bits are reported as a failure even when another check could not run.
  const char* verdict = g.failed ? "FAIL" : g.skipped ? "COULD NOT RUN" : g.passed ? "PASS" : "NOTHING CHECKED";
  fmt::print("gate: {} checks, {} passed, {} failed, {} could not run: {}\n", total, g.passed, g.failed, g.skipped, verdict);
  if (!a.report_path.empty()) fmt::print("report: {}\n", a.report_path);
  if (g.failed) return kExitCheckFailed;
  if (g.skipped) return kExitCouldNotRun;
  if (g.passed == 0) {
    fmt::print(stderr, "detmoe: --baseline {} yielded no check: a gate that checked nothing cannot pass\n", a.baseline);
    return kExitUsage;
  }
  return kExitOk;
}

}  // namespace

void add_gate_command(CLI::App& app, Action& run) {
  auto args = std::make_shared<GateArgs>();
  CLI::App* cmd = app.add_subcommand("gate", "CI gate for kernel changes: golden bits + accuracy + performance vs a baseline file");
  cmd->add_option("--baseline", args->baseline, "gate specification (schema detmoe.gate-baseline/1)")->required();
  cmd->add_option("--report", args->report_path, "write a run report (detmoe.run/1) as the gate goes");
  cmd->add_flag("--validate-only", args->validate_only, "read the baseline strictly and stop (exit 0 valid, 2 refused)");
  cmd->callback([args, &run] {
    args->argv = {"detmoe", "gate", "--baseline", args->baseline};
    if (!args->report_path.empty()) args->argv.insert(args->argv.end(), {"--report", args->report_path});
    run = [args] { return run_gate(*args); };
  });
}

}  // namespace detmoe::cli
