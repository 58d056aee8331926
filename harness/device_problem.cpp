#include "detmoe/device_problem.h"

#include <fmt/format.h>

#include <cstring>

#include "detmoe/cuda_status.h"
#include "detmoe/data.h"
#include "device_buffer.h"
#include "fill_kernels.h"

namespace detmoe {

struct DeviceProblem::Impl {
  Shape shape;
  DeviceProblemOptions options;
  int world = 1;
  std::vector<int> ranks, devices;
  std::vector<cudaStream_t> streams;
  std::vector<ref::DeviceBuffer> memory;
  std::vector<DeviceLayerInputs> inputs;
  std::vector<DeviceLayerOutputs> outputs;
  std::vector<DeviceGradInputs> grad_inputs;
  std::vector<DeviceGradOutputs> grad_outputs;
  std::vector<int32_t*> idx;
  std::vector<float*> w;
  // Output regions to poison: (pointer, bytes) per slot.
  std::vector<std::vector<std::pair<void*, int64_t>>> output_regions;
};

namespace {

using ref::Carver;

int64_t grad_size(GradPrecision p) { return p == GradPrecision::kFP32 ? 4 : 2; }

// Carves one rank's tensors; returns the output regions.
std::vector<std::pair<void*, int64_t>> carve(Carver& c, const Shape& s, const DeviceProblemOptions& o,
                                             DeviceLayerInputs& in, DeviceLayerOutputs& out, DeviceGradInputs& gin,
                                             DeviceGradOutputs& gout, int32_t*& idx, float*& w) {
  const int64_t T = s.T, H = s.H, F = s.F, Fs = s.Fs, k = s.k, epr = s.experts_per_rank(), g = grad_size(o.grad_precision);
  uint16_t* x = c.take<uint16_t>(T * H);
  idx = c.take<int32_t>(T * k);
  w = c.take<float>(T * k);
  uint16_t* wgu = c.take<uint16_t>(epr * 2 * F * H);
  uint16_t* wd = c.take<uint16_t>(epr * H * F);
  uint16_t* wsgu = Fs > 0 ? c.take<uint16_t>(2 * Fs * H) : nullptr;
  uint16_t* wsd = Fs > 0 ? c.take<uint16_t>(H * Fs) : nullptr;
  uint16_t* dout = c.take<uint16_t>(T * H);
  in = {x, idx, w, wgu, wd, wsgu, wsd};
  gin = {dout};
  std::vector<std::pair<void*, int64_t>> regions;
  auto region = [&](int64_t bytes) {
    void* p = c.take<char>(bytes);
    regions.push_back({p, bytes});
    return p;
  };
  out.out = static_cast<uint16_t*>(region(T * H * 2));
  out.y = o.write_y ? static_cast<uint16_t*>(region(T * k * H * 2)) : nullptr;
  gout.d_x = static_cast<uint16_t*>(region(T * H * 2));
  gout.d_topk_w = static_cast<float*>(region(T * k * 4));
  gout.dw_gate_up = region(epr * 2 * F * H * g);
  gout.dw_down = region(epr * H * F * g);
  gout.dws_gate_up = Fs > 0 ? region(2 * Fs * H * g) : nullptr;
  gout.dws_down = Fs > 0 ? region(H * Fs * g) : nullptr;
  return regions;
}

Status fill_rank(const Shape& s, uint64_t seed, int rank, const DeviceLayerInputs& in, const DeviceGradInputs& gin,
                 cudaStream_t stream) {
  using ref::FillSpec;
  const int64_t T = s.T, H = s.H, F = s.F, Fs = s.Fs, epr = s.experts_per_rank();
  auto scale = [&](TensorStream st) { return stream_scale_log2(s, st); };
  auto plain = [&](TensorStream st, int64_t batches, int64_t rows, int64_t cols, int64_t first) {
    FillSpec f;
    f.batches = batches;
    f.rows = f.split_rows = rows;
    f.cols = cols;
    f.first_batch = first;
    f.low = f.high = st;
    f.low_scale_log2 = f.high_scale_log2 = scale(st);
    return f;
  };
  auto stacked = [&](TensorStream lo, TensorStream hi, int64_t batches, int64_t half, int64_t cols, int64_t first) {
    FillSpec f = plain(lo, batches, 2 * half, cols, first);
    f.split_rows = half;
    f.high = hi;
    f.high_scale_log2 = scale(hi);
    return f;
  };
  uint16_t* x = const_cast<uint16_t*>(in.x);
  DETMOE_RETURN_IF_ERROR(ref::launch_fill_bf16(x, plain(TensorStream::kX, 1, T, H, rank), seed, stream));
  DETMOE_RETURN_IF_ERROR(ref::launch_fill_bf16(const_cast<uint16_t*>(gin.dout), plain(TensorStream::kDout, 1, T, H, rank), seed, stream));
  DETMOE_RETURN_IF_ERROR(ref::launch_fill_bf16(const_cast<uint16_t*>(in.w_gate_up),
                                               stacked(TensorStream::kWGate, TensorStream::kWUp, epr, F, H, rank * epr), seed, stream));
  DETMOE_RETURN_IF_ERROR(ref::launch_fill_bf16(const_cast<uint16_t*>(in.w_down), plain(TensorStream::kWDown, epr, H, F, rank * epr),
                                               seed, stream));
  if (Fs > 0) {
    DETMOE_RETURN_IF_ERROR(ref::launch_fill_bf16(const_cast<uint16_t*>(in.ws_gate_up),
                                                 stacked(TensorStream::kWsGate, TensorStream::kWsUp, 1, Fs, H, 0), seed, stream));
    DETMOE_RETURN_IF_ERROR(ref::launch_fill_bf16(const_cast<uint16_t*>(in.ws_down), plain(TensorStream::kWsDown, 1, H, Fs, 0),
                                                 seed, stream));
  }
  return Status::Ok();
}

// Copies one rank's slice of host tensors (global layout of LayerData) into its device tensors;
// gate and up rows are stacked per local expert as [W_gate[e]; W_up[e]]. A forward-only problem
// (no dout) gets zeros there, so nothing uninitialised is ever read.
Status upload_rank(const Shape& s, const LayerData& d, int rank, const DeviceLayerInputs& in, const DeviceGradInputs& gin,
                   cudaStream_t stream) {
  const int64_t T = s.T, H = s.H, F = s.F, Fs = s.Fs, epr = s.experts_per_rank();
  auto copy = [&](const uint16_t* dst, const uint16_t* src, int64_t count) -> Status {
    DETMOE_CUDA_RETURN(cudaMemcpyAsync(const_cast<uint16_t*>(dst), src, count * 2, cudaMemcpyHostToDevice, stream));
    return Status::Ok();
  };
  DETMOE_RETURN_IF_ERROR(copy(in.x, d.x.data() + rank * T * H, T * H));
  if (d.dout.empty()) DETMOE_CUDA_RETURN(cudaMemsetAsync(const_cast<uint16_t*>(gin.dout), 0, T * H * 2, stream));
  else DETMOE_RETURN_IF_ERROR(copy(gin.dout, d.dout.data() + rank * T * H, T * H));
  for (int64_t i = 0; i < epr; ++i) {
    const int64_t e = rank * epr + i;
    DETMOE_RETURN_IF_ERROR(copy(in.w_gate_up + i * 2 * F * H, d.w_gate.data() + e * F * H, F * H));
    DETMOE_RETURN_IF_ERROR(copy(in.w_gate_up + i * 2 * F * H + F * H, d.w_up.data() + e * F * H, F * H));
  }
  DETMOE_RETURN_IF_ERROR(copy(in.w_down, d.w_down.data() + rank * epr * H * F, epr * H * F));
  if (Fs > 0) {
    DETMOE_RETURN_IF_ERROR(copy(in.ws_gate_up, d.ws_gate.data(), Fs * H));
    DETMOE_RETURN_IF_ERROR(copy(in.ws_gate_up + Fs * H, d.ws_up.data(), Fs * H));
    DETMOE_RETURN_IF_ERROR(copy(in.ws_down, d.ws_down.data(), H * Fs));
  }
  return Status::Ok();
}

// Every host tensor has the size the shape says (a short vector would be read past its end).
Status check_host_data(const Shape& s, const LayerData& d) {
  const int64_t N = s.tokens_global();
  const struct {
    const char* name;
    size_t have;
    int64_t want;
  } sizes[] = {{"x", d.x.size(), N * s.H},           {"w_gate", d.w_gate.size(), s.E * s.F * s.H},
               {"w_up", d.w_up.size(), s.E * s.F * s.H}, {"w_down", d.w_down.size(), s.E * s.H * s.F},
               {"ws_gate", d.ws_gate.size(), s.Fs * s.H}, {"ws_up", d.ws_up.size(), s.Fs * s.H},
               {"ws_down", d.ws_down.size(), s.H * s.Fs}};
  for (const auto& t : sizes)
    if (static_cast<int64_t>(t.have) != t.want)
      return invalid_argument(fmt::format("host tensor {} has {} elements, the shape {} needs {}", t.name, t.have, s.to_string(), t.want));
  if (!d.dout.empty() && static_cast<int64_t>(d.dout.size()) != N * s.H)
    return invalid_argument(fmt::format("host tensor dout has {} elements, the shape {} needs {}", d.dout.size(), s.to_string(), N * s.H));
  return Status::Ok();
}

template <class T>
Status fetch(std::vector<T>& host, const void* device, int64_t count, cudaStream_t stream) {
  host.resize(count);
  if (count > 0) DETMOE_CUDA_RETURN(cudaMemcpyAsync(host.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost, stream));
  return Status::Ok();
}

NamedTensor raw_tensor(std::string name, DType dtype, std::vector<int64_t> shape) {
  NamedTensor t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.shape = std::move(shape);
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  t.bytes.resize(n * dtype_size(dtype));
  return t;
}

}  // namespace

DeviceProblem::DeviceProblem(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DeviceProblem::~DeviceProblem() = default;

StatusOr<std::unique_ptr<DeviceProblem>> DeviceProblem::create(const Shape& shape, const Routing& routing, uint64_t seed,
                                                               const RowExchange& exchange,
                                                               const DeviceProblemOptions& options) {
  return create_filled(shape, routing, exchange, options, [&](int rank, const DeviceLayerInputs& in, const DeviceGradInputs& gin,
                                                              cudaStream_t stream) {
    return fill_rank(shape, seed, rank, in, gin, stream);
  });
}

StatusOr<std::unique_ptr<DeviceProblem>> DeviceProblem::create(const Shape& shape, const Routing& routing,
                                                               const LayerData& data, const RowExchange& exchange,
                                                               const DeviceProblemOptions& options) {
  DETMOE_RETURN_IF_ERROR(validate(shape));
  DETMOE_RETURN_IF_ERROR(check_host_data(shape, data));
  return create_filled(shape, routing, exchange, options, [&](int rank, const DeviceLayerInputs& in, const DeviceGradInputs& gin,
                                                              cudaStream_t stream) {
    return upload_rank(shape, data, rank, in, gin, stream);
  });
}

StatusOr<std::unique_ptr<DeviceProblem>> DeviceProblem::create(const HostProblem& problem, const RowExchange& exchange,
                                                               DeviceProblemOptions options) {
  options.grad_precision = problem.grad_precision;
  return problem.seed ? create(problem.shape, problem.routing, *problem.seed, exchange, options)
                      : create(problem.shape, problem.routing, problem.data, exchange, options);
}

StatusOr<std::unique_ptr<DeviceProblem>> DeviceProblem::create_filled(const Shape& shape, const Routing& routing,
                                                                      const RowExchange& exchange,
                                                                      const DeviceProblemOptions& options,
                                                                      const RankFiller& fill) {
  DETMOE_RETURN_IF_ERROR(validate(shape));
  if (exchange.world_size() != shape.P)
    return invalid_argument(fmt::format("the exchange has {} ranks but the shape has P = {}", exchange.world_size(), shape.P));
  const int64_t N = shape.tokens_global(), k = shape.k, T = shape.T;
  if (routing.tokens != N || routing.k != k || static_cast<int64_t>(routing.topk_idx.size()) != N * k ||
      static_cast<int64_t>(routing.topk_w.size()) != N * k)
    return invalid_argument(fmt::format("routing has {} tokens × k = {} ({} ids, {} weights), the shape needs {} × {}",
                                        routing.tokens, routing.k, routing.topk_idx.size(), routing.topk_w.size(), N, k));
  auto impl = std::make_unique<Impl>();
  impl->shape = shape;
  impl->options = options;
  impl->world = exchange.world_size();
  const int n = exchange.local_count();
  impl->memory.resize(n);
  impl->inputs.resize(n);
  impl->outputs.resize(n);
  impl->grad_inputs.resize(n);
  impl->grad_outputs.resize(n);
  impl->idx.resize(n);
  impl->w.resize(n);
  impl->output_regions.resize(n);
  for (int slot = 0; slot < n; ++slot) {
    const int rank = exchange.local_rank(slot);
    impl->ranks.push_back(rank);
    impl->devices.push_back(exchange.device(slot));
    impl->streams.push_back(exchange.stream(slot));
    DETMOE_CUDA_RETURN(cudaSetDevice(exchange.device(slot)));
    Carver measure;
    carve(measure, shape, options, impl->inputs[slot], impl->outputs[slot], impl->grad_inputs[slot],
          impl->grad_outputs[slot], impl->idx[slot], impl->w[slot]);
    DETMOE_RETURN_IF_ERROR(impl->memory[slot].allocate(static_cast<size_t>(measure.used()),
                                                       fmt::format("rank {}'s problem tensors", rank)));
    Carver real(impl->memory[slot].as<char>());
    impl->output_regions[slot] = carve(real, shape, options, impl->inputs[slot], impl->outputs[slot],
                                       impl->grad_inputs[slot], impl->grad_outputs[slot], impl->idx[slot], impl->w[slot]);
    cudaStream_t stream = exchange.stream(slot);
    DETMOE_RETURN_IF_ERROR(fill(rank, impl->inputs[slot], impl->grad_inputs[slot], stream));
    DETMOE_CUDA_RETURN(cudaMemcpyAsync(impl->idx[slot], routing.topk_idx.data() + rank * T * k, T * k * 4,
                                       cudaMemcpyHostToDevice, stream));
    DETMOE_CUDA_RETURN(cudaMemcpyAsync(impl->w[slot], routing.topk_w.data() + rank * T * k, T * k * 4,
                                       cudaMemcpyHostToDevice, stream));
    DETMOE_CUDA_RETURN(cudaStreamSynchronize(stream));  // the routing (and uploaded data) copies read pageable host memory
  }
  auto problem = std::unique_ptr<DeviceProblem>(new DeviceProblem(std::move(impl)));
  DETMOE_RETURN_IF_ERROR(problem->poison_outputs());
  return problem;
}

std::span<const DeviceLayerInputs> DeviceProblem::inputs() const { return impl_->inputs; }
std::span<const DeviceLayerOutputs> DeviceProblem::outputs() const { return impl_->outputs; }
std::span<const DeviceGradInputs> DeviceProblem::grad_inputs() const { return impl_->grad_inputs; }
std::span<const DeviceGradOutputs> DeviceProblem::grad_outputs() const { return impl_->grad_outputs; }
int32_t* DeviceProblem::topk_idx(int slot) const { return impl_->idx.at(slot); }
float* DeviceProblem::topk_w(int slot) const { return impl_->w.at(slot); }

Status DeviceProblem::poison_outputs() const {
  for (size_t slot = 0; slot < impl_->ranks.size(); ++slot) {
    DETMOE_CUDA_RETURN(cudaSetDevice(impl_->devices[slot]));
    for (const auto& [p, bytes] : impl_->output_regions[slot])
      DETMOE_CUDA_RETURN(cudaMemsetAsync(p, 0xff, bytes, impl_->streams[slot]));
    DETMOE_CUDA_RETURN(cudaStreamSynchronize(impl_->streams[slot]));
  }
  return Status::Ok();
}

StatusOr<std::vector<NamedTensor>> DeviceProblem::download(bool backward) const {
  const Impl& m = *impl_;
  const Shape& s = m.shape;
  if (static_cast<int>(m.ranks.size()) != m.world)
    return invalid_argument(fmt::format("download needs every rank in this process ({} of {} are)", m.ranks.size(), m.world));
  const int64_t T = s.T, H = s.H, F = s.F, Fs = s.Fs, k = s.k, E = s.E, N = s.tokens_global(), epr = s.experts_per_rank();
  const DType act = DType::kBF16;
  const DType grad = m.options.grad_precision == GradPrecision::kFP32 ? DType::kFP32 : DType::kBF16;
  const int64_t g = dtype_size(grad);

  std::vector<NamedTensor> t;
  t.push_back(raw_tensor("out", act, {N, H}));
  if (m.options.write_y) t.push_back(raw_tensor("y", act, {N, k, H}));
  if (backward) {
    t.push_back(raw_tensor("d_x", act, {N, H}));
    t.push_back(raw_tensor("d_topk_w", DType::kFP32, {N, k}));
    t.push_back(raw_tensor("dw_gate", grad, {E, F, H}));
    t.push_back(raw_tensor("dw_up", grad, {E, F, H}));
    t.push_back(raw_tensor("dw_down", grad, {E, H, F}));
  }
  auto named = [&](const char* name) -> NamedTensor& {
    for (NamedTensor& x : t)
      if (x.name == name) return x;
    throw Error(Status(ErrorCode::kInternal, name));
  };
  std::vector<double> dws_gate(backward && Fs > 0 ? Fs * H : 0, 0.0), dws_up(dws_gate.size(), 0.0),
      dws_down(backward && Fs > 0 ? H * Fs : 0, 0.0);
  std::vector<uint8_t> dws_gu_bytes, dws_d_bytes;

  for (size_t slot = 0; slot < m.ranks.size(); ++slot) {
    const int r = m.ranks[slot];
    cudaStream_t st = m.streams[slot];
    DETMOE_CUDA_RETURN(cudaSetDevice(m.devices[slot]));
    auto copy = [&](NamedTensor& dst, int64_t dst_byte, const void* src, int64_t bytes) -> Status {
      DETMOE_CUDA_RETURN(cudaMemcpyAsync(dst.bytes.data() + dst_byte, src, bytes, cudaMemcpyDeviceToHost, st));
      return Status::Ok();
    };
    DETMOE_RETURN_IF_ERROR(copy(named("out"), r * T * H * 2, m.outputs[slot].out, T * H * 2));
    if (m.options.write_y) DETMOE_RETURN_IF_ERROR(copy(named("y"), r * T * k * H * 2, m.outputs[slot].y, T * k * H * 2));
    if (!backward) continue;
    const DeviceGradOutputs& go = m.grad_outputs[slot];
    DETMOE_RETURN_IF_ERROR(copy(named("d_x"), r * T * H * 2, go.d_x, T * H * 2));
    DETMOE_RETURN_IF_ERROR(copy(named("d_topk_w"), r * T * k * 4, go.d_topk_w, T * k * 4));
    for (int64_t el = 0; el < epr; ++el) {
      const int64_t e = r * epr + el;
      const char* gu = static_cast<const char*>(go.dw_gate_up) + el * 2 * F * H * g;
      DETMOE_RETURN_IF_ERROR(copy(named("dw_gate"), e * F * H * g, gu, F * H * g));
      DETMOE_RETURN_IF_ERROR(copy(named("dw_up"), e * F * H * g, gu + F * H * g, F * H * g));
      DETMOE_RETURN_IF_ERROR(
          copy(named("dw_down"), e * H * F * g, static_cast<const char*>(go.dw_down) + el * H * F * g, H * F * g));
    }
    if (Fs > 0) {
      dws_gu_bytes.resize(2 * Fs * H * g);
      dws_d_bytes.resize(H * Fs * g);
      DETMOE_CUDA_RETURN(cudaMemcpyAsync(dws_gu_bytes.data(), go.dws_gate_up, dws_gu_bytes.size(), cudaMemcpyDeviceToHost, st));
      DETMOE_CUDA_RETURN(cudaMemcpyAsync(dws_d_bytes.data(), go.dws_down, dws_d_bytes.size(), cudaMemcpyDeviceToHost, st));
      DETMOE_CUDA_RETURN(cudaStreamSynchronize(st));
      NamedTensor gu = raw_tensor("gu", grad, {2 * Fs, H}), d = raw_tensor("d", grad, {H, Fs});
      gu.bytes = dws_gu_bytes;
      d.bytes = dws_d_bytes;
      for (int64_t i = 0; i < Fs * H; ++i) {
        dws_gate[i] += gu.at(i);
        dws_up[i] += gu.at(Fs * H + i);
      }
      for (int64_t i = 0; i < H * Fs; ++i) dws_down[i] += d.at(i);
      if (m.world == 1) {  // a single rank: keep the storage dtype and its exact bits
        NamedTensor a = raw_tensor("dws_gate", grad, {Fs, H}), b = raw_tensor("dws_up", grad, {Fs, H});
        std::memcpy(a.bytes.data(), dws_gu_bytes.data(), Fs * H * g);
        std::memcpy(b.bytes.data(), dws_gu_bytes.data() + Fs * H * g, Fs * H * g);
        NamedTensor c = raw_tensor("dws_down", grad, {H, Fs});
        c.bytes = dws_d_bytes;
        t.push_back(std::move(a));
        t.push_back(std::move(b));
        t.push_back(std::move(c));
      }
    }
    DETMOE_CUDA_RETURN(cudaStreamSynchronize(st));
  }
  if (backward && Fs > 0 && m.world > 1) {
    t.push_back(make_tensor("dws_gate", DType::kFP64, {Fs, H}, dws_gate));
    t.push_back(make_tensor("dws_up", DType::kFP64, {Fs, H}, dws_up));
    t.push_back(make_tensor("dws_down", DType::kFP64, {H, Fs}, dws_down));
  }
  return t;
}

}  // namespace detmoe
