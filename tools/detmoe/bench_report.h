// The rows of `detmoe bench` as run-report benchmark results (detmoe.run/1), from the two JSON
// files the bench runs produce: Google Benchmark's (detmoe_perf_layer) and the PyTorch
// pipeline's (perf/torch_moe_pipeline.py). Pure: tested on synthetic files.
#pragma once

#include <nlohmann/json.hpp>

#include <vector>

#include "detmoe/report.h"

namespace detmoe::cli {

// One row per timed case of `gbench` (impl "reference", "megakernel", and variants named by
// their suffix, e.g. "reference (grouped)") and of `torch` ("torch-pipeline"; null: none). A
// DetMoE row whose case the pipeline also ran names it as its baseline, with ratio_to_baseline
// = its TFLOP/s over the pipeline's. ep_ranks from the named shape (1 when unknown).
std::vector<report::BenchmarkResult> bench_results(const nlohmann::json& gbench, const nlohmann::json& torch,
                                                   int repetitions);

// The table `detmoe bench --impl IMPL` prints and the rows of its JSON, one per case (shape /
// routing / pass, in the order Google Benchmark ran them): IMPL beside the reference (when IMPL is
// not the reference itself; "ref/IMPL" > 1 means IMPL is faster) and beside the torch pipeline
// ("torch/IMPL", the issues' speedup), with joules per step where NVML measured them. The
// reference's own table has its grouped-GEMM variant and "ref/torch" (time over time). JSON keys:
// "<impl>_ms", "<impl>_tflops", "reference_ms", "torch_ms", "torch_over_<impl>", … as before.
struct BenchTable {
  std::string text;
  nlohmann::json rows = nlohmann::json::array();
};
BenchTable bench_table(const std::vector<report::BenchmarkResult>& results, const std::string& impl);

}  // namespace detmoe::cli
