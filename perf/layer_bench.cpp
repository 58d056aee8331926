// detmoe_perf_layer: the whole MoE layer, forward and forward+backward, on the DESIGN.md §7
// shapes, for any implementation of the seam by name (ProblemSession: the reference, the
// megakernel; fwd+bwd where the implementation has a backward).
//
// One benchmark per (implementation, shape, routing, pass). Each times `--timed` single steps
// (benchmark iterations) with CUDA events on the layer's stream after two warm-up steps; before
// every step a 2×L2 memset evicts the cache (outside the timed region), so no step starts warm.
// A forward step includes the routing plan and its one host synchronisation. Counters:
// median_ms (what reports use), tflops (DESIGN.md §7 FLOPs over the median), min_ms, max_ms.
//
// Flags after Google Benchmark's own:
//   --shapes=qwen3-30b-a3b,deepseek-v3,mixtral-8x7b,gpt-oss-120b  --routings=balanced,zipf1
//   --gemm=per-expert[,grouped]  --impls=reference[,megakernel]  --timed=20  --seed=1
//   --trace: the megakernel records its task timeline; the last timed launch's summary (per task
//            kind: count, first start, last end, busy time per CTA, mainloop / signal / epilogue
//            per GEMM tile; the SM clock it ran at) goes to stderr. Launches stay back to back.
//   --trace-out=DIR: --trace, and the last timed launch's whole timeline as Chrome trace JSON in
//            DIR/megakernel-<shape>-<routing>.trace.json (Perfetto; one track per CTA)
//   --trace-each: also one line per timed launch, read back after each (outside the timed region,
//            but the read-back leaves the GPU idle between launches, so it runs cooler and
//            clocks higher than back to back: compare its clock with --trace's)
//   --energy-window=S: after the timed steps, more steps of the same kind (flush, step, sync) until
//            S seconds (default 1) have passed since the first timed one; the NVML energy counter
//            over that window gives joules_per_step and avg_watts (perf/gpu_energy.h). 0: off.
//   --phases: each timed step's time between the implementation's phase marks (detmoe/phase_marks.h:
//            the reference's glue kernels and GEMM calls, the megakernel's launches), in the same
//            back-to-back steps as median_ms: per phase the median over the timed steps as a counter
//            "phase_ms:<name>" and one line on stderr. P = 1 only (one stream).
//   --steps-out=FILE: append one JSON line per benchmark to FILE: every timed step's ms in order,
//            with NVML's SM clock (MHz) and clock-event reasons sampled right after it, and the
//            counter sm_mhz (the median sample). p25_ms and p75_ms are reported in every case.
//   --warmup-seconds=S: after the two warm-up steps, more (flush, step, sync) until S seconds have
//            passed, so the timed steps start in the GPU's sustained state: on the H200 the 700 W
//            limiter lowers the clocks ≈ 10 steps into a gpt-oss run (docs/perf-journal/
//            megakernel-forward.md step 11), and without this the median lands in either mode.
//            Default 0 (two warm-up steps only, as the stored baselines were measured).
//   --grad-dtype=bf16: weight gradients in bf16 (default fp32), as the PyTorch op computes them
//            for bf16 weights; adds "/bf16-grads" to the fwd+bwd names.
//   --no-save-h: LayerConfig::save_h off (GEMM1 stores a only; the backward recomputes h): what
//            the h stores cost the forward and the recompute the backward. Adds "/no-save-h" to
//            the name.
//   --wgrad-tickets=0|1: LayerConfig::weight_grad_tickets (default: the config's), the weight-gradient
//            launches' tile deal (static or tickets); a speed knob, so a build can A/B it. Set once
//            per process, so neither the names nor the session key carry it (as --wgrad-launch).
//   --wgrad-band-kb=N: LayerConfig::weight_grad_band_budget_kb (default: the config's; 0 = the GEMM
//            core's fixed bands), the weight-gradient launches' tile order; a speed knob, set once
//            per process like --wgrad-tickets.
//   --wgrad-stream=0|1: LayerConfig::weight_grad_stream_stores (default: the config's), the
//            weight-gradient launches' evict-first stores; set once per process like --wgrad-tickets.
//   --wgrad-ring=0|1: LayerConfig::weight_grad_deep_ring (default: the config's), the weight-gradient
//            launches' deep store ring; set once per process like --wgrad-tickets.
//   --wgrad-launch=auto|fused|gate-up-later|second: LayerConfig::weight_grad_launch (default auto). The names
//            do not carry it, so that A/B calls compare the same rows across settings.
//   --knobs=C:R[,C:R...]: megakernel LayerConfig settings to time, comm_sms C and overlap_rows R
//            (default 0:0); a setting other than 0:0 adds "/comm<C>-rows<R>" to the name. The
//            knobs change speed only, never bits (D1), so this is how their effect is measured.
// Every implementation runs the same seeded data and routing; a device fault fails the benchmark
// run (exit 3) with its Status.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "detmoe/layer_session.h"
#include "detmoe/median.h"
#include "detmoe/phase_marks.h"
#include "detmoe/problem_session.h"
#include "detmoe/routing.h"
#include "detmoe/shapes.h"
#include "megakernel/host/layer_trace.h"
#include "perf/gpu_energy.h"

