// detmoe verify: run a GPU implementation of the layer on a seeded problem, compare every
// output with the CPU oracle (tolerance rule of docs/NUMERICS.md) and with a rerun of itself
// (bits, D0), print a table, exit 0 (all pass) or 1. No GPU: exit 3.
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>

#include "commands.h"
#include "detmoe/compare.h"
#include "detmoe/data.h"
#include "detmoe/oracle.h"
#include "detmoe/output_file.h"
#include "detmoe/reference_session.h"
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

// The megakernel (forward only for now) through the implementation registry: against the oracle
// and against a rerun of itself.
int run_verify_megakernel(const VerifyArgs& a) {
  const Shape shape = a.problem.shape().value();
  const RoutingSpec spec = a.problem.routing_spec().value();
  const HostProblem problem = make_seeded_problem(shape, spec, a.problem.seed, false, GradPrecision::kFP32).value();
  const ImplEntry impl = find_impl("megakernel").value();
  fmt::print("verify megakernel (forward) on {} routing={} seed={}\n", shape.to_string(), spec.to_string(), a.problem.seed);
  const std::vector<NamedTensor> got = impl.run(problem).value();
  bool pass = true;
  int64_t unwritten = 0;
  for (const NamedTensor& t : got) unwritten += count_nan(t);
  fmt::print("NaN-poisoned outputs left unwritten or NaN: {}\n", unwritten);
  pass &= unwritten == 0;
  if (!a.no_oracle) {
    const auto results = compare_all_with_tolerance(got, find_impl("oracle").value().run(problem).value());
    fmt::print("\nagainst the CPU oracle:\n{}", format_tolerance_table(results));
    for (const CompareResult& r : results) pass &= r.ok();
  }
  const auto bits = compare_all_bitwise(got, impl.run(problem).value());
  fmt::print("\nrerun (D0), bit for bit:\n{}", format_bitwise_table(bits));
  for (const BitwiseResult& b : bits) pass &= b.equal;
  fmt::print("\n{}\n", pass ? "PASS" : "FAIL");
  return pass ? kExitOk : kExitCheckFailed;
}

int run_verify(const VerifyArgs& a) {
  // Usage first (exit 2), then what the run needs (exit 3).
  const Shape shape = a.problem.shape().value();
  const RoutingSpec spec = a.problem.routing_spec().value();
  if (a.impl == "megakernel") {
    if (!a.forward_only)
      throw Error({ErrorCode::kNotImplemented, "verify --impl megakernel: the megakernel's backward is not built yet; pass --forward-only"});
    if (!a.json_path.empty())
      throw Error({ErrorCode::kNotImplemented, fmt::format("verify --impl megakernel does not write --json {} yet", a.json_path)});
  }
  check_output_path("--json", a.json_path);
  if (const std::string why = no_gpu_reason(); !why.empty()) {
    fmt::print(stderr, "detmoe verify: {}; --impl {} runs on a GPU\n", why, a.impl);
    return kExitCouldNotRun;
  }
  if (a.impl == "megakernel") return run_verify_megakernel(a);
  const uint64_t seed = a.problem.seed;
  const Routing routing = generate_routing(shape, spec, seed).value();
  LayerConfig config;
  config.grad_precision = a.grad_dtype == "bf16" ? GradPrecision::kBF16 : GradPrecision::kFP32;
  config.save_h = !a.recompute_h;
  ReferenceOptions options;
  options.gemm = a.gemm == "grouped" ? ReferenceGemm::kGroupedBatched : ReferenceGemm::kPerExpert;
  const bool backward = !a.forward_only;

  fmt::print("verify reference ({} backend, {} GEMMs, {} weight gradients{}) on {} routing={} seed={}\n", a.backend,
             to_string(options.gemm), to_string(config.grad_precision), config.save_h ? "" : ", h recomputed",
             shape.to_string(), spec.to_string(), seed);
  auto t0 = std::chrono::steady_clock::now();
  auto ex = make_exchange(a.backend, static_cast<int>(shape.P));
  if (!ex.ok()) throw Error(ex.status());
  auto session = ReferenceSession::create(shape, routing, seed, *ex, config, options).value();
  const std::vector<NamedTensor> got = session->run(backward).value();
  const double gpu_s = seconds_since(t0);

  nlohmann::json j;
  j["schema"] = "detmoe.verify/1";
  j["impl"] = "reference";
  j["shape"] = {{"T", shape.T}, {"H", shape.H}, {"F", shape.F}, {"E", shape.E}, {"k", shape.k}, {"P", shape.P}, {"Fs", shape.Fs}};
  j["routing"] = spec.to_string();
  j["seed"] = seed;
  j["backend"] = a.backend;
  bool pass = true;

  int64_t unwritten = 0;
  for (const NamedTensor& t : got) unwritten += count_nan(t);
  fmt::print("GPU run {:.2f} s; NaN-poisoned outputs left unwritten or NaN: {}\n", gpu_s, unwritten);
  pass &= unwritten == 0;

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
    fmt::print("\nagainst the CPU oracle ({:.2f} s): |gpu − oracle| ≤ atol + rtol·|oracle|, rtol = 2⁻⁶, atol = 2⁻⁵·rms;\n"
               "weight gradients also pass when |gpu − oracle| ≤ 4·2⁻⁸·Σ|terms|\n{}",
               seconds_since(t0), format_tolerance_table(results));
    for (const CompareResult& r : results) {
      pass &= r.ok();
      j["tolerance"].push_back({{"output", r.name}, {"max_abs_err", r.max_abs_err}, {"atol", r.atol}, {"rtol", r.rtol},
                                {"terms_rtol", r.terms_rtol}, {"max_err_ratio", r.max_err_ratio},
                                {"worst_bound", to_string(r.worst_bound)}, {"passed_by_terms", r.passed_by_terms},
                                {"violations", r.violations}, {"ok", r.ok()}});
    }
  }

  const std::vector<NamedTensor> again = session->run(backward).value();
  const auto bits = compare_all_bitwise(got, again);
  fmt::print("\nrerun (D0), bit for bit:\n{}", format_bitwise_table(bits));
  for (const BitwiseResult& b : bits) {
    pass &= b.equal;
    j["rerun"].push_back({{"output", b.name}, {"identical", b.equal}, {"differing", b.differing}});
  }
  fmt::print("\n{}\n", pass ? "PASS" : "FAIL");
  j["pass"] = pass;
  if (!a.json_path.empty()) throw_if_error(write_output_file(a.json_path, j.dump(2) + "\n"));
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
  cmd->add_option("--json", args->json_path, "write the results as JSON");
  cmd->callback([args, &run] { run = [args] { return run_verify(*args); }; });
}

}  // namespace detmoe::cli
