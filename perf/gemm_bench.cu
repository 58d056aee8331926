// detmoe_perf_gemm: the GEMM core against cuBLAS (dense; per expert on the grouped forward cases,
// as the reference layer calls it) and, through gemm_grouped_torch.py, against torch._grouped_mm
// on the expert segments of the DESIGN.md §7 shapes.
//
// Every benchmark times single launches with CUDA events after a warm-up, 30 timed launches
// (benchmark iterations), and reports the median as counters median_ms and tflops, beside the
// mean that Google Benchmark prints. Baselines run in the same process, on the same buffers.
//
// DETMOE_GEMM_SEGMENTS_OUT=<path> writes the grouped benchmarks' per-expert row counts as JSON,
// so the PyTorch script measures exactly the same segments.
#include <benchmark/benchmark.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "detmoe/gemm.h"
#include "detmoe/median.h"
#include "detmoe/numeric.h"
#include "detmoe/problem.h"
#include "detmoe/routing.h"
#include "perf/gpu_energy.h"

namespace {

using detmoe::gemm::Epilogue;
using detmoe::gemm::GroupedGemm;
using detmoe::gemm::Layout;

constexpr int kTimedLaunches = 30;
constexpr int kWarmup = 3;

void die(const std::string& what) {
  std::fprintf(stderr, "detmoe_perf_gemm: %s\n", what.c_str());
  std::exit(2);
}
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) die(std::string(what) + ": " + cudaGetErrorString(e));
}

struct Device {
  void* p = nullptr;
  explicit Device(size_t bytes) { check(cudaMalloc(&p, std::max<size_t>(bytes, 256)), "cudaMalloc"); }
  ~Device() { cudaFree(p); }
};

// Fills a bf16 buffer with N(0,1)-like samples on the device (random data: zeros run faster
// than real data, and host generation of gigabytes would dominate the run): Box–Muller over a
// splitmix64 hash of (seed, index).
__device__ uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__global__ void fill_normal_kernel(uint16_t* dst, size_t count, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count; i += size_t{gridDim.x} * blockDim.x) {
    const uint64_t h = splitmix64(seed * 0x100000001b3ull + i);
    const float u1 = (static_cast<float>(h >> 40) + 1.0f) * (1.0f / 16777216.0f);
    const float u2 = static_cast<float>((h >> 16) & 0xffffff) * (1.0f / 16777216.0f);
    const float z = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    dst[i] = detmoe::bf16_bits_from_float(z);
  }
}

void fill_normal(void* dst, size_t count, uint64_t seed) {
  fill_normal_kernel<<<1024, 256>>>(static_cast<uint16_t*>(dst), count, seed);
  check(cudaDeviceSynchronize(), "fill");
}

detmoe::perf::GpuEnergyMeter& energy_meter() {
  static detmoe::perf::GpuEnergyMeter meter(0);
  return meter;
}

// Times `launch` (enqueue one GEMM) as benchmark iterations and sets the median counters. The
// energy counters (joules_per_launch, avg_watts) cover the timed launches and as many more of the
// same pattern (launch, synchronise) as fit in one second from the first (perf/gpu_energy.h).
template <class Launch>
void time_launches(benchmark::State& state, double flops, Launch&& launch) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  for (int i = 0; i < kWarmup; ++i) launch();
  check(cudaDeviceSynchronize(), "warm-up");
  const detmoe::perf::EnergyWindow window(energy_meter(), 1.0);
  std::vector<double> ms;
  for (auto _ : state) {
    check(cudaEventRecord(start), "record");
    launch();
    check(cudaEventRecord(stop), "record");
    check(cudaEventSynchronize(stop), "sync");
    float t = 0;
    check(cudaEventElapsedTime(&t, start, stop), "elapsed");
    ms.push_back(t);
    state.SetIterationTime(t * 1e-3);
  }
  check(cudaGetLastError(), "launch");
  const detmoe::perf::EnergyFigures energy = window.finish(ms.size(), [&] {
    launch();
    check(cudaDeviceSynchronize(), "energy window launch");
  });
  if (energy.ok) {
    state.counters["joules_per_launch"] = energy.joules_per_step;
    state.counters["avg_watts"] = energy.avg_watts;
  }
  std::sort(ms.begin(), ms.end());
  const double median = detmoe::median(ms);
  state.counters["median_ms"] = median;
  state.counters["tflops"] = flops / (median * 1e-3) / 1e12;
  state.counters["min_ms"] = ms.front();
  state.counters["max_ms"] = ms.back();
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

