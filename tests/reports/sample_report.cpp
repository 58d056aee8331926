#include "sample_report.h"

namespace detmoe::report::testing {

RunReport empty_sample() {
  RunReport r;
  r.run.tool_version = "0.1.0";
  r.run.command = "accept";
  r.run.command_line = {"detmoe", "accept", "--level", "1"};
  r.run.host = "test-host";
  r.run.started_at = "2025-12-02T10:00:00Z";
  r.run.finished_at = "2025-12-02T10:00:05Z";
  r.run.state = RunState::kFinished;
  r.inventory.unavailable_reason = "no CUDA device";
  return r;
}

RunReport full_sample() {
  RunReport r = empty_sample();
  r.run.command = "bench";
  r.run.git_sha = "0123456789abcdef0123456789abcdef01234567";
  r.inventory = {"13.0", "13.0", "", {}};
  for (int i = 0; i < 2; ++i)
    r.inventory.gpus.push_back({i, "NVIDIA H200", "GPU-0000000" + std::to_string(i), "0000:1" + std::to_string(i) + ":00.0", 132, "9.0",
                                150ull << 30});
  r.checks = {
      {"oracle-rerun", CheckTarget::cpu(), Verdict::kPass, "7 outputs, identical bits on rerun", std::nullopt, 0.25},
      {"tiny-layer-rerun", CheckTarget::gpu(0), Verdict::kPass, "identical bits in 10 reruns", std::nullopt, 1.5},
      {"tiny-layer-rerun", CheckTarget::gpu(1), Verdict::kFail, "rerun 3 differs at out[17,5]", Severity::kIsolate, 1.5},
      {"clocks", CheckTarget::gpu(1), Verdict::kWarn, "SM clock 1590 MHz below 1980", Severity::kMonitor, 0.01},
      {"nccl-pair-bandwidth", CheckTarget::pair(0, 1), Verdict::kPass, "380 GB/s", std::nullopt, 2.0},
      {"nccl-pair-bandwidth", CheckTarget::pair(1, 0), Verdict::kFail, "120 GB/s, below 80 % of 450", Severity::kTriage, 2.0},
      {"cross-gpu-bitwise", CheckTarget::node({0, 1}), Verdict::kSkip, "needs 2 healthy GPUs", std::nullopt, 0},
  };
  auto bench = [](std::string impl, std::string baseline, std::string shape, BenchPass pass, double ms, double tflops,
                  std::optional<double> ratio, std::optional<double> frac) {
    BenchmarkResult b;
    b.impl = std::move(impl);
    b.baseline = std::move(baseline);
    b.shape = std::move(shape);
    b.routing = "balanced";
    b.pass = pass;
    b.median_ms = ms;
    b.tflops = tflops;
    b.ratio_to_baseline = ratio;
    b.fraction_of_ceiling = frac;
    b.repetitions = 10;
    return b;
  };
  r.benchmarks = {
      bench("torch-grouped-mm", "", "qwen3-30b-a3b", BenchPass::kForward, 6.43, 192, std::nullopt, 0.256),
      bench("megakernel", "torch-grouped-mm", "qwen3-30b-a3b", BenchPass::kForward, 3.9, 317, 1.65, 0.423),
      bench("reference", "torch-grouped-mm", "qwen3-30b-a3b", BenchPass::kForward, 8.1, 152, 0.79, std::nullopt),
      bench("torch-grouped-mm", "", "mixtral-8x7b", BenchPass::kForwardBackward, 33.1, 523, std::nullopt, 0.697),
      bench("megakernel", "torch-grouped-mm", "mixtral-8x7b", BenchPass::kForwardBackward, 28.0, 618, 1.18, 0.824),
  };
  r.benchmarks[1].p25_ms = 3.85, r.benchmarks[1].p75_ms = 3.95;
  r.benchmarks[1].joules_per_step = 2.25, r.benchmarks[1].avg_watts = 576.5;
  r.perf_ceiling = PerfCeiling{"cuBLAS bf16 GEMM 8192^3", 750};
  r.bandwidth = BandwidthMatrix{"ncclSend/Recv 256 MiB, median of 5", 450.0, {0, 1}, {{std::nullopt, 380.5}, {120.25, std::nullopt}}};
  r.golden = {
      {"tiny-balanced-s1", "out", true, "aa11", "aa11", std::nullopt},
      {"tiny-balanced-s1", "d_x", false, "bb22", "cc33", GoldenDifference{133, {2, 5}, "0.50390625", "nan"}},
  };
  return r;
}

}  // namespace detmoe::report::testing
