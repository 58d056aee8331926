// detmoe run: replay a problem from a safetensors file (e.g. captured from a PyTorch training
// step) through one implementation and write every output as safetensors.
//   detmoe run --impl oracle --inputs in.safetensors --outputs out.safetensors
//   detmoe run --write-inputs in.safetensors --shape small --seed 3   (a seeded input file)
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "commands.h"
#include "detmoe/compare.h"
#include "detmoe/safetensors.h"
#include "impl_registry.h"
#include "output_paths.h"
#include "problem_options.h"

namespace detmoe::cli {
namespace {

struct RunArgs {
  std::string impl = "oracle";
  std::string inputs, outputs, write_inputs;
  std::string grad_dtype = "fp32";
  bool forward_only = false;
  bool check_oracle = false;
  ProblemOptions problem;
  std::vector<std::string> replay_given;  // --inputs/--outputs/--impl as given, to refuse them with --write-inputs
};

// A capture with a misspelt name ("dot" for "dout") would otherwise replay silently without the
// part it meant to carry: name every tensor that is not used, and say when there is no backward.
void note_unused_tensors(const std::string& path, const std::vector<std::string>& unused, bool has_dout) {
  for (const std::string& name : unused)
    fmt::print(stderr, "detmoe run: {}: ignoring unknown tensor '{}' (inputs are {})\n", path, name, fmt::join(kProblemInputNames, ", "));
  if (!has_dout) fmt::print(stderr, "detmoe run: {} has no 'dout': the run is forward-only\n", path);
}

std::vector<NamedTensor> problem_tensors(const HostProblem& p) {
  const Shape& s = p.shape;
  const int64_t N = s.tokens_global();
  auto bf16 = [](const char* name, std::vector<int64_t> shape, const std::vector<uint16_t>& v) {
    NamedTensor t{name, DType::kBF16, std::move(shape), {}};
    t.bytes.resize(v.size() * 2);
    std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
    return t;
  };
  std::vector<NamedTensor> ts;
  ts.push_back(bf16("x", {N, s.H}, p.data.x));
  NamedTensor idx{"topk_idx", DType::kInt32, {N, s.k}, {}};
  idx.bytes.resize(p.routing.topk_idx.size() * 4);
  std::memcpy(idx.bytes.data(), p.routing.topk_idx.data(), idx.bytes.size());
  ts.push_back(std::move(idx));
  NamedTensor w{"topk_w", DType::kFP32, {N, s.k}, {}};
  w.bytes.resize(p.routing.topk_w.size() * 4);
  std::memcpy(w.bytes.data(), p.routing.topk_w.data(), w.bytes.size());
  ts.push_back(std::move(w));
  ts.push_back(bf16("w_gate", {s.E, s.F, s.H}, p.data.w_gate));
  ts.push_back(bf16("w_up", {s.E, s.F, s.H}, p.data.w_up));
  ts.push_back(bf16("w_down", {s.E, s.H, s.F}, p.data.w_down));
  if (s.Fs > 0) {
    ts.push_back(bf16("ws_gate", {s.Fs, s.H}, p.data.ws_gate));
    ts.push_back(bf16("ws_up", {s.Fs, s.H}, p.data.ws_up));
    ts.push_back(bf16("ws_down", {s.H, s.Fs}, p.data.ws_down));
  }
  if (p.backward()) ts.push_back(bf16("dout", {N, s.H}, p.data.dout));
  return ts;
}

int run_replay(const RunArgs& a) {
  const GradPrecision grad = a.grad_dtype == "bf16" ? GradPrecision::kBF16 : GradPrecision::kFP32;
  if (!a.write_inputs.empty()) {
    if (!a.replay_given.empty())
      throw Error(invalid_argument(fmt::format("{} {} to a replay, not to --write-inputs {}", fmt::join(a.replay_given, ", "),
                                               a.replay_given.size() == 1 ? "applies" : "apply", a.write_inputs)));
    Shape shape = a.problem.shape().value();
    if (shape.P != 1) throw Error(invalid_argument(fmt::format("--write-inputs writes one rank's problem; P = {} must be 1", shape.P)));
    const HostProblem p = make_seeded_problem(shape, a.problem.routing_spec().value(), a.problem.seed, !a.forward_only, grad).value();
    throw_if_error(write_safetensors(a.write_inputs, problem_tensors(p),
                                     {{"detmoe", "seeded inputs"}, {"shape", shape.to_string()}, {"seed", std::to_string(a.problem.seed)}}));
    fmt::print("wrote {} ({})\n", a.write_inputs, shape.to_string());
    return kExitOk;
  }
  if (a.inputs.empty() || a.outputs.empty()) throw Error(invalid_argument("run needs --inputs and --outputs (or --write-inputs)"));
  // A replay's problem is the file's: a seed or shape given beside it would be silently ignored.
  if (const auto given = a.problem.given(); !given.empty())
    throw Error(invalid_argument(fmt::format("{} {} to --write-inputs only; a replay takes its problem from --inputs {}",
                                             fmt::join(given, ", "), given.size() == 1 ? "applies" : "apply", a.inputs)));
  refuse_same_file("--outputs", a.outputs, "--inputs", a.inputs);
  refuse_directory_input("--inputs", a.inputs);
  check_output_path("--outputs", a.outputs);
  const ImplEntry impl = find_impl(a.impl).value();
  std::vector<std::string> unused;
  HostProblem p = read_problem_safetensors(a.inputs, grad, &unused).value();
  note_unused_tensors(a.inputs, unused, p.backward());
  if (a.forward_only) p.data.dout.clear();
  const std::vector<NamedTensor> outs = impl.run(p).value();
  throw_if_error(write_safetensors(a.outputs, outs, {{"impl", a.impl}, {"platform", impl.platform()}}));
  fmt::print("{} on {}: {} outputs -> {}\n", a.impl, p.shape.to_string(), outs.size(), a.outputs);
  for (const NamedTensor& t : outs) fmt::print("  {:<10} {:<5} {}\n", t.name, to_string(t.dtype), t.hash().hex());
  if (!a.check_oracle || a.impl == "oracle") return kExitOk;
  // The same problem through the CPU oracle, compared with the docs/NUMERICS.md tolerance: a
  // replayed capture checked on the GPU path without writing a second file.
  const std::vector<NamedTensor> want = find_impl("oracle").value().run(p).value();
  bool ok = true;
  for (const CompareResult& r : compare_all_with_tolerance(outs, want)) {
    ok &= r.ok();
    fmt::print("  check {:<10} {} worst error {:.3f} of the allowance{}\n", r.name, r.ok() ? "ok  " : "FAIL", r.max_err_ratio,
               r.ok() ? "" : fmt::format(", {} of {} out of tolerance, first {} got {} want {}", r.violations, r.count,
                                         r.first_bad_index, r.first_bad_got, r.first_bad_ref));
  }
  fmt::print("{} vs the oracle: {}\n", a.impl, ok ? "within tolerance" : "OUT OF TOLERANCE");
  return ok ? kExitOk : kExitCheckFailed;
}

}  // namespace

void add_run_command(CLI::App& app, Action& run) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand("run", "replay tensors from safetensors through an implementation, write its outputs as safetensors");
  cmd->add_option("--impl", args->impl, "oracle | reference | megakernel")->capture_default_str();
  cmd->add_option("--inputs", args->inputs, "x, topk_idx, topk_w, w_gate, w_up, w_down [, ws_*] [, dout]");
  cmd->add_option("--outputs", args->outputs, "where to write out, y, d_x, d_topk_w, dw_* …");
  cmd->add_option("--write-inputs", args->write_inputs, "instead: write the seeded problem of --shape/--seed as an input file");
  cmd->add_option("--grad-dtype", args->grad_dtype, "weight-gradient dtype")->check(CLI::IsMember({"fp32", "bf16"}))->capture_default_str();
  cmd->add_flag("--forward-only", args->forward_only, "ignore dout");
  cmd->add_flag("--check-oracle", args->check_oracle, "also run the CPU oracle on the same tensors and compare (docs/NUMERICS.md tolerance; exit 1 outside it)");
  args->problem.add_to(*cmd);
  cmd->callback([args, cmd, &run] {
    for (const char* name : {"--impl", "--inputs", "--outputs"})
      if (cmd->count(name) > 0) args->replay_given.push_back(name);
    run = [args] { return run_replay(*args); };
  });
}

}  // namespace detmoe::cli