namespace {

using namespace detmoe;
using perf::GpuEnergyMeter;

struct Options {
  std::vector<std::string> shapes = {"qwen3-30b-a3b", "deepseek-v3", "mixtral-8x7b", "gpt-oss-120b"};
  std::vector<std::string> routings = {"balanced", "zipf1"};
  std::vector<std::string> gemms = {"per-expert"};
  std::vector<std::string> impls = {"reference"};
  int timed = 20;
  uint64_t seed = 1;
  bool trace = false;
  bool trace_each = false;
  std::string trace_out;  // directory for the Chrome trace JSON, empty: none
  double energy_window_s = 1.0;
  double warmup_s = 0.0;
  bool save_h = true;
  bool bf16_grads = false;
  std::vector<std::pair<int32_t, int32_t>> knobs = {{0, 0}};  // (comm_sms, overlap_rows)
};

void die(const std::string& what) {
  std::fprintf(stderr, "detmoe_perf_layer: %s\n", what.c_str());
  std::exit(3);
}
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) die(std::string(what) + ": " + cudaGetErrorString(e));
}
void check(const Status& s, const char* what) {
  if (!s.ok()) die(std::string(what) + ": " + s.to_string());
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// What one benchmark runs besides (impl, shape, routing, pass): the settings only some
// implementations have (the reference's GEMM calls, the megakernel's knobs and trace).
struct Variant {
  std::string gemm = "per-expert";
  std::pair<int32_t, int32_t> knobs{0, 0};  // (comm_sms, overlap_rows)
  bool save_h = true;
  bool trace = false, trace_each = false;
  std::string trace_out;
};

// The settings that differ from the defaults, as a benchmark name's suffix ("/grouped",
// "/comm4-rows64", "/no-save-h"); the trace is not in it (it changes no bits).
std::string variant_suffix(const Variant& v) {
  std::string s;
  if (v.gemm != "per-expert") s += "/" + v.gemm;
  if (v.knobs != std::pair<int32_t, int32_t>{0, 0})
    s += "/comm" + std::to_string(v.knobs.first) + "-rows" + std::to_string(v.knobs.second);
  if (!v.save_h) s += "/no-save-h";
  return s;
}

// The session of the benchmark that runs now; rebuilt when what it was made for changes, so only
// one problem's buffers are alive at a time.
struct Current {
  std::string key;
  std::unique_ptr<ProblemSession> session;
  void* flush = nullptr;
  size_t flush_bytes = 0;
};
Current& current() {
  static Current c;
  return c;
}

// --grad-dtype=bf16, set once from the command line before any benchmark runs.
bool& bf16_weight_grads() {
  static bool v = false;
  return v;
}

// --wgrad-launch=, set once from the command line (LayerConfig::weight_grad_launch).
WeightGradLaunch& wgrad_launch() {
  static WeightGradLaunch v = WeightGradLaunch::kAuto;
  return v;
}

// --wgrad-tickets=0|1, set once from the command line (LayerConfig::weight_grad_tickets; unset:
// the config's default).
std::optional<bool>& wgrad_tickets() {
  static std::optional<bool> v;
  return v;
}

// --wgrad-band-kb=N, set once from the command line (LayerConfig::weight_grad_band_budget_kb; unset:
// the config's default).
std::optional<int32_t>& wgrad_band_kb() {
  static std::optional<int32_t> v;
  return v;
}

// --wgrad-stream=0|1, set once from the command line (LayerConfig::weight_grad_stream_stores; unset:
// the config's default).
std::optional<bool>& wgrad_stream() {
  static std::optional<bool> v;
  return v;
}

// --wgrad-ring=0|1, set once from the command line (LayerConfig::weight_grad_deep_ring; unset: the
// config's default).
std::optional<bool>& wgrad_ring() {
  static std::optional<bool> v;
  return v;
}

ProblemSession& session_for(const std::string& impl, const std::string& shape_name, const std::string& routing,
                            const Variant& v, uint64_t seed) {
  Current& c = current();
  const std::string key = impl + "/" + shape_name + "/" + routing + variant_suffix(v) + (v.trace ? "/trace" : "") +
                          (bf16_weight_grads() ? "/bf16" : "");
  if (c.key == key) return *c.session;
  c.session.reset();
  c.key.clear();
  const Shape shape = find_named_shape(shape_name).value();
  auto spec = parse_routing(routing);
  check(spec.status(), "routing");
  auto r = generate_routing(shape, *spec, seed);
  check(r.status(), "generate_routing");
  auto ex = make_loopback_exchange(static_cast<int>(shape.P));
  check(ex.status(), "loopback exchange");
  LayerSessionOptions options;
  options.reference_gemm = v.gemm == "grouped" ? ReferenceGemm::kGroupedBatched : ReferenceGemm::kPerExpert;
  options.trace_tasks_per_cta = v.trace ? 8192 : 0;
  LayerConfig config;
  config.grad_precision = bf16_weight_grads() ? GradPrecision::kBF16 : GradPrecision::kFP32;
  config.comm_sms = v.knobs.first;
  config.overlap_rows = v.knobs.second;
  config.save_h = v.save_h;
  config.weight_grad_launch = wgrad_launch();
  if (wgrad_tickets()) config.weight_grad_tickets = *wgrad_tickets();
  if (wgrad_band_kb()) config.weight_grad_band_budget_kb = *wgrad_band_kb();
  if (wgrad_stream()) config.weight_grad_stream_stores = *wgrad_stream();
  if (wgrad_ring()) config.weight_grad_deep_ring = *wgrad_ring();
  auto s = ProblemSession::create(impl, shape, *r, seed, std::shared_ptr<RowExchange>(std::move(*ex)), config, options,
                                  /*write_y=*/false);
  check(s.status(), "ProblemSession::create");
  c.session = std::move(*s);
  c.key = key;
  if (c.flush == nullptr) {
    int l2 = 0;
    check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0), "L2 size");
    c.flush_bytes = std::max<size_t>(2 * static_cast<size_t>(l2), size_t{64} << 20);
    check(cudaMalloc(&c.flush, c.flush_bytes), "cudaMalloc flush buffer");
  }
  return *c.session;
}

