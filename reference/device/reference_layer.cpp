// ReferenceLayer: creation (every buffer allocated up front), the plan step with its one host
// synchronisation, and the exchange segments that follow from the plan's counts.
#include "detmoe/reference_layer.h"

#include <fmt/format.h>

#include <algorithm>

#include "detmoe/cuda_status.h"
#include "layer_state.h"

namespace detmoe {

using ref::RankState;

const char* to_string(ReferenceGemm g) { return g == ReferenceGemm::kPerExpert ? "per-expert" : "grouped-batched"; }

namespace {

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// Every buffer of one rank, carved from one allocation (measure with a null base first).
void carve_rank(RankState& r, ref::Carver& c, const Shape& s, int64_t capacity, int64_t shared_rows, bool alias) {
  const int64_t N = s.tokens_global(), H = s.H, F = s.F, Fs = s.Fs, send = s.T * s.k;
  r.idx_global = c.take<int32_t>(N * s.k);
  r.w_global = c.take<float>(N * s.k);
  r.send_base = c.take<int64_t>(s.E);
  r.send_pos = c.take<int32_t>(send);
  // With aliasing the one buffer must hold both orders: max(send, capacity) rows.
  const int64_t exp_rows = alias ? std::max(send, capacity) : capacity;
  r.x_send = c.take<uint16_t>((alias ? exp_rows : send) * H);
  r.x_exp = alias ? r.x_send : c.take<uint16_t>(exp_rows * H);
  r.h = c.take<uint16_t>(exp_rows * 2 * F);
  r.a = c.take<uint16_t>(exp_rows * F);
  r.y_exp = c.take<uint16_t>(exp_rows * H);
  r.y_send = alias ? r.y_exp : c.take<uint16_t>(send * H);
  r.dy_send = c.take<uint16_t>((alias ? exp_rows : send) * H);
  r.dy_exp = alias ? r.dy_send : c.take<uint16_t>(exp_rows * H);
  r.da = c.take<float>(exp_rows * F);
  r.dh = c.take<uint16_t>(exp_rows * 2 * F);
  r.dx_exp = c.take<uint16_t>(exp_rows * H);
  r.dx_send = alias ? r.dx_exp : c.take<uint16_t>(send * H);
  if (Fs > 0) {
    const bool pad = shared_rows != s.T;
    r.x_pad = pad ? c.take<uint16_t>(shared_rows * H) : nullptr;
    r.hs = c.take<uint16_t>(shared_rows * 2 * Fs);
    r.as = c.take<uint16_t>(shared_rows * Fs);
    r.s = c.take<uint16_t>(shared_rows * H);
    r.dout_pad = pad ? c.take<uint16_t>(shared_rows * H) : nullptr;
    r.das = c.take<float>(shared_rows * Fs);
    r.dhs = c.take<uint16_t>(shared_rows * 2 * Fs);
    r.dxs = c.take<uint16_t>(shared_rows * H);
  }
}

}  // namespace

ReferenceLayer::ReferenceLayer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ReferenceLayer::~ReferenceLayer() {
  if (impl_ && impl_->exchange) (void)impl_->exchange->synchronize();
}

const Shape& ReferenceLayer::shape() const { return impl_->shape; }
const LayerConfig& ReferenceLayer::config() const { return impl_->config; }
RowExchange& ReferenceLayer::exchange() const { return *impl_->exchange; }

StatusOr<std::unique_ptr<ReferenceLayer>> ReferenceLayer::create(const Shape& shape, const LayerConfig& config,
                                                                 std::shared_ptr<RowExchange> exchange,
                                                                 const ReferenceOptions& options) {
  DETMOE_RETURN_IF_ERROR(validate(config, shape));
  if (!exchange) return invalid_argument("exchange is null");
  if (exchange->world_size() != shape.P)
    return invalid_argument(fmt::format("the exchange has {} ranks but the shape has P = {}", exchange->world_size(), shape.P));
  if (options.gemm != ReferenceGemm::kPerExpert && options.gemm != ReferenceGemm::kGroupedBatched)
    return invalid_argument(fmt::format("options.gemm = {} is not a ReferenceGemm", static_cast<int>(options.gemm)));

  auto impl = std::make_unique<Impl>();
  impl->shape = shape;
  impl->config = config;
  impl->options = options;
  impl->exchange = exchange;
  impl->capacity_rows = config.recv_capacity_rows == 0 ? worst_case_recv_rows(shape) : config.recv_capacity_rows;
  impl->shared_rows = round_up(shape.T, ref::kSharedRowChunk);
  const bool alias = exchange->single_stream() && shape.P == 1;

  for (int slot = 0; slot < exchange->local_count(); ++slot) {
    auto r = std::make_unique<RankState>();
    r->slot = slot;
    r->rank = exchange->local_rank(slot);
    r->device = exchange->device(slot);
    r->stream = exchange->stream(slot);
    DETMOE_CUDA_RETURN(cudaSetDevice(r->device));
    // A split bf16 weight gradient (ref::wgrad_tail_rows) sums in fp32 scratch before its one
    // rounding: room for the largest, [2·max(F, Fs), H].
    const int64_t split_scratch =
        config.grad_precision == GradPrecision::kBF16 ? 2 * std::max(shape.F, shape.Fs) * shape.H : 0;
    DETMOE_RETURN_IF_ERROR(r->gemm.init(r->stream, options.cublas_workspace_bytes, split_scratch));
    DETMOE_RETURN_IF_ERROR(r->plan.allocate(shape));
    ref::Carver measure;
    carve_rank(*r, measure, shape, impl->capacity_rows, impl->shared_rows, alias);
    DETMOE_RETURN_IF_ERROR(r->memory.allocate(static_cast<size_t>(measure.used()),
                                              fmt::format("rank {}'s reference-layer buffers", r->rank)));
    ref::Carver real(r->memory.as<char>());
    carve_rank(*r, real, shape, impl->capacity_rows, impl->shared_rows, alias);
    if (r->x_pad != nullptr) {  // the padding rows stay zero for good
      DETMOE_CUDA_RETURN(cudaMemsetAsync(r->x_pad, 0, impl->shared_rows * shape.H * 2, r->stream));
      DETMOE_CUDA_RETURN(cudaMemsetAsync(r->dout_pad, 0, impl->shared_rows * shape.H * 2, r->stream));
    }
    impl->ranks.push_back(std::move(r));
  }
  // Routing rows: every rank's [T, k] block lands at its global token offset on every rank.
  for (int32_t s = 0; s < shape.P; ++s)
    for (int32_t d = 0; d < shape.P; ++d) impl->routing_segments.push_back({s, d, 0, s * shape.T, shape.T});
  DETMOE_RETURN_IF_ERROR(exchange->synchronize());
  return std::unique_ptr<ReferenceLayer>(new ReferenceLayer(std::move(impl)));
}

Status ReferenceLayer::Impl::check_slots(size_t n, const char* what) const {
  if (n != static_cast<size_t>(exchange->local_count()))
    return invalid_argument(fmt::format("{} has {} entries, but this process drives {} ranks (one entry each)", what, n,
                                        exchange->local_count()));
  return Status::Ok();
}

Status ReferenceLayer::plan(std::span<const DeviceLayerInputs> inputs) {
  Impl& m = *impl_;
  m.planned = m.forward_done = false;
  DETMOE_RETURN_IF_ERROR(m.check_slots(inputs.size(), "inputs"));
  for (auto& r : m.ranks) DETMOE_RETURN_IF_ERROR(validate_device_inputs(m.shape, inputs[r->slot], r->rank));

  const size_t n = m.ranks.size();
  std::vector<const void*> idx_src(n), w_src(n);
  std::vector<void*> idx_dst(n), w_dst(n);
  for (auto& r : m.ranks) {
    idx_src[r->slot] = inputs[r->slot].topk_idx;
    w_src[r->slot] = inputs[r->slot].topk_w;
    idx_dst[r->slot] = r->idx_global;
    w_dst[r->slot] = r->w_global;
  }
  const int64_t row_bytes = m.shape.k * 4;
  DETMOE_RETURN_IF_ERROR(m.exchange->exchange(m.routing_segments, idx_src, idx_dst, row_bytes));
  DETMOE_RETURN_IF_ERROR(m.exchange->exchange(m.routing_segments, w_src, w_dst, row_bytes));
  for (auto& r : m.ranks) {
    DETMOE_CUDA_RETURN(cudaSetDevice(r->device));
    DETMOE_RETURN_IF_ERROR(r->plan.enqueue(r->idx_global, r->w_global, r->stream));
    DETMOE_RETURN_IF_ERROR(
        ref::launch_send_positions(m.shape, r->rank, r->idx_global, r->plan.tables(), r->send_base, r->send_pos, r->stream));
  }
  // The one host synchronisation of a step: cuBLAS and the exchange take row counts as host
  // integers.
  DETMOE_RETURN_IF_ERROR(m.exchange->synchronize());
  for (auto& r : m.ranks)
    DETMOE_RETURN_IF_ERROR(r->plan.check(r->idx_global, r->w_global, m.capacity_rows, r->stream));

  const int64_t E = m.shape.E, P = m.shape.P, epr = m.shape.experts_per_rank();
  const auto& first = *m.ranks.front();
  m.expert_src_count.assign(first.plan.host_expert_src_count(), first.plan.host_expert_src_count() + E * P);
  m.expert_offset.assign(first.plan.host_expert_offset(), first.plan.host_expert_offset() + E + 1);
  for (auto& r : m.ranks)
    for (int64_t i = 0; i < E * P; ++i)
      if (r->plan.host_expert_src_count()[i] != m.expert_src_count[i])
        return Status(ErrorCode::kInternal, fmt::format("rank {} and rank {} built different plans (count {} of expert {}, "
                                                        "source {}: {} vs {})", first.rank, r->rank, i, i / P, i % P,
                                                        m.expert_src_count[i], r->plan.host_expert_src_count()[i]));

  // Segments in (source, destination, expert) order; the send side's offsets follow the same
  // formulas as the send-position kernel: destination, then expert, then token.
  m.dispatch_segments.clear();
  m.combine_segments.clear();
  std::vector<int64_t> expert_src_offset(E * P);
  for (int64_t e = 0; e < E; ++e)
    for (int64_t s = 0, within = 0; s < P; ++s) {
      expert_src_offset[e * P + s] = within;
      within += m.expert_src_count[e * P + s];
    }
  for (int32_t s = 0; s < P; ++s) {
    int64_t send_row = 0;
    for (int32_t d = 0; d < P; ++d)
      for (int64_t e = d * epr; e < (d + 1) * epr; ++e) {
        const int64_t rows = m.expert_src_count[e * P + s];
        if (rows == 0) continue;
        const int64_t dst_row = m.expert_offset[e] - m.rank_row_begin(d) + expert_src_offset[e * P + s];
        m.dispatch_segments.push_back({s, d, send_row, dst_row, rows});
        m.combine_segments.push_back({d, s, dst_row, send_row, rows});
        send_row += rows;
      }
  }
  m.planned = true;
  return Status::Ok();
}

Status ReferenceLayer::forward_planned(std::span<const DeviceLayerInputs> inputs,
                                       std::span<const DeviceLayerOutputs> outputs) {
  Impl& m = *impl_;
  if (!m.planned) return invalid_argument("forward_planned() needs a successful plan() first");
  DETMOE_RETURN_IF_ERROR(m.check_slots(inputs.size(), "inputs"));
  DETMOE_RETURN_IF_ERROR(m.check_slots(outputs.size(), "outputs"));
  for (auto& r : m.ranks) {
    DETMOE_RETURN_IF_ERROR(validate_device_inputs(m.shape, inputs[r->slot], r->rank));
    DETMOE_RETURN_IF_ERROR(validate_device_outputs(m.shape, outputs[r->slot], r->rank));
  }
  m.forward_done = false;
  DETMOE_RETURN_IF_ERROR(m.run_forward(inputs, outputs));
  m.forward_done = true;
  return Status::Ok();
}

Status ReferenceLayer::forward(std::span<const DeviceLayerInputs> inputs, std::span<const DeviceLayerOutputs> outputs) {
  DETMOE_RETURN_IF_ERROR(plan(inputs));
  return forward_planned(inputs, outputs);
}

Status ReferenceLayer::backward(std::span<const DeviceLayerInputs> inputs, std::span<const DeviceGradInputs> grads,
                                std::span<const DeviceGradOutputs> outputs) {
  Impl& m = *impl_;
  if (!m.forward_done) return invalid_argument("backward() needs a successful forward() of the same step first");
  DETMOE_RETURN_IF_ERROR(m.check_slots(inputs.size(), "inputs"));
  DETMOE_RETURN_IF_ERROR(m.check_slots(grads.size(), "grads"));
  DETMOE_RETURN_IF_ERROR(m.check_slots(outputs.size(), "grad outputs"));
  for (auto& r : m.ranks) {
    DETMOE_RETURN_IF_ERROR(validate_device_inputs(m.shape, inputs[r->slot], r->rank));
    DETMOE_RETURN_IF_ERROR(validate_device_grad_inputs(m.shape, grads[r->slot], r->rank));
    DETMOE_RETURN_IF_ERROR(validate_device_grad_outputs(m.shape, outputs[r->slot], r->rank));
  }
  return m.run_backward(inputs, grads, outputs);
}

Status ReferenceLayer::synchronize() { return impl_->exchange->synchronize(); }

StatusOr<RoutingPlan> ReferenceLayer::downloaded_plan(int slot) const {
  const Impl& m = *impl_;
  if (!m.planned) return invalid_argument("no plan: call plan() or forward() first");
  if (slot < 0 || slot >= static_cast<int>(m.ranks.size()))
    return invalid_argument(fmt::format("slot = {} is out of range [0, {})", slot, m.ranks.size()));
  const RankState& r = *m.ranks[slot];
  DETMOE_CUDA_RETURN(cudaSetDevice(r.device));
  return r.plan.download(m.config.recv_capacity_rows, r.stream);
}

}  // namespace detmoe