// Times the GEMM core on one problem (a failed launch ends the benchmark run with its Status).
void time_gemm_core(benchmark::State& state, double flops, const detmoe::gemm::GroupedGemm& g) {
  time_launches(state, flops, [&] {
    const detmoe::Status st = detmoe::gemm::run(g, nullptr);
    if (!st.ok()) die(st.to_string());
  });
}

cublasHandle_t cublas() {
  static cublasHandle_t h = [] {
    cublasHandle_t handle;
    if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) die("cublasCreate");
    return handle;
  }();
  return h;
}

// A handle set up as the reference layer's (reference/device/cublas_gemm.cpp): no reduced-precision
// reductions, no atomics, so its per-expert timings are the reference's GEMMs.
cublasHandle_t reference_cublas() {
  static cublasHandle_t h = [] {
    cublasHandle_t handle;
    if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) die("cublasCreate");
    if (cublasSetMathMode(handle, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                                            CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasSetAtomicsMode(handle, CUBLAS_ATOMICS_NOT_ALLOWED) != CUBLAS_STATUS_SUCCESS)
      die("cublas modes");
    return handle;
  }();
  return h;
}

// ---- dense: ours vs cuBLAS at M = N = K ----

struct DenseCase {
  std::string name;
  Layout layout;
  int64_t size;
};