double& warmup_s() {
  static double seconds = 0.0;
  return seconds;
}

double& energy_window_s() {
  static double seconds = 1.0;
  return seconds;
}

GpuEnergyMeter& energy_meter() {
  static GpuEnergyMeter meter(0);
  return meter;
}

bool& phases_on() {
  static bool on = false;
  return on;
}

// --phases: the timed steps' phase times, per phase name in first-seen order (a name marked twice
// in one step, e.g. by several ranks, adds up).
struct PhaseTimes {
  std::vector<std::string> names;
  std::vector<std::vector<double>> ms;
  void add_step(const std::vector<std::pair<std::string, float>>& phases) {
    std::vector<double> step(names.size(), 0.0);
    for (const auto& [name, t] : phases) {
      const size_t i = static_cast<size_t>(std::find(names.begin(), names.end(), name) - names.begin());
      if (i == names.size()) {
        names.push_back(name);
        ms.emplace_back(this->ms.empty() ? 0 : this->ms.front().size(), 0.0);  // absent in earlier steps
        step.push_back(0.0);
      }
      step[i] += t;
    }
    for (size_t i = 0; i < names.size(); ++i) ms[i].push_back(step[i]);
  }
};

// Where --steps-out appends its per-step lines (empty: nowhere).
std::string& steps_out_path() {
  static std::string path;
  return path;
}

