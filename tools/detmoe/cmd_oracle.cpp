// detmoe oracle: run the CPU oracle on a seeded problem and print per-output hashes and norms.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include "commands.h"
#include "detmoe/data.h"
#include "detmoe/host_memory.h"
#include "detmoe/oracle.h"
#include "detmoe/output_file.h"
#include "output_paths.h"
#include "problem_options.h"

namespace detmoe::cli {
namespace {

struct OracleArgs {
  ProblemOptions problem;
  std::string json_path;
  bool forward_only = false;
  bool exact = false;
  std::string grad_dtype = "fp32";
  int threads = 0;
};

int run_oracle_command(const OracleArgs& a) {
  const Shape shape = a.problem.shape().value();
  const RoutingSpec spec = a.problem.routing_spec().value();
  check_output_path("--json", a.json_path);
  OracleOptions opt;
  opt.mode = a.exact ? OracleMode::kExact : OracleMode::kContract;
  opt.grad_precision = a.grad_dtype == "bf16" ? GradPrecision::kBF16 : GradPrecision::kFP32;
  opt.threads = a.threads;
  // Before any allocation: a valid problem too large for this machine fails at once, naming the amount.
  throw_if_error(require_host_bytes(problem_host_bytes(shape, true) + oracle_host_bytes(shape, !a.forward_only, opt),
                                    "the CPU oracle of " + shape.to_string()));
  const auto t0 = std::chrono::steady_clock::now();
  const LayerData data = generate_layer_data(shape, a.problem.seed);
  const Routing routing = generate_routing(shape, spec, a.problem.seed).value();
  OracleInputs in = make_oracle_inputs(data, routing);
  if (a.forward_only) in.dout.clear();
  const OracleOutputs out = run_oracle(in, opt).value();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  nlohmann::json j;
  j["schema"] = "detmoe.oracle/1";
  j["shape"] = {{"T", shape.T}, {"H", shape.H}, {"F", shape.F}, {"E", shape.E}, {"k", shape.k}, {"P", shape.P}, {"Fs", shape.Fs}};
  j["shape_name"] = a.problem.shape_name;
  j["routing"] = spec.to_string();
  j["seed"] = a.problem.seed;
  j["mode"] = a.exact ? "exact" : "contract";
  j["grad_precision"] = to_string(opt.grad_precision);
  j["seconds"] = seconds;
  fmt::print("oracle {} routing={} seed={} mode={} ({:.2f} s)\n", shape.to_string(), spec.to_string(), a.problem.seed,
             a.exact ? "exact" : "contract", seconds);
  fmt::print("{:<10} {:<6} {:>12} {:>14} {}\n", "output", "dtype", "elements", "l2 norm", "xxh3-128");
  for (const NamedTensor& t : oracle_output_tensors(out, shape, opt)) {
    double sq = 0;
    for (int64_t i = 0; i < t.numel(); ++i) sq += t.at(i) * t.at(i);
    const double norm = std::sqrt(sq);
    const std::string hash = t.hash().hex();
    fmt::print("{:<10} {:<6} {:>12} {:>14.6e} {}\n", t.name, to_string(t.dtype), t.numel(), norm, hash);
    j["outputs"].push_back({{"name", t.name}, {"dtype", to_string(t.dtype)}, {"shape", t.shape}, {"l2_norm", norm}, {"xxh3_128", hash}});
  }
  if (!a.json_path.empty()) throw_if_error(write_output_file(a.json_path, j.dump(2) + "\n"));
  return kExitOk;
}

}  // namespace

void add_oracle_command(CLI::App& app, Action& run) {
  auto args = std::make_shared<OracleArgs>();
  CLI::App* cmd = app.add_subcommand("oracle", "CPU oracle of the layer (fp64, contract rounding): per-output hashes and norms");
  args->problem.add_to(*cmd);
  cmd->add_option("--json", args->json_path, "write the hashes and norms as JSON");
  cmd->add_flag("--forward-only", args->forward_only, "skip the backward pass");
  cmd->add_flag("--exact", args->exact, "no bf16 rounding anywhere (fp64 throughout)");
  cmd->add_option("--grad-dtype", args->grad_dtype, "weight-gradient dtype")->check(CLI::IsMember({"fp32", "bf16"}))->capture_default_str();
  cmd->add_option("--threads", args->threads, "worker threads, 0 = all cores");
  cmd->callback([args, &run] { run = [args] { return run_oracle_command(*args); }; });
}

}  // namespace detmoe::cli
