#include "accept_checks.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <chrono>

#include "detmoe/compare.h"
#include "detmoe/data.h"
#include "detmoe/oracle.h"
#include "detmoe/problem_session.h"
#include "impl_registry.h"

namespace detmoe::cli {
namespace {

using report::CheckResult;
using report::CheckTarget;
using report::Verdict;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// ", worst error 0.42 of the oracle tolerance" and, where the Σ|terms| clause mattered, by how much.
std::string oracle_summary(double worst, ToleranceBound bound, int64_t passed_by_terms) {
  std::string s = fmt::format(", worst error {:.2f} of the oracle tolerance", worst);
  if (bound == ToleranceBound::kTerms) s += " (its Σ|terms| bound)";
  if (passed_by_terms > 0) s += fmt::format(", {} elements inside only the Σ|terms| bound", passed_by_terms);
  return s;
}

// The oracle's outputs and, with a backward, its weight-gradient magnitudes (the Σ|terms| clause
// of docs/NUMERICS.md §4). The fp64 inputs and outputs die as soon as they are converted: at
// gpt-oss@T64 each weight-sized set of doubles is 25 GB.
struct OracleReference {
  std::vector<NamedTensor> outputs, magnitudes;
};

OracleReference oracle_reference(const Shape& shape, const Routing& routing, uint64_t seed, bool backward) {
  OracleOptions opt;
  opt.weight_grad_magnitudes = backward;
  const OracleOutputs oracle = [&] {
    OracleInputs in = make_oracle_inputs(generate_layer_data(shape, seed), routing);
    if (!backward) in.dout.clear();
    return run_oracle(in, opt).value();
  }();
  return {oracle_output_tensors(oracle, shape, opt), oracle_magnitude_tensors(oracle, shape)};
}

}  // namespace

CheckResult check_oracle_rerun() {
  const auto t0 = std::chrono::steady_clock::now();
  const HostProblem problem =
      make_seeded_problem(find_named_shape("tiny").value(), RoutingSpec{}, 7, true, GradPrecision::kFP32).value();
  const ImplEntry oracle = find_impl("oracle").value();
  auto hashes = [&] {
    std::vector<std::string> h;
    for (const auto& t : oracle.run(problem).value()) h.push_back(t.hash().hex());
    return h;
  };
  const auto a = hashes(), b = hashes();
  CheckResult c{"oracle-rerun", CheckTarget::cpu(), Verdict::kPass, fmt::format("{} outputs, identical bits on rerun", a.size()), {}, 0};
  if (a != b) {
    c.verdict = Verdict::kFail;
    c.detail = "oracle outputs differ between two runs";
  }
  c.duration_s = seconds_since(t0);
  return c;
}

// The reference layer through the seam (ProblemSession), as every GPU path runs.
GpuRun run_reference_twice(int gpu, const Shape& shape, const std::string& routing_text, uint64_t seed, bool backward) {
  GpuRun r;
  const auto t0 = std::chrono::steady_clock::now();
  if (cudaSetDevice(gpu) != cudaSuccess) {
    r.error = fmt::format("cudaSetDevice({}) failed", gpu);
    return r;
  }
  auto spec = parse_routing(routing_text);
  auto routing = spec.ok() ? generate_routing(shape, *spec, seed) : StatusOr<Routing>(spec.status());
  if (!routing.ok()) {
    r.error = routing.status().to_string();
    return r;
  }
  auto ex = make_loopback_exchange(static_cast<int>(shape.P), gpu);
  if (!ex.ok()) {
    r.error = ex.status().to_string();
    return r;
  }
  auto session = ProblemSession::create("reference", shape, *routing, seed, std::shared_ptr<RowExchange>(std::move(*ex)));
  if (!session.ok()) {
    r.error = session.status().to_string();
    return r;
  }
  auto first = (*session)->run(backward);
  auto second = first.ok() ? (*session)->run(backward) : first;
  if (!first.ok() || !second.ok()) {
    r.error = (!first.ok() ? first.status() : second.status()).to_string();
    return r;
  }
  r.first = std::move(*first);
  r.second = std::move(*second);
  r.seconds = seconds_since(t0);
  return r;
}

CheckResult check_layer(const std::string& name, int gpu, const Shape& shape, const std::string& routing_text,
                        uint64_t seed, bool against_oracle, std::vector<std::string>* hashes_out, bool backward) {
  const auto t0 = std::chrono::steady_clock::now();
  CheckResult c{name, CheckTarget::gpu(gpu), Verdict::kPass, "", {}, 0};
  GpuRun run = run_reference_twice(gpu, shape, routing_text, seed, backward);
  if (!run.error.empty()) {
    c.verdict = Verdict::kFail;
    c.severity = report::Severity::kTriage;
    c.detail = "could not run: " + run.error;
    c.duration_s = seconds_since(t0);
    return c;
  }
  std::vector<std::string> problems;
  int64_t nan = 0;
  for (const NamedTensor& t : run.first) nan += count_nan(t);
  if (nan) problems.push_back(fmt::format("{} output elements unwritten or NaN", nan));
  for (const BitwiseResult& b : compare_all_bitwise(run.first, run.second))
    if (!b.equal)
      problems.push_back(fmt::format("rerun changed {} bits: {} of {} differ, first {} ({} then {})", b.name, b.differing, b.count,
                                     b.first_diff_index, b.first_a, b.first_b));
  run.second = {};  // compared; the oracle below needs the memory
  double worst = 0;
  ToleranceBound worst_bound = ToleranceBound::kRms;
  int64_t passed_by_terms = 0;
  if (against_oracle) {
    const Routing routing = generate_routing(shape, parse_routing(routing_text).value(), seed).value();
    const OracleReference oracle = oracle_reference(shape, routing, seed, backward);
    for (const CompareResult& r : compare_all_with_tolerance(run.first, oracle.outputs, {}, oracle.magnitudes)) {
      if (r.max_err_ratio > worst) {
        worst = r.max_err_ratio;
        worst_bound = r.worst_bound;
      }
      passed_by_terms += r.passed_by_terms;
      if (!r.ok())
        problems.push_back(fmt::format("{}: {} of {} outside tolerance, first {} got {} want {}{}", r.name, r.violations, r.count,
                                       r.first_bad_index, r.first_bad_got, r.first_bad_ref, r.problem.empty() ? "" : " " + r.problem));
    }
  }
  if (hashes_out)
    for (const NamedTensor& t : run.first) hashes_out->push_back(t.name + ":" + t.hash().hex());
  if (problems.empty()) {
    c.detail = fmt::format("{} routing={} {}: {} outputs, rerun bitwise equal{}, GPU {:.2f} s", shape.to_string(), routing_text,
                           backward ? "fwd+bwd" : "fwd",
                           run.first.size(), against_oracle ? oracle_summary(worst, worst_bound, passed_by_terms) : "",
                           run.seconds);
  } else {
    c.verdict = Verdict::kFail;
    c.severity = report::Severity::kIsolate;
    for (const auto& p : problems) c.detail += (c.detail.empty() ? "" : "; ") + p;
  }
  c.duration_s = seconds_since(t0);
  return c;
}

CheckResult check_cross_gpu(const std::vector<int>& gpus, const std::vector<std::string>& names,
                            const std::vector<std::vector<std::string>>& hashes) {
  CheckResult c{"cross-gpu-bitwise", CheckTarget::node(gpus), Verdict::kPass, "", {}, 0};
  if (gpus.size() < 2) {
    c.verdict = Verdict::kSkip;
    c.detail = "one GPU: nothing to compare against";
    return c;
  }
  std::vector<std::string> bad;
  for (size_t i = 1; i < gpus.size(); ++i) {
    if (names[i] != names[0]) continue;  // another model: its bits may differ legitimately
    if (hashes[i] != hashes[0]) bad.push_back(fmt::format("GPU {}", gpus[i]));
  }
  if (bad.empty()) {
    c.detail = fmt::format("{} GPUs give identical bits for the tiny layer", gpus.size());
  } else {
    c.verdict = Verdict::kFail;
    c.severity = report::Severity::kIsolate;
    c.detail = fmt::format("bits differ from GPU {}'s on: {}", gpus[0], fmt::join(bad, ", "));
  }
  return c;
}

Shape scaled_shape(const Shape& s, int64_t T) {
  Shape r = s;
  r.T = T;
  return r;
}

}  // namespace detmoe::cli