// The q-quantile of sorted values, nearest rank.
double quantile(const std::vector<double>& sorted, double q) {
  return sorted[static_cast<size_t>(std::lround(q * static_cast<double>(sorted.size() - 1)))];
}

// Times state's iterations of `step` on `stream` (two warm-up steps before, `settle` after
// them and after the timed ones) and sets the counters. With --steps-out, NVML's SM clock and
// clock-event reasons are sampled after each timed step (outside the timed region), the median
// clock becomes a counter, and every step's time, clock and reasons go to one JSON line named
// `what` (gpt-oss's step times are bimodal, docs/perf-journal/megakernel-forward.md step 10: this is how to see which steps
// ran slow and at what clock). `after(ms)` runs after each timed step,
// outside the timed region. The energy counters cover the timed steps and, to make the window
// long against NVML's counter updates, as many more steps of the same pattern as fit in
// energy_window_s() (the flush memsets and the gaps between steps are in it, as they are in
// torch_moe_pipeline.py's figure).
template <class Step, class Settle, class After>
void time_steps(benchmark::State& state, const std::string& what, cudaStream_t stream, const Shape& shape,
                double passes, Step step, Settle settle, After after) {
  auto flush = [&](size_t i) {
    check(cudaMemsetAsync(current().flush, static_cast<int>(i & 0xff), current().flush_bytes, stream), "flush");
  };
  for (int i = 0; i < 2; ++i) step();
  settle("warm-up");
  const auto warm0 = std::chrono::steady_clock::now();
  for (size_t i = 0; std::chrono::duration<double>(std::chrono::steady_clock::now() - warm0).count() < warmup_s(); ++i) {
    flush(i);
    step();
    settle("warm-up step");
  }
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  std::vector<double> ms;
  std::vector<int> sm_mhz;
  std::vector<long long> clock_reasons;
  const perf::EnergyWindow window(energy_meter(), energy_window_s());
  PhaseMarks marks;
  PhaseTimes phase_times;
  if (phases_on()) installed_phase_marks() = &marks;
  for (auto _ : state) {
    flush(ms.size());
    check(cudaEventRecord(start, stream), "record");
    if (phases_on()) marks.begin_step(stream);
    step();
    check(cudaEventRecord(stop, stream), "record");
    check(cudaEventSynchronize(stop), "sync");
    if (phases_on()) {
      const auto phases = marks.phases();
      check(marks.error(), "phase marks");  // every failed event (a phase of −1 ms) is recorded there
      phase_times.add_step(phases);
    }
    float t = 0;
    check(cudaEventElapsedTime(&t, start, stop), "elapsed");
    ms.push_back(t);
    state.SetIterationTime(t * 1e-3);
    if (!steps_out_path().empty()) {  // only when asked: the NVML queries lengthen the gap between steps
      sm_mhz.push_back(energy_meter().sm_clock_mhz());
      clock_reasons.push_back(energy_meter().clock_event_reasons());
    }
    after(static_cast<double>(t));
  }
  installed_phase_marks() = nullptr;
  if (phases_on() && !phase_times.names.empty()) {
    std::string line = what + " phases, median of " + std::to_string(ms.size()) + " steps, ms:";
    double total = 0;
    for (size_t i = 0; i < phase_times.names.size(); ++i) {
      const double m = detmoe::median(phase_times.ms[i]);
      total += m;
      state.counters["phase_ms:" + phase_times.names[i]] = m;
      char buf[96];
      std::snprintf(buf, sizeof buf, "%s %s %.3f", i ? " |" : "", phase_times.names[i].c_str(), m);
      line += buf;
    }
    char buf[48];
    std::snprintf(buf, sizeof buf, " | sum %.3f\n", total);
    std::fprintf(stderr, "%s%s", line.c_str(), buf);
  }
  size_t extra = ms.size();
  const perf::EnergyFigures energy = window.finish(ms.size(), [&] {
    flush(extra++);
    step();
    check(cudaStreamSynchronize(stream), "energy window step");
  });
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  settle("timed steps");
  if (energy.ok) {
    state.counters["joules_per_step"] = energy.joules_per_step;
    state.counters["avg_watts"] = energy.avg_watts;
    state.counters["energy_steps"] = static_cast<double>(energy.steps);
  }
  if (!steps_out_path().empty()) {
    std::ofstream file(steps_out_path(), std::ios::app);
    file << nlohmann::json{{"benchmark", what}, {"step_ms", ms}, {"sm_mhz", sm_mhz}, {"clock_event_reasons", clock_reasons}}
                .dump()
         << "\n";
    if (!file) die("cannot append to " + steps_out_path());
  }
  std::vector<int> clocks;
  for (int mhz : sm_mhz)
    if (mhz > 0) clocks.push_back(mhz);
  if (!clocks.empty()) {
    std::sort(clocks.begin(), clocks.end());
    state.counters["sm_mhz"] = clocks[clocks.size() / 2];
  }
  std::sort(ms.begin(), ms.end());
  const double median = detmoe::median(ms);
  const double flops = shape.forward_flops_per_rank() * passes;
  state.counters["median_ms"] = median;
  state.counters["tflops"] = flops / (median * 1e-3) / 1e12;
  state.counters["min_ms"] = ms.front();
  state.counters["max_ms"] = ms.back();
  // Quartiles: a bimodal step time shows as a p25–p75 gap that the median alone hides.
  state.counters["p25_ms"] = quantile(ms, 0.25);
  state.counters["p75_ms"] = quantile(ms, 0.75);
  state.SetLabel(shape.to_string());
}

