// detmoe verify: run a GPU implementation of the layer (through its LayerSession) on a seeded
// problem, compare every output with the CPU oracle (tolerance rule of docs/NUMERICS.md) and with
// a rerun of itself (bits, D0), print tables, optionally write a run report (--json, detmoe.run/1),
// exit 0 (all pass) or 1. No GPU: exit 3.
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <chrono>

#include "commands.h"
#include "detmoe/compare.h"
#include "detmoe/data.h"
#include "detmoe/oracle.h"
#include "detmoe/output_file.h"
#include "detmoe/layer_session.h"
#include "detmoe/problem_session.h"
#include "detmoe/report.h"
#include "gpu_inventory.h"
#include "impl_registry.h"
#include "output_paths.h"
#include "problem_options.h"

namespace detmoe::cli {
namespace {

struct VerifyArgs {
  ProblemOptions problem;
  std::string impl = "reference";
  std::string backend = "loopback";
  std::string gemm = "per-expert";
  std::string grad_dtype = "fp32";
  bool forward_only = false;
  bool no_oracle = false;
  bool recompute_h = false;
  std::string json_path;
  std::vector<std::string> argv;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

StatusOr<std::shared_ptr<RowExchange>> make_exchange(const std::string& backend, int P) {
  if (backend == "loopback") {
    auto ex = make_loopback_exchange(P);
    if (!ex.ok()) return ex.status();
    return std::shared_ptr<RowExchange>(std::move(*ex));
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
  if (count < P)
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("--backend nccl with P = {} needs {} GPUs, this process sees {} (use --backend loopback)", P, P, count));
  std::vector<int> devices(P);
  for (int i = 0; i < P; ++i) devices[i] = i;
  auto ex = make_nccl_exchange(devices);
  if (!ex.ok()) return ex.status();
  return std::shared_ptr<RowExchange>(std::move(*ex));
}

report::CheckResult check_result(std::string name, bool pass, std::string detail, double seconds) {
  report::CheckResult c;
  c.name = std::move(name);
  c.target = report::CheckTarget::gpu(0);
  c.verdict = pass ? report::Verdict::kPass : report::Verdict::kFail;
  c.detail = std::move(detail);
  c.duration_s = seconds;
  return c;
}

// One path for every implementation: a LayerSession (detmoe/layer_session.h) on the seeded
// problem's device tensors, against the CPU oracle and a rerun of itself.
int run_verify(const VerifyArgs& a) {
  // Usage first (exit 2), then what the run needs (exit 3).
  const Shape shape = a.problem.shape().value();
  const RoutingSpec spec = a.problem.routing_spec().value();
  const ImplEntry impl = find_impl(a.impl).value();
  const bool backward = !a.forward_only;
  if (backward && !impl.has_backward)
    throw Error({ErrorCode::kNotImplemented,
                 fmt::format("verify --impl {}: its backward is not built yet; pass --forward-only", a.impl)});
  if (layer_session_loopback_only(a.impl) && a.backend != "loopback")
    throw Error({ErrorCode::kNotImplemented, fmt::format("verify --impl {} runs loopback ranks only (--backend loopback)", a.impl)});
  check_output_path("--json", a.json_path);
  if (const std::string why = no_gpu_reason(); !why.empty()) {
    fmt::print(stderr, "detmoe verify: {}; --impl {} runs on a GPU\n", why, a.impl);
    return kExitCouldNotRun;
  }
  const uint64_t seed = a.problem.seed;
  const Routing routing = generate_routing(shape, spec, seed).value();
  LayerConfig config;
  config.grad_precision = a.grad_dtype == "bf16" ? GradPrecision::kBF16 : GradPrecision::kFP32;
  config.save_h = !a.recompute_h;
  LayerSessionOptions options;
  options.reference_gemm = a.gemm == "grouped" ? ReferenceGemm::kGroupedBatched : ReferenceGemm::kPerExpert;

  fmt::print("verify {} ({} backend{}, {}{}) on {} routing={} seed={}\n", a.impl, a.backend,
             a.impl == "reference" ? fmt::format(", {} GEMMs", to_string(options.reference_gemm)) : "",
             backward ? fmt::format("{} weight gradients", to_string(config.grad_precision)) : "forward only",
             config.save_h ? "" : ", h recomputed", shape.to_string(), spec.to_string(), seed);
  report::RunReport rep;
  rep.run = report::current_run_info("verify", a.argv);
  rep.inventory = to_report(query_gpus());
  auto t0 = std::chrono::steady_clock::now();
  auto ex = make_exchange(a.backend, static_cast<int>(shape.P));
  if (!ex.ok()) throw Error(ex.status());
  auto session = ProblemSession::create(a.impl, shape, routing, seed, *ex, config, options).value();
  const std::vector<NamedTensor> got = session->run(backward).value();
  const double gpu_s = seconds_since(t0);
  bool pass = true;

  int64_t unwritten = 0;
  for (const NamedTensor& t : got) unwritten += count_nan(t);
  fmt::print("GPU run {:.2f} s; NaN-poisoned outputs left unwritten or NaN: {}\n", gpu_s, unwritten);
  pass &= unwritten == 0;
  rep.checks.push_back(check_result("every output written", unwritten == 0,
                                    fmt::format("{} elements left unwritten or NaN", unwritten), gpu_s));

  if (!a.no_oracle) {
    t0 = std::chrono::steady_clock::now();
    OracleInputs in = make_oracle_inputs(generate_layer_data(shape, seed), routing);
    if (!backward) in.dout.clear();
    OracleOptions opt;
    opt.grad_precision = config.grad_precision;
    opt.weight_grad_magnitudes = backward;
    const auto oracle = run_oracle(in, opt).value();
    const auto results =
        compare_all_with_tolerance(got, oracle_output_tensors(oracle, shape, opt), {}, oracle_magnitude_tensors(oracle, shape));
    const double oracle_s = seconds_since(t0);
    fmt::print("\nagainst the CPU oracle ({:.2f} s): |gpu − oracle| ≤ atol + rtol·|oracle|, rtol = 2⁻⁶, atol = 2⁻⁵·rms;\n"
               "weight gradients also pass when |gpu − oracle| ≤ 4·2⁻⁸·Σ|terms|\n{}",
               oracle_s, format_tolerance_table(results));
    for (const CompareResult& r : results) {
      pass &= r.ok();
      rep.checks.push_back(check_result(
          "oracle/" + r.name, r.ok(),
          r.problem.empty() ? fmt::format("worst error {:.3f} of the allowance (max |err| {:.3g}, by {}), {} of {} outside",
                                          r.max_err_ratio, r.max_abs_err, to_string(r.worst_bound), r.violations, r.count)
                            : r.problem,
          oracle_s));
    }
  }

  t0 = std::chrono::steady_clock::now();
  const std::vector<NamedTensor> again = session->run(backward).value();
  const auto bits = compare_all_bitwise(got, again);
  fmt::print("\nrerun (D0), bit for bit:\n{}", format_bitwise_table(bits));
  for (const BitwiseResult& b : bits) {
    pass &= b.equal;
    rep.checks.push_back(check_result("rerun/" + b.name, b.equal,
                                      b.equal ? "bitwise identical" : fmt::format("{} elements differ", b.differing),
                                      seconds_since(t0)));
  }
  fmt::print("\n{}\n", pass ? "PASS" : "FAIL");
  if (!a.json_path.empty()) {
    rep.run.state = report::RunState::kFinished;
    rep.run.finished_at = report::utc_now_iso8601();
    throw_if_error(report::save_run_report(a.json_path, rep));
  }
  return pass ? kExitOk : kExitCheckFailed;
}

}  // namespace

void add_verify_command(CLI::App& app, Action& run) {
  auto args = std::make_shared<VerifyArgs>();
  CLI::App* cmd = app.add_subcommand("verify", "compare an implementation (reference | megakernel) against the oracle and itself");
  args->problem.add_to(*cmd);
  cmd->add_option("--impl", args->impl, "implementation")->check(CLI::IsMember({"reference", "megakernel"}))->capture_default_str();
  cmd->add_option("--backend", args->backend, "how ranks exchange rows: loopback (P virtual ranks on GPU 0) or nccl (GPUs 0..P-1)")
      ->check(CLI::IsMember({"loopback", "nccl"}))->capture_default_str();
  cmd->add_option("--gemm", args->gemm, "reference GEMMs: per-expert cublasGemmEx or grouped cublasGemmGroupedBatchedEx")
      ->check(CLI::IsMember({"per-expert", "grouped"}))->capture_default_str();
  cmd->add_option("--grad-dtype", args->grad_dtype, "weight-gradient dtype")->check(CLI::IsMember({"fp32", "bf16"}))->capture_default_str();
  cmd->add_flag("--forward-only", args->forward_only, "skip the backward pass");
  cmd->add_flag("--recompute-h", args->recompute_h, "do not keep h for backward (recompute it; same bits)");
  cmd->add_flag("--no-oracle", args->no_oracle, "skip the CPU oracle (large shapes): only the rerun check");
  cmd->add_option("--json", args->json_path, "write the results as a run report (detmoe.run/1)");
  cmd->callback([args, &run] {
    args->argv = {"detmoe", "verify", "--impl", args->impl};
    for (const std::string& o : args->problem.given()) args->argv.push_back(o);
    run = [args] { return run_verify(*args); };
  });
}

}  // namespace detmoe::cli
