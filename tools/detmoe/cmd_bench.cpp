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

struct Row {
  double ref_ms = 0, ref_tflops = 0, grouped_ms = 0, mk_ms = 0, mk_tflops = 0, torch_ms = 0, torch_tflops = 0;
  // NVML energy per step, flush and gaps included (0: not measured): at the board's power cap a
  // step's time follows its energy (docs/perf-journal/megakernel-forward.md step 7).
  double mk_joules = 0, mk_watts = 0, torch_joules = 0, torch_watts = 0;
};

int run_bench(const BenchArgs& a) {
  const bool mk = a.impl == "megakernel";  // forward only; the reference is measured beside it
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
                                      mk ? "megakernel,reference" : "reference", a.timed, a.seed, gb_json,
                                      std::string(mk ? " --benchmark_filter=/fwd/" : "") + (a.trace ? " --trace" : ""));
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
                                         mk ? "fwd" : "fwd,fwd+bwd", torch_json);
    fmt::print("$ {}\n", tcmd);
    std::fflush(stdout);
    if (std::system(tcmd.c_str()) == 0) torch = read_json(torch_json);
    else fmt::print(stderr, "detmoe bench: the PyTorch pipeline failed; the table has no baseline\n");
  }
  const nlohmann::json gb = read_json(gb_json);

  // key: shape/routing/pass
  std::map<std::string, Row> rows;
  std::vector<std::string> order;
  for (const auto& b : gb["benchmarks"]) {
    std::string name = b["name"];  // reference/<shape>/<routing>/<pass>[/grouped] or megakernel/…
    if (!b.contains("median_ms")) continue;
    const bool is_mk = name.rfind("megakernel/", 0) == 0;
    if (!is_mk && name.rfind("reference/", 0) != 0) continue;
    name = name.substr(is_mk ? 11 : 10);
    if (const size_t cut = name.find("/iterations:"); cut != std::string::npos) name.resize(cut);  // GB's suffixes
    const bool grouped = name.size() > 8 && name.compare(name.size() - 8, 8, "/grouped") == 0;
    if (grouped) name = name.substr(0, name.size() - 8);
    if (!rows.count(name)) order.push_back(name);
    Row& r = rows[name];
    if (is_mk) {
      r.mk_ms = b["median_ms"];
      r.mk_tflops = b["tflops"];
      r.mk_joules = b.value("joules_per_step", 0.0);
      r.mk_watts = b.value("avg_watts", 0.0);
    } else if (grouped) r.grouped_ms = b["median_ms"];
    else {
      r.ref_ms = b["median_ms"];
      r.ref_tflops = b["tflops"];
    }
  }
  if (!torch.is_null())
    for (const auto& t : torch["results"]) {
      const std::string key = fmt::format("{}/{}/{}", t["shape"].get<std::string>(), t["routing"].get<std::string>(),
                                          t["pass"].get<std::string>());
      if (!rows.count(key)) continue;
      rows[key].torch_ms = t["median_ms"];
      rows[key].torch_tflops = t["tflops"];
      rows[key].torch_joules = t.value("joules_per_step", 0.0);
      rows[key].torch_watts = t.value("avg_watts", 0.0);
    }

  const bool any_grouped = std::find(a.gemms.begin(), a.gemms.end(), "grouped") != a.gemms.end();
  std::string gpu = "?";
  if (gb.contains("context") && gb["context"].contains("gpu")) gpu = gb["context"]["gpu"];
  nlohmann::json table = nlohmann::json::array();
  if (mk) {
    // Speedup = torch time / megakernel time: the targets are stated this way (≥ 1.3×).
    fmt::print("\nforward megakernel vs PyTorch torch._grouped_mm pipeline on {} (median of {} steps, L2 evicted)\n", gpu,
               a.timed);
    fmt::print("{:<34} {:>13} {:>9} {:>13} {:>10} {:>9} {:>14} {:>17} {:>16}\n", "shape / routing / pass", "megakernel ms",
               "TFLOP/s", "reference ms", "torch ms", "TFLOP/s", "torch/mk (x)", "mk J/step (W)", "torch J/step (W)");
    for (const std::string& key : order) {
      const Row& r = rows[key];
      const double speedup = r.torch_ms > 0 && r.mk_ms > 0 ? r.torch_ms / r.mk_ms : 0.0;
      auto energy = [](double j, double w) { return j > 0 ? fmt::format("{:.3f} ({:.0f})", j, w) : std::string("-"); };
      fmt::print("{:<34} {:>13.3f} {:>9.1f} {:>13.3f} {:>10} {:>9} {:>14} {:>17} {:>16}\n", key, r.mk_ms, r.mk_tflops, r.ref_ms,
                 r.torch_ms > 0 ? fmt::format("{:.3f}", r.torch_ms) : "-",
                 r.torch_ms > 0 ? fmt::format("{:.1f}", r.torch_tflops) : "-",
                 speedup > 0 ? fmt::format("{:.2f}", speedup) : "-", energy(r.mk_joules, r.mk_watts),
                 energy(r.torch_joules, r.torch_watts));
      nlohmann::json row = {{"case", key}, {"megakernel_ms", r.mk_ms}, {"megakernel_tflops", r.mk_tflops},
                            {"reference_ms", r.ref_ms}};
      if (r.mk_joules > 0) {
        row["megakernel_joules_per_step"] = r.mk_joules;
        row["megakernel_avg_watts"] = r.mk_watts;
      }
      if (r.torch_ms > 0) {
        row["torch_ms"] = r.torch_ms;
        row["torch_tflops"] = r.torch_tflops;
        row["torch_over_megakernel"] = speedup;
      }
      if (r.torch_joules > 0) {
        row["torch_joules_per_step"] = r.torch_joules;
        row["torch_avg_watts"] = r.torch_watts;
      }
      table.push_back(row);
    }
  } else {
    fmt::print("\nreference layer vs PyTorch torch._grouped_mm pipeline on {} (median of {} steps, L2 evicted)\n", gpu, a.timed);
    fmt::print("{:<34} {:>13} {:>9} {}{:>13} {:>9} {:>10}\n", "shape / routing / pass", "reference ms", "TFLOP/s",
               any_grouped ? fmt::format("{:>13} ", "grouped ms") : "", "torch ms", "TFLOP/s", "ref/torch");
    for (const std::string& key : order) {
      const Row& r = rows[key];
      const double ratio = r.torch_ms > 0 ? r.ref_ms / r.torch_ms : 0.0;
      fmt::print("{:<34} {:>13.3f} {:>9.1f} {}{:>13} {:>9} {:>10}\n", key, r.ref_ms, r.ref_tflops,
                 any_grouped ? fmt::format("{:>13.3f} ", r.grouped_ms) : "",
                 r.torch_ms > 0 ? fmt::format("{:.3f}", r.torch_ms) : "-",
                 r.torch_ms > 0 ? fmt::format("{:.1f}", r.torch_tflops) : "-",
                 r.torch_ms > 0 ? fmt::format("{:.2f}x", ratio) : "-");
      nlohmann::json row = {{"case", key}, {"reference_ms", r.ref_ms}, {"reference_tflops", r.ref_tflops}};
      if (r.grouped_ms > 0) row["reference_grouped_ms"] = r.grouped_ms;
      if (r.torch_ms > 0) {
        row["torch_ms"] = r.torch_ms;
        row["torch_tflops"] = r.torch_tflops;
        row["reference_over_torch"] = ratio;
      }
      table.push_back(row);
    }
  }
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
    rep.benchmarks = bench_results(gb, torch, a.timed);
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
  cmd->add_option("--impl", args->impl, "implementation")->check(CLI::IsMember({"reference", "megakernel"}))->capture_default_str();
  cmd->add_option("--shape", args->shapes, "named shapes (repeatable)")->capture_default_str();
  cmd->add_option("--routing", args->routings, "routings (repeatable): balanced, zipf1")->capture_default_str();
  cmd->add_option("--gemm", args->gemms, "reference GEMM modes (repeatable): per-expert, grouped")
      ->check(CLI::IsMember({"per-expert", "grouped"}))->capture_default_str();
  cmd->add_option("--timed", args->timed, "timed steps per case (median)")->check(CLI::Range(1, 10000))->capture_default_str();
  cmd->add_option("--seed", args->seed, "data and routing seed")->check(seed_validator())->capture_default_str();
  cmd->add_flag("--no-torch", args->no_torch, "skip the PyTorch pipeline");
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