std::string fmt_launch_line(double ms, const std::string& summary) {
  char head[32];
  std::snprintf(head, sizeof head, "%.3f ms: ", ms);
  return head + summary;
}

// Prints the task timeline of the last timed launch (and, with --trace-each, one line per launch)
// and sets the trace counters; only implementations that record one (the megakernel).
void report_trace(benchmark::State& state, const LayerSession& session, const std::string& shape_name,
                  const std::string& routing, const Variant& v, const std::vector<std::string>& lines) {
  auto t = session.task_trace();
  check(t.status(), "task_trace");
  const mk::TraceSummary summary = mk::summarize_trace(*t);
  if (v.trace_each) {
    std::fprintf(stderr, "%s %s, every timed launch:\n", shape_name.c_str(), routing.c_str());
    for (const std::string& line : lines) std::fprintf(stderr, "  %s\n", line.c_str());
  }
  std::fprintf(stderr, "%s %s, last timed launch:\n%s", shape_name.c_str(), routing.c_str(),
               mk::format_trace_summary(summary).c_str());
  if (!v.trace_out.empty()) {
    const std::string path = v.trace_out + "/" + session.impl() + "-" + shape_name + "-" + routing + ".trace.json";
    std::ofstream file(path);
    file << mk::trace_chrome_json(*t);
    if (!file) die("cannot write " + path);
    std::fprintf(stderr, "wrote %s\n", path.c_str());
  }
  double busy = 0;
  for (const mk::TracePhase& p : summary.phases) busy += p.busy_us;
  state.counters["trace_span_ms"] = summary.span_us * 1e-3;
  state.counters["trace_busy_pct"] = summary.span_us > 0 ? 100 * busy / summary.span_us : 0;
  state.counters["trace_sm_mhz"] = summary.sm_clock_mhz;
}

