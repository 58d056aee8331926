#include "layer_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>
#include <cstring>

#include "detmoe/numeric.h"
#include "gpu_problem.h"

namespace detmoe::testing {

template <class MakeProblem>
StatusOr<std::unique_ptr<MegakernelCase>> MegakernelCase::assemble(const Shape& shape, const LayerConfig& config,
                                                                   const LayerOptions& options, MakeProblem&& make_problem) {
  auto c = std::unique_ptr<MegakernelCase>(new MegakernelCase());
  auto ex = make_loopback_exchange(static_cast<int>(shape.P), options.device);
  if (!ex.ok()) return ex.status();
  c->exchange_ = std::move(*ex);
  auto problem = make_problem(*c->exchange_);
  if (!problem.ok()) return problem.status();
  c->problem_ = std::move(*problem);
  auto layer = Layer::create(shape, config, options);
  if (!layer.ok()) return layer.status();
  c->layer_ = std::move(*layer);
  return c;
}

StatusOr<std::unique_ptr<MegakernelCase>> MegakernelCase::create(const Shape& shape, const Routing& routing,
                                                                 uint64_t seed, const LayerConfig& config,
                                                                 const LayerOptions& options, bool write_y) {
  DeviceProblemOptions po;
  po.write_y = write_y;
  po.grad_precision = config.grad_precision;  // the weight gradients' buffers as the layer writes them
  return assemble(shape, config, options,
                  [&](const RowExchange& ex) { return DeviceProblem::create(shape, routing, seed, ex, po); });
}

StatusOr<std::unique_ptr<MegakernelCase>> MegakernelCase::create(const HostProblem& problem, const LayerConfig& config,
                                                                 const LayerOptions& options, bool write_y) {
  DeviceProblemOptions po;
  po.write_y = write_y;
  return assemble(problem.shape, config, options,
                  [&](const RowExchange& ex) { return DeviceProblem::create(problem, ex, po); });
}

Status MegakernelCase::enqueue(bool backward) {
  DETMOE_RETURN_IF_ERROR(layer_->forward({problem_->inputs(), problem_->outputs()}, stream()));
  if (backward)
    DETMOE_RETURN_IF_ERROR(
        layer_->backward({problem_->inputs(), problem_->grad_inputs(), problem_->grad_outputs()}, stream()));
  return Status::Ok();
}

StatusOr<std::vector<NamedTensor>> MegakernelCase::run(bool backward) {
  DETMOE_RETURN_IF_ERROR(problem_->poison_outputs());
  DETMOE_RETURN_IF_ERROR(enqueue(backward));
  DETMOE_RETURN_IF_ERROR(layer_->synchronize(stream()));
  return problem_->download(backward);
}

StatusOr<std::vector<std::vector<NamedTensor>>> MegakernelCase::run_graph(int replays, bool backward) {
  cudaStream_t s = stream();
  cudaGraph_t graph = nullptr;
  if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess)
    return Status(ErrorCode::kCudaError, "cudaStreamBeginCapture failed");
  const Status fwd = enqueue(backward);
  if (cudaStreamEndCapture(s, &graph) != cudaSuccess) return Status(ErrorCode::kCudaError, "cudaStreamEndCapture failed");
  DETMOE_RETURN_IF_ERROR(fwd);
  cudaGraphExec_t exec = nullptr;
  if (cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
    cudaGraphDestroy(graph);
    return Status(ErrorCode::kCudaError, "cudaGraphInstantiate failed");
  }
  std::vector<std::vector<NamedTensor>> all;
  Status status;
  for (int i = 0; i < replays && status.ok(); ++i) {
    status = problem_->poison_outputs();
    if (!status.ok()) break;
    if (cudaGraphLaunch(exec, s) != cudaSuccess) status = Status(ErrorCode::kCudaError, "cudaGraphLaunch failed");
    if (status.ok()) status = layer_->synchronize(s);
    if (!status.ok()) break;
    auto got = problem_->download(backward);
    if (!got.ok()) status = got.status();
    else all.push_back(std::move(*got));
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  if (!status.ok()) return status;
  return all;
}

std::vector<NamedTensor> run_megakernel_once(const Shape& s, const Routing& r, uint64_t seed, LayerConfig config,
                                             bool backward) {
  auto c = MegakernelCase::create(s, r, seed, config);
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  if (!c.ok()) return {};
  auto out = (*c)->run(backward);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  return out.ok() ? *out : std::vector<NamedTensor>{};
}

LayerConfig grid_config(int num_sms, int comm_sms) {
  LayerConfig c;
  c.num_sms = num_sms;
  c.comm_sms = comm_sms;
  return c;
}

namespace {

// One traced forward (+ backward): its outputs and the tiles the wave gate checked in the last launch.
std::pair<std::vector<NamedTensor>, int64_t> run_gate_traced(const Shape& s, const Routing& r, uint64_t seed,
                                                             const LayerConfig& config, bool backward) {
  LayerOptions options;
  options.trace_tasks_per_cta = 1;  // the plan's (the backward start's) record carries the count
  auto c = MegakernelCase::create(s, r, seed, config, options);
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  if (!c.ok()) return {};
  auto out = (*c)->run(backward);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  auto trace = (*c)->layer().downloaded_trace();
  EXPECT_TRUE(trace.ok()) << trace.status().to_string();
  if (!out.ok() || !trace.ok()) return {};
  int64_t gated = 0;
  for (const LayerTaskTrace& t : *trace) gated += t.gated_tiles;
  return {*out, gated};
}

}  // namespace

void expect_gated_configs_keep_bits(const Shape& s, const Routing& r, uint64_t seed,
                                    const std::vector<LayerConfig>& configs, bool backward) {
  const auto [full, full_gated] = run_gate_traced(s, r, seed, {}, backward);
  ASSERT_FALSE(full.empty());
  EXPECT_EQ(full_gated, 0) << "the full grid runs the gated phase in one wave";
  for (const LayerConfig& c : configs) {
    const auto [out, gated] = run_gate_traced(s, r, seed, c, backward);
    EXPECT_TRUE(bitwise_equal(out, full)) << "num_sms " << c.num_sms << " comm_sms " << c.comm_sms;
    EXPECT_GT(gated, 0) << "the wave gate checked no tile at num_sms " << c.num_sms << " comm_sms " << c.comm_sms;
  }
}

std::vector<int64_t> token_permutation(int64_t T) {
  std::vector<int64_t> perm(static_cast<size_t>(T));
  std::iota(perm.begin(), perm.end(), 0);
  std::reverse(perm.begin(), perm.end());
  std::rotate(perm.begin(), perm.begin() + std::min<int64_t>(77, T), perm.end());
  return perm;
}

PermutedTokens::PermutedTokens(const DeviceProblem& problem, const Shape& s, const std::vector<int64_t>& perm)
    : in_(problem.inputs()[0]), grad_(problem.grad_inputs()[0]) {
  const int64_t T = s.T, H = s.H, k = s.k;
  const size_t rows = static_cast<size_t>(T * H * 2), ids = static_cast<size_t>(T * k * 4);
  if (cudaMalloc(&memory_, 2 * rows + 2 * ids) != cudaSuccess) {
    status_ = Status(ErrorCode::kCudaError, "cudaMalloc of the permuted tokens failed");
    return;
  }
  auto* x = static_cast<uint16_t*>(memory_);
  auto* dout = x + T * H;
  auto* idx = reinterpret_cast<int32_t*>(dout + T * H);
  auto* w = reinterpret_cast<float*>(idx + T * k);
  bool ok = true;
  for (int64_t t = 0; t < T && ok; ++t) {
    const int64_t from = perm[static_cast<size_t>(t)];
    ok = cudaMemcpy(x + t * H, in_.x + from * H, H * 2, cudaMemcpyDeviceToDevice) == cudaSuccess &&
         cudaMemcpy(dout + t * H, grad_.dout + from * H, H * 2, cudaMemcpyDeviceToDevice) == cudaSuccess &&
         cudaMemcpy(idx + t * k, in_.topk_idx + from * k, k * 4, cudaMemcpyDeviceToDevice) == cudaSuccess &&
         cudaMemcpy(w + t * k, in_.topk_w + from * k, k * 4, cudaMemcpyDeviceToDevice) == cudaSuccess;
  }
  // A device-to-device cudaMemcpy returns before the copy is done, and the layer's stream does not
  // wait for the legacy stream: without this the kernel could read half-copied routing (it did,
  // under ctest -j4 on the H200: "topk_idx[489,1] = 0 … repeats an earlier slot").
  ok = ok && cudaDeviceSynchronize() == cudaSuccess;
  if (!ok) {
    status_ = Status(ErrorCode::kCudaError, "copying the permuted tokens failed");
    return;
  }
  in_.x = x;
  in_.topk_idx = idx;
  in_.topk_w = w;
  grad_.dout = dout;
}

PermutedTokens::~PermutedTokens() {
  if (memory_ != nullptr) cudaFree(memory_);
}

int64_t rows_not_permuted(const NamedTensor& permuted, const NamedTensor& base, const std::vector<int64_t>& perm) {
  const size_t T = perm.size(), row = permuted.bytes.size() / T;
  int64_t bad = 0;
  for (size_t t = 0; t < T; ++t)
    bad += std::memcmp(permuted.bytes.data() + t * row, base.bytes.data() + static_cast<size_t>(perm[t]) * row, row) != 0;
  return bad;
}

NamedTensor host_combine(const Shape& shape, const Routing& routing, const NamedTensor& y) {
  const int64_t N = shape.tokens_global(), k = shape.k, H = shape.H;
  NamedTensor out;
  out.name = "out";
  out.dtype = DType::kBF16;
  out.shape = {N, H};
  out.bytes.resize(static_cast<size_t>(N * H * 2));
  const auto* ybits = reinterpret_cast<const uint16_t*>(y.bytes.data());
  auto* obits = reinterpret_cast<uint16_t*>(out.bytes.data());
  for (int64_t t = 0; t < N; ++t)
    for (int64_t h = 0; h < H; ++h) {
      float acc = 0.0f;
      for (int64_t j = 0; j < k; ++j)
        acc = std::fmaf(routing.topk_w[t * k + j], float_from_bf16_bits(ybits[(t * k + j) * H + h]), acc);
      obits[t * H + h] = bf16_bits_from_float(acc);
    }
  return out;
}

}  // namespace detmoe::testing