void bench_dense(benchmark::State& state, const DenseCase& dc, bool use_cublas) {
  const int64_t s = dc.size;
  const bool wgrad = dc.layout == Layout::kWeightGrad;
  Device a(s * s * 2), b(s * s * 2), c(s * s * (wgrad ? 4 : 2));
  fill_normal(a.p, s * s, 1);
  fill_normal(b.p, s * s, 2);
  const double flops = 2.0 * s * s * s;
  if (use_cublas) {
    const float one = 1.0f, zero = 0.0f;
    const int n = static_cast<int>(s);
    const cudaDataType out = wgrad ? CUDA_R_32F : CUDA_R_16BF;
    cublasOperation_t op_b = CUBLAS_OP_N, op_a = CUBLAS_OP_N;
    if (dc.layout == Layout::kForward) op_b = CUBLAS_OP_T;   // Cᵀ = B(N×K)·Aᵀ
    if (dc.layout == Layout::kWeightGrad) op_a = CUBLAS_OP_T;  // Cᵀ = Bᵀ-view · A
    time_launches(state, flops, [&] {
      if (cublasGemmEx(cublas(), op_b, op_a, n, n, n, &one, b.p, CUDA_R_16BF, n, a.p, CUDA_R_16BF, n, &zero, c.p, out, n,
                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
        die("cublasGemmEx");
    });
  } else {
    GroupedGemm g;
    g.layout = dc.layout;
    g.epilogue = wgrad ? Epilogue::kStoreFP32 : Epilogue::kStoreBF16;
    g.rows = s;
    g.m = wgrad ? s : 0;
    g.n = s;
    g.k = wgrad ? 0 : s;
    g.a = a.p;
    g.b = b.p;
    g.c = c.p;
    time_gemm_core(state, flops, g);
  }
}

// ---- grouped: expert segments of the §7 shapes, balanced routing ----

struct ModelShape {
  std::string name;
  int64_t T, H, F, E, k;
};

std::vector<int32_t> balanced_counts(const ModelShape& m) {
  detmoe::Shape shape;
  shape.T = m.T;
  shape.H = m.H;
  shape.F = m.F;
  shape.E = m.E;
  shape.k = m.k;
  detmoe::RoutingSpec spec;
  spec.kind = detmoe::RoutingKind::kBalanced;
  auto routing = detmoe::generate_routing(shape, spec, /*seed=*/2024);
  if (!routing.ok()) die(routing.status().to_string());
  std::vector<int32_t> counts(static_cast<size_t>(m.E), 0);
  for (int32_t e : routing->topk_idx) ++counts[e];
  return counts;
}

struct GroupedCase {
  std::string name;  // <shape>_<gemm>
  ModelShape shape;
  Layout layout;
  int64_t n, k, m;  // GEMM dims (m: weight-grad rows per group)
  Epilogue epilogue = Epilogue::kStoreBF16;
  bool baseline = true;  // also timed by gemm_grouped_torch.py (which only writes bf16)
};

// The weight-gradient launches' speed knobs as the layer sets them (LayerConfig::
// weight_grad_band_budget_kb, weight_grad_stream_stores): "ours" keeps the core's defaults (fixed
// bands, plain stores), the variants time the layer's order and evict-first stores apart and together.
// ours_ring: the deep store ring (GroupedGemm::deep_store_ring), for short tiles' fp32 stores.
struct WeightGradKnobs {
  const char* suffix;
  int32_t band_budget_kb;
  bool stream_stores;
  bool deep_store_ring;
};
constexpr WeightGradKnobs kWeightGradVariants[] = {{"ours_order", 8192, false, false},
                                                   {"ours_stream", 0, true, false},
                                                   {"ours_order_stream", 8192, true, false},
                                                   {"ours_ring", 0, false, true},
                                                   {"ours_order_stream_ring", 8192, true, true}};

void bench_grouped(benchmark::State& state, const GroupedCase& gc, const std::vector<int32_t>& counts,
                   WeightGradKnobs knobs = {"ours", 0, false, false}) {
  const int64_t groups = static_cast<int64_t>(counts.size());
  std::vector<int32_t> offsets{0};
  for (int32_t c : counts) offsets.push_back(offsets.back() + c);
  const int64_t rows = offsets.back();
  const bool wgrad = gc.layout == Layout::kWeightGrad;
  const bool fp32_out = gc.epilogue == Epilogue::kStoreFP32;
  const int64_t a_cols = wgrad ? gc.m : gc.k;
  const int64_t b_elems = wgrad ? rows * gc.n : groups * gc.n * gc.k;
  const int64_t c_elems = wgrad ? groups * gc.m * gc.n : rows * gc.n;
  Device a(rows * a_cols * 2), b(b_elems * 2), c(c_elems * (fp32_out ? 4 : 2)), off(offsets.size() * 4);
  fill_normal(a.p, rows * a_cols, 3);
  fill_normal(b.p, b_elems, 4);
  check(cudaMemcpy(off.p, offsets.data(), offsets.size() * 4, cudaMemcpyHostToDevice), "offsets");
  const double flops = 2.0 * rows * gc.n * (wgrad ? gc.m : gc.k);
  GroupedGemm g;
  g.layout = gc.layout;
  g.epilogue = gc.epilogue;
  g.rows = rows;
  g.m = gc.m;
  g.n = gc.n;
  g.k = gc.k;
  g.groups = static_cast<int32_t>(groups);
  g.group_offsets = static_cast<const int32_t*>(off.p);
  g.a = a.p;
  g.b = b.p;
  g.c = c.p;
  g.band_budget_kb = knobs.band_budget_kb;
  g.stream_stores = knobs.stream_stores;
  g.deep_store_ring = knobs.deep_store_ring;
  time_gemm_core(state, flops, g);
  state.counters["rows"] = static_cast<double>(rows);
}

// The reference layer's way to run the same grouped forward or data-gradient GEMM: one
// cublasGemmEx per expert on its rows (reference/device/ does exactly this), timed as one launch
// sequence. It is the GEMM time the unfused reference pays, so it shows whether the GEMM core's
// grouped tiles (the megakernel's floor) or the fusion is what the megakernel loses to the
// reference on.
void bench_grouped_cublas(benchmark::State& state, const GroupedCase& gc, const std::vector<int32_t>& counts) {
  if (gc.layout == Layout::kWeightGrad) die("cuBLAS per-expert baseline: forward and data-grad layouts only");
  const bool data_grad = gc.layout == Layout::kDataGrad;
  std::vector<int64_t> offsets{0};
  for (int32_t c : counts) offsets.push_back(offsets.back() + c);
  const int64_t rows = offsets.back();
  const int64_t groups = static_cast<int64_t>(counts.size());
  Device a(rows * gc.k * 2), b(groups * gc.n * gc.k * 2), c(rows * gc.n * 2);
  fill_normal(a.p, rows * gc.k, 3);
  fill_normal(b.p, groups * gc.n * gc.k, 4);
  const float one = 1.0f, zero = 0.0f;
  const auto* a16 = static_cast<const uint16_t*>(a.p);
  const auto* b16 = static_cast<const uint16_t*>(b.p);
  auto* c16 = static_cast<uint16_t*>(c.p);
  time_launches(state, 2.0 * rows * gc.n * gc.k, [&] {
    for (int64_t e = 0; e < groups; ++e) {
      const int m = counts[static_cast<size_t>(e)];
      if (m == 0) continue;
      // Forward: row-major C[m×n] = A[m×k]·W[n×k]ᵀ as column-major Cᵀ = W·Aᵀ; data-grad: C = A·W[k×n]
      // as Cᵀ = Wᵀ-view·Aᵀ (the reference's calls: da, dx).
      if (cublasGemmEx(reference_cublas(), data_grad ? CUBLAS_OP_N : CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(gc.n), m,
                       static_cast<int>(gc.k), &one, b16 + e * gc.n * gc.k, CUDA_R_16BF,
                       static_cast<int>(data_grad ? gc.n : gc.k), a16 + offsets[e] * gc.k, CUDA_R_16BF,
                       static_cast<int>(gc.k), &zero, c16 + offsets[e] * gc.n, CUDA_R_16BF, static_cast<int>(gc.n),
                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
        die("cublasGemmEx (per expert)");
    }
  });
  state.counters["rows"] = static_cast<double>(rows);
}

void write_segments(const std::vector<GroupedCase>& cases, const std::map<std::string, std::vector<int32_t>>& counts) {
  const char* path = std::getenv("DETMOE_GEMM_SEGMENTS_OUT");
  if (path == nullptr) return;
  std::ofstream out(path);
  std::vector<GroupedCase> timed;
  for (const auto& c : cases)
    if (c.baseline) timed.push_back(c);
  out << "{\n  \"cases\": [\n";
  for (size_t i = 0; i < timed.size(); ++i) {
    const auto& c = timed[i];
    const char* layout = c.layout == Layout::kForward ? "forward" : c.layout == Layout::kDataGrad ? "data-grad" : "weight-grad";
    out << "    {\"name\": \"" << c.name << "\", \"layout\": \"" << layout << "\", \"n\": " << c.n << ", \"k\": " << c.k
        << ", \"m\": " << c.m << ", \"counts\": [";
    const auto& v = counts.at(c.shape.name);
    for (size_t j = 0; j < v.size(); ++j) out << (j ? ", " : "") << v[j];
    out << "]}" << (i + 1 < timed.size() ? "," : "") << "\n";
  }
  out << "  ]\n}\n";
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<DenseCase> dense{
      {"forward_4096", Layout::kForward, 4096},
      {"forward_8192", Layout::kForward, 8192},
      {"data_grad_8192", Layout::kDataGrad, 8192},
      {"weight_grad_8192", Layout::kWeightGrad, 8192},
  };
  for (const auto& dc : dense) {
    for (bool use_cublas : {false, true}) {
      benchmark::RegisterBenchmark(("gemm/dense/" + dc.name + (use_cublas ? "/cublas" : "/ours")).c_str(),
                                   [dc, use_cublas](benchmark::State& st) { bench_dense(st, dc, use_cublas); })
          ->UseManualTime()
          ->Iterations(kTimedLaunches)
          ->Unit(benchmark::kMillisecond);
    }
  }

  const ModelShape qwen{"qwen3-30b-a3b", 16384, 2048, 768, 128, 8};
  const ModelShape deepseek{"deepseek-v3", 8192, 7168, 2048, 32, 8};
  // gpt-oss's two forward GEMMs (K = 2880, ≈ 512 rows per expert): what the core's tiles do on
  // the megakernel's hardest shape, outside the megakernel; torch._grouped_mm beside them, with
  // the energy of each launch (at the 700 W cap, energy per FLOP is what the GEMMs compete on).
  const ModelShape gpt_oss{"gpt-oss-120b", 16384, 2880, 2880, 128, 4};
  std::map<std::string, std::vector<int32_t>> counts;
  std::vector<GroupedCase> grouped;
  for (const ModelShape& s : {qwen, deepseek}) {
    counts[s.name] = balanced_counts(s);
    // The four GEMMs of one expert MLP pass: gate/up (forward), down (forward), the down
    // projection's data gradient and its weight gradient.
    grouped.push_back({s.name + "_up_forward", s, Layout::kForward, 2 * s.F, s.H, 0});
    grouped.push_back({s.name + "_down_forward", s, Layout::kForward, s.H, s.F, 0});
    grouped.push_back({s.name + "_down_data_grad", s, Layout::kDataGrad, s.F, s.H, 0});
    // torch._grouped_mm only writes bf16, so the compared weight gradient is bf16 too; the
    // fp32 output the layer uses by default is timed beside it.
    grouped.push_back({s.name + "_down_weight_grad", s, Layout::kWeightGrad, s.F, 0, s.H});
    grouped.push_back({s.name + "_down_weight_grad_fp32out", s, Layout::kWeightGrad, s.F, 0, s.H, Epilogue::kStoreFP32, false});
  }
  // deepseek's up projection's weight gradient (dW_gate_up = dhᵀ·x_recv: m = 2F, n = H), fp32 as the
  // layer's default; with dW_down above, the layer's two weight-gradient launches.
  grouped.push_back({deepseek.name + "_up_weight_grad_fp32out", deepseek, Layout::kWeightGrad, deepseek.H, 0,
                     2 * deepseek.F, Epilogue::kStoreFP32, false});
  // mixtral's (8 experts of 2048 rows, F = 14336): the floor issue 19 measures its forward against.
  const ModelShape mixtral{"mixtral-8x7b", 8192, 4096, 14336, 8, 2};
  for (const ModelShape& s : {gpt_oss, mixtral}) {
    counts[s.name] = balanced_counts(s);
    grouped.push_back({s.name + "_up_forward", s, Layout::kForward, 2 * s.F, s.H, 0});
    grouped.push_back({s.name + "_down_forward", s, Layout::kForward, s.H, s.F, 0});
  }
  // gpt-oss's weight gradients as the layer runs them (fp32 out, 512 rows per expert: 8 k-blocks a
  // tile against 16 slabs of output): where the store between mainloops costs most.
  grouped.push_back({gpt_oss.name + "_down_weight_grad_fp32out", gpt_oss, Layout::kWeightGrad, gpt_oss.F, 0, gpt_oss.H,
                     Epilogue::kStoreFP32, false});
  grouped.push_back({gpt_oss.name + "_up_weight_grad_fp32out", gpt_oss, Layout::kWeightGrad, gpt_oss.H, 0,
                     2 * gpt_oss.F, Epilogue::kStoreFP32, false});
  // The backward's two data-gradient GEMMs of the large-expert shapes, with cuBLAS per expert as the
  // reference calls them: da = dy·W_down (the down projection's data gradient, K = H) and dx =
  // dh·W_gate_up (the up projection's, K = 2F): the fused backward's mainloops without its
  // epilogues, against the reference's da and dx GEMMs (docs/PERF.md session 34).
  for (const ModelShape& s : {deepseek, mixtral}) {
    if (s.name == mixtral.name) grouped.push_back({s.name + "_down_data_grad", s, Layout::kDataGrad, s.F, s.H, 0});
    grouped.push_back({s.name + "_up_data_grad", s, Layout::kDataGrad, s.H, 2 * s.F, 0});
  }
  // mixtral's two weight-gradient launches as the layer runs them (fp32 out): dW_down (m = H, n = F)
  // and dW_gate_up (m = 2F, n = H).
  grouped.push_back({mixtral.name + "_down_weight_grad_fp32out", mixtral, Layout::kWeightGrad, mixtral.F, 0, mixtral.H,
                     Epilogue::kStoreFP32, false});
  grouped.push_back({mixtral.name + "_up_weight_grad_fp32out", mixtral, Layout::kWeightGrad, mixtral.H, 0,
                     2 * mixtral.F, Epilogue::kStoreFP32, false});
  write_segments(grouped, counts);
  for (const auto& gc : grouped) {
    const auto& cnt = counts.at(gc.shape.name);
    benchmark::RegisterBenchmark(("gemm/grouped/" + gc.name + "/ours").c_str(),
                                 [gc, cnt](benchmark::State& st) { bench_grouped(st, gc, cnt); })
        ->UseManualTime()
        ->Iterations(kTimedLaunches)
        ->Unit(benchmark::kMillisecond);
    if (gc.layout == Layout::kWeightGrad) {
      for (const WeightGradKnobs& knobs : kWeightGradVariants)
        benchmark::RegisterBenchmark(("gemm/grouped/" + gc.name + "/" + knobs.suffix).c_str(),
                                     [gc, cnt, knobs](benchmark::State& st) { bench_grouped(st, gc, cnt, knobs); })
            ->UseManualTime()
            ->Iterations(kTimedLaunches)
            ->Unit(benchmark::kMillisecond);
      continue;
    }
    benchmark::RegisterBenchmark(("gemm/grouped/" + gc.name + "/cublas_per_expert").c_str(),
                                 [gc, cnt](benchmark::State& st) { bench_grouped_cublas(st, gc, cnt); })
        ->UseManualTime()
        ->Iterations(kTimedLaunches)
        ->Unit(benchmark::kMillisecond);
  }

  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