// One step of `impl` per timed iteration: forward [+ backward] on the session's stream. A
// forward step of the reference includes its routing plan and host synchronisation; the
// megakernel's is one launch with none.
void bench_layer(benchmark::State& state, std::string impl, std::string shape_name, std::string routing, bool backward,
                 Variant v, uint64_t seed, std::string name) {
  ProblemSession& s = session_for(impl, shape_name, routing, v, seed);
  LayerSession& layer = s.session();
  DeviceProblem& p = s.problem();
  auto step = [&] {
    check(layer.forward(p.inputs(), p.outputs()), "forward");
    if (backward) check(layer.backward(p.inputs(), p.grad_inputs(), p.grad_outputs()), "backward");
  };
  auto settle = [&](const char* what) { check(layer.synchronize(), what); };
  // With --trace-each every timed launch's timeline is read back after it (outside the timed
  // region, though the read-back lengthens the gap between launches) and summarised in one line.
  std::vector<std::string> lines;
  auto after = [&](double ms) {
    if (!v.trace_each) return;
    auto t = layer.task_trace();
    check(t.status(), "task_trace");
    lines.push_back(fmt_launch_line(ms, mk::format_trace_line(mk::summarize_trace(*t))));
  };
  time_steps(state, name, s.exchange().stream(0), s.shape(), backward ? 3.0 : 1.0, step, settle, after);
  if (v.trace) report_trace(state, layer, shape_name, routing, v, lines);
}

