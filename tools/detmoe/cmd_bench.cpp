// detmoe bench: the layer benchmark suite (detmoe_perf_layer: Google Benchmark, CUDA events,
// median of --timed steps, L2 evicted before each) and the PyTorch torch._grouped_mm pipeline
// (perf/torch_moe_pipeline.py), run one after the other on the same GPU, shown in one table and
// written to one JSON (default: <impl>_layer_bench.json in the working directory, never the
// source tree).
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>

#include "bench_report.h"
#include "commands.h"
#include "data_paths.h"
#include "detmoe/layer_session.h"
#include "detmoe/output_file.h"
#include "detmoe/shapes.h"
#include "gpu_inventory.h"
#include "output_paths.h"
#include "problem_options.h"

#ifndef DETMOE_PERF_LAYER_PATH
#define DETMOE_PERF_LAYER_PATH "detmoe_perf_layer"
#endif

namespace detmoe::cli {
namespace {

namespace fs = std::filesystem;

struct BenchArgs {
  std::string impl = "reference";
  std::vector<std::string> shapes = {"qwen3-30b-a3b", "deepseek-v3", "mixtral-8x7b", "gpt-oss-120b"};
  std::vector<std::string> routings = {"balanced", "zipf1"};
  std::vector<std::string> gemms = {"per-expert"};
  int timed = 20;
  uint64_t seed = 1;
  bool no_torch = false;
  bool trace = false;
  double warmup_s = 0;
  std::string python;
  std::string perf_binary = helper_program("perf/detmoe_perf_layer");
  std::string script;  // default data_path("perf/torch_moe_pipeline.py"), resolved when the command runs
  std::string json_path;  // default: <impl>_layer_bench.json in the working directory
  std::string report_path;  // the run report (detmoe.run/1); none when empty
  std::vector<std::string> argv;
};

std::string joined(const std::vector<std::string>& v) { return fmt::format("{}", fmt::join(v, ",")); }

std::string default_python() {
  const char* venv = "/opt/torch/.venv/bin/python";
  return fs::exists(venv) ? venv : "python3";
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw Error({ErrorCode::kIoError, fmt::format("cannot read {}", path)});
  return nlohmann::json::parse(f);
}

int run_bench(const BenchArgs& a) {
  // An implementation without a backward is timed forward only, with the reference beside it.
  const bool forward_only = !layer_session_has_backward(a.impl);
  const std::string impls = a.impl == "reference" ? "reference" : a.impl + ",reference";
  for (const auto& s : a.shapes) (void)find_named_shape(s).value();
  const fs::path out = a.json_path.empty()
                           ? fs::path(a.impl + "_layer_bench.json")
                           : fs::path(a.json_path);
  // Checked now, not after minutes of measuring; a typo in the folder is not created.
  check_output_path("--json", out.string());
  check_output_path("--report", a.report_path);
  if (const std::string why = no_gpu_reason(); !why.empty()) {
    fmt::print(stderr, "detmoe bench: {}; nothing to measure\n", why);
    return kExitCouldNotRun;
  }
  if (!fs::exists(a.perf_binary)) {
    fmt::print(stderr, "detmoe bench: the layer benchmark {} is not built\n", a.perf_binary);
    return kExitCouldNotRun;
  }
  const std::string gb_json = out.string() + ".gbench.tmp", torch_json = out.string() + ".torch.tmp";

  const std::string cmd = fmt::format("\"{}\" --shapes={} --routings={} --gemm={} --impls={} --timed={} --seed={} "
                                      "--benchmark_out=\"{}\" --benchmark_out_format=json --benchmark_counters_tabular=true{}",
                                      a.perf_binary, joined(a.shapes), joined(a.routings), joined(a.gemms),
                                      impls, a.timed, a.seed, gb_json,
                                      std::string(forward_only ? " --benchmark_filter=/fwd/" : "") +
                                          (a.trace ? " --trace" : "") +
                                          (a.warmup_s > 0 ? fmt::format(" --warmup-seconds={}", a.warmup_s) : ""));
  fmt::print("$ {}\n", cmd);
  std::fflush(stdout);
  if (std::system(cmd.c_str()) != 0) {
    fmt::print(stderr, "detmoe bench: the layer benchmark failed\n");
    return kExitCouldNotRun;
  }
  nlohmann::json torch;
  if (!a.no_torch) {
    const std::string py = a.python.empty() ? default_python() : a.python;
    const std::string tcmd = fmt::format("NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 \"{}\" \"{}\" --shapes={} --routings={} --timed={} --seed={} --passes={} --json=\"{}\"",
                                         py, a.script.empty() ? data_path("perf/torch_moe_pipeline.py") : a.script, joined(a.shapes), joined(a.routings), a.timed, a.seed,
                                         forward_only ? "fwd" : "fwd,fwd+bwd", torch_json) +
                             (a.warmup_s > 0 ? fmt::format(" --warmup-seconds={}", a.warmup_s) : "");
    fmt::print("$ {}\n", tcmd);
    std::fflush(stdout);
    if (std::system(tcmd.c_str()) == 0) torch = read_json(torch_json);
    else fmt::print(stderr, "detmoe bench: the PyTorch pipeline failed; the table has no baseline\n");
  }
  const nlohmann::json gb = read_json(gb_json);
  std::string gpu = "?";
  if (gb.contains("context") && gb["context"].contains("gpu")) gpu = gb["context"]["gpu"];
  const std::vector<report::BenchmarkResult> results = bench_results(gb, torch, a.timed);
  const BenchTable bt = bench_table(results, a.impl);
  fmt::print("\n{} vs {}the PyTorch torch._grouped_mm pipeline on {} (median of {} steps, L2 evicted)\n{}", a.impl,
             a.impl == "reference" ? "" : "the reference and ", gpu, a.timed, bt.text);
  const nlohmann::json& table = bt.rows;
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  nlohmann::json j = {{"schema", "detmoe.bench/1"}, {"impl", a.impl}, {"gpu", gpu}, {"date", stamp},
                      {"timed_steps", a.timed}, {"rows", table}, {"google_benchmark", gb}};
  if (!torch.is_null()) j["torch_pipeline"] = torch;
  if (!a.report_path.empty()) {
    report::RunReport rep;
    rep.run = report::current_run_info("bench", a.argv);
    rep.inventory = to_report(query_gpus());
    rep.benchmarks = results;
    rep.run.state = report::RunState::kFinished;
    rep.run.finished_at = report::utc_now_iso8601();
    throw_if_error(report::save_run_report(a.report_path, rep));
    fmt::print("wrote {}\n", a.report_path);
  }
  const Status written = write_output_file(out.string(), j.dump(2) + "\n");
  std::error_code ec;
  fs::remove(gb_json, ec);
  fs::remove(torch_json, ec);
  throw_if_error(written);
  fmt::print("\nwrote {}\n", out.string());
  return kExitOk;
}

}  // namespace

void add_bench_command(CLI::App& app, Action& run) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand("bench", "benchmark an implementation beside the PyTorch baseline (Google Benchmark, CUDA events)");
  cmd->add_option("--impl", args->impl, "implementation (a GPU one; the reference is timed beside any other)")
      ->check(CLI::IsMember(layer_session_impls()))
      ->capture_default_str();
  cmd->add_option("--shape", args->shapes, "named shapes (repeatable)")->capture_default_str();
  cmd->add_option("--routing", args->routings, "routings (repeatable): balanced, zipf1")->capture_default_str();
  cmd->add_option("--gemm", args->gemms, "reference GEMM modes (repeatable): per-expert, grouped")
      ->check(CLI::IsMember({"per-expert", "grouped"}))->capture_default_str();
  cmd->add_option("--timed", args->timed, "timed steps per case (median)")->check(CLI::Range(1, 10000))->capture_default_str();
  cmd->add_option("--seed", args->seed, "data and routing seed")->check(seed_validator())->capture_default_str();
  cmd->add_flag("--no-torch", args->no_torch, "skip the PyTorch pipeline");
  cmd->add_option("--warmup-seconds", args->warmup_s,
                  "steps before the timed ones until S seconds have passed (the GPU's sustained, power-capped state)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--trace", args->trace, "megakernel: print each case's task timeline summary (per task kind)");
  cmd->add_option("--python", args->python, "Python with PyTorch (default: /opt/torch/.venv/bin/python or python3)");
  cmd->add_option("--perf-binary", args->perf_binary, "detmoe_perf_layer to run")->capture_default_str();
  cmd->add_option("--report", args->report_path, "also write the rows as a run report (detmoe.run/1)");
  cmd->add_option("--script", args->script, "the PyTorch pipeline script (default: perf/torch_moe_pipeline.py of the data folder)");
  cmd->add_option("--json", args->json_path, "combined JSON output (default: <impl>_layer_bench.json in the working directory)");
  cmd->callback([args, &run] {
    args->argv = {"detmoe", "bench", "--impl", args->impl, "--timed", std::to_string(args->timed)};
    run = [args] { return run_bench(*args); };
  });
}

}  // namespace detmoe::cli