void add_context() {
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  benchmark::AddCustomContext("gpu", prop.name);
  benchmark::AddCustomContext("sm_count", std::to_string(prop.multiProcessorCount));
  benchmark::AddCustomContext("cuda_driver", std::to_string(driver));
  benchmark::AddCustomContext("cuda_runtime", std::to_string(runtime));
  benchmark::AddCustomContext("nccl", nccl_version_string());
  const GpuEnergyMeter& meter = energy_meter();
  benchmark::AddCustomContext("energy", meter.available() ? "nvml" : "unavailable: " + meter.reason());
  if (const double w = meter.power_limit_watts(); w > 0) benchmark::AddCustomContext("power_limit_w", std::to_string(w));
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* flag) -> const char* {
      const size_t n = std::strlen(flag);
      return a.compare(0, n, flag) == 0 ? argv[i] + n : nullptr;
    };
    if (const char* v = value("--shapes=")) o.shapes = split(v);
    else if (const char* v = value("--routings=")) o.routings = split(v);
    else if (const char* v = value("--gemm=")) o.gemms = split(v);
    else if (const char* v = value("--impls=")) o.impls = split(v);
    else if (a == "--trace") o.trace = true;
    else if (a == "--trace-each") o.trace = o.trace_each = true;
    else if (const char* v = value("--trace-out=")) {
      o.trace = true;
      o.trace_out = v;
    }
    else if (const char* v = value("--knobs=")) {
      o.knobs.clear();
      for (const std::string& item : split(v)) {
        int comm = -1, rows = -1;
        if (std::sscanf(item.c_str(), "%d:%d", &comm, &rows) != 2 || comm < 0 || rows < 0)
          die("--knobs wants comm_sms:overlap_rows pairs of non-negative integers, got " + item);
        o.knobs.emplace_back(comm, rows);
      }
    }
    else if (const char* v = value("--timed=")) o.timed = std::max(1, std::atoi(v));
    else if (const char* v = value("--seed=")) o.seed = std::strtoull(v, nullptr, 10);
    else if (const char* v = value("--energy-window=")) o.energy_window_s = std::max(0.0, std::atof(v));
    else if (const char* v = value("--warmup-seconds=")) o.warmup_s = std::max(0.0, std::atof(v));
    else if (a == "--no-save-h") o.save_h = false;
    else if (a == "--grad-dtype=bf16") o.bf16_grads = true;
    else if (a == "--grad-dtype=fp32") o.bf16_grads = false;
    else if (a == "--wgrad-tickets=0") wgrad_tickets() = false;
    else if (a == "--wgrad-tickets=1") wgrad_tickets() = true;
    else if (a == "--wgrad-stream=0") wgrad_stream() = false;
    else if (a == "--wgrad-stream=1") wgrad_stream() = true;
    else if (a == "--wgrad-ring=0") wgrad_ring() = false;
    else if (a == "--wgrad-ring=1") wgrad_ring() = true;
    else if (const char* v = value("--wgrad-band-kb=")) {
      char* end = nullptr;
      const long kb = std::strtol(v, &end, 10);
      if (end == v || *end != '\0' || kb < 0 || kb > (1L << 30)) {
        std::fprintf(stderr, "detmoe_perf_layer: --wgrad-band-kb wants a non-negative KB count, got '%s'\n", v);
        return 2;
      }
      wgrad_band_kb() = static_cast<int32_t>(kb);
    }
    else if (const char* v = value("--wgrad-launch=")) {
      const StatusOr<WeightGradLaunch> w = parse_weight_grad_launch(v);  // to_string's names, as the fuzz log prints
      if (!w.ok()) {
        std::fprintf(stderr, "detmoe_perf_layer: --wgrad-launch: %s\n", w.status().message().c_str());
        return 2;
      }
      wgrad_launch() = w.value();
    }
    else if (const char* v = value("--steps-out=")) steps_out_path() = v;
    else if (a == "--phases") phases_on() = true;
    else {
      std::fprintf(stderr, "detmoe_perf_layer: unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::fprintf(stderr, "detmoe_perf_layer: no CUDA device; nothing to measure\n");
    return 3;
  }
  energy_window_s() = o.energy_window_s;
  warmup_s() = o.warmup_s;
  bf16_weight_grads() = o.bf16_grads;
  add_context();
  const std::vector<std::string> known = layer_session_impls();
  for (const std::string& impl : o.impls)
    if (std::find(known.begin(), known.end(), impl) == known.end()) die("unknown implementation " + impl);
  for (const std::string& shape : o.shapes) {
    if (!find_named_shape(shape).ok()) die("unknown shape " + shape);
    for (const std::string& routing : o.routings)
      for (const std::string& impl : o.impls) {
        // The settings each implementation has: the reference's GEMM calls, the megakernel's
        // knobs, h saved or not and its trace. Neighbouring benchmarks share one session.
        std::vector<Variant> variants;
        if (impl == "reference") {
          for (const std::string& gemm : o.gemms) variants.push_back(Variant{gemm, {0, 0}, true, false, false, ""});
        } else {
          for (const auto& knobs : o.knobs)
            variants.push_back(Variant{"per-expert", knobs, o.save_h, o.trace, o.trace_each, o.trace_out});
        }
        for (const Variant& v : variants)
          for (bool backward : {false, true}) {
            if (backward && !layer_session_has_backward(impl)) continue;
            const std::string name = impl + "/" + shape + "/" + routing + "/" + (backward ? "fwd+bwd" : "fwd") +
                                     variant_suffix(v) + (backward && o.bf16_grads ? "/bf16-grads" : "");
            benchmark::RegisterBenchmark(name.c_str(), bench_layer, impl, shape, routing, backward, v, o.seed, name)
                ->UseManualTime()
                ->Unit(benchmark::kMillisecond)
                ->Iterations(o.timed);
          }
      }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  current().session.reset();
  if (current().flush != nullptr) cudaFree(current().flush);
  return 0;
}
