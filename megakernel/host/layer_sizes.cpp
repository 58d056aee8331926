#include "megakernel/host/layer_sizes.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>

namespace detmoe::mk {
namespace {

int64_t div_up(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round256(int64_t bytes) { return div_up(bytes, 256) * 256; }

}  // namespace

Status check_megakernel_limits(const Shape& shape, const LayerConfig& config, int64_t grid_ctas) {
  DETMOE_RETURN_IF_ERROR(validate(config, shape));
  if (shape.P > kMaxMegakernelRanks)
    return {ErrorCode::kNotImplemented,
            fmt::format("P = {}: the megakernel's loopback holds at most {} ranks in one launch", shape.P, kMaxMegakernelRanks)};
  if (shape.E > 1024)
    return {ErrorCode::kNotImplemented, fmt::format("E = {}: the megakernel's plan handles at most 1024 experts", shape.E)};
  if (grid_ctas < shape.P)
    return invalid_argument(
        fmt::format("num_sms = {} gives fewer CTAs than the P = {} ranks (each rank needs a slice)", grid_ctas, shape.P));
  const int64_t cap = config.recv_capacity_rows > 0 ? config.recv_capacity_rows : worst_case_recv_rows(shape);
  const int64_t limit = std::numeric_limits<int32_t>::max() - 1024;
  if (shape.P * cap > limit)
    return {ErrorCode::kNotImplemented,
            fmt::format("P·capacity = {}·{} receive rows exceed the megakernel's int32 row range", shape.P, cap)};
  if (shape.rows_global() > limit)
    return {ErrorCode::kNotImplemented, fmt::format("P·T·k = {} rows exceed the megakernel's int32 row range",
                                                    shape.rows_global())};
  if (shape.P * shape.T * shape.k > limit / std::max<int64_t>(1, shape.H / 64))
    return {ErrorCode::kNotImplemented, "the y slots buffer exceeds the megakernel's index range"};
  return Status::Ok();
}

int32_t plan_chunk_tokens(int64_t T, int64_t P, int64_t grid_ctas) {
  int32_t c = kMaxPlanChunkTokens;
  while (c > kMinPlanChunkTokens && P * div_up(T, c / 2) <= grid_ctas) c /= 2;
  return c;
}

StatusOr<LayerSizes> layer_sizes(const Shape& shape, const LayerConfig& config, int64_t grid_ctas) {
  DETMOE_RETURN_IF_ERROR(validate(config, shape));
  if (grid_ctas < 1) return invalid_argument(fmt::format("layer_sizes: grid_ctas = {} must be ≥ 1", grid_ctas));
  LayerSizes z;
  const int64_t P = shape.P, T = shape.T, H = shape.H, F = shape.F, Fs = shape.Fs;
  z.capacity = config.recv_capacity_rows > 0 ? config.recv_capacity_rows : worst_case_recv_rows(shape);
  z.plan_chunk_tokens = plan_chunk_tokens(T, P, grid_ctas);
  z.chunks_per_rank = div_up(T, z.plan_chunk_tokens);
  z.sum_chunks = div_up(T, kSumChunkTokens);
  z.token_mblocks = div_up(T, kRowsPerMBlock);
  z.mblock_capacity = z.capacity / kRowsPerMBlock + shape.experts_per_rank() + 1;
  z.rows = shape.rows_global();
  CounterLayout& c = z.counters;
  int64_t at = 0;
  c.dispatch_ready = static_cast<int32_t>(at), at += z.mblock_capacity;
  c.gemm1_done = static_cast<int32_t>(at), at += z.mblock_capacity;
  c.shared1_done = static_cast<int32_t>(at), at += z.token_mblocks;
  c.shared2_done = static_cast<int32_t>(at), at += z.token_mblocks;
  c.slots_ready = static_cast<int32_t>(at), at += z.sum_chunks;
  c.per_rank = static_cast<int32_t>(at);
  z.counter_words = P * at;
  z.recv = P * z.capacity * H;
  z.act = P * z.capacity * F;
  z.h = config.save_h ? P * z.capacity * 2 * F : 0;
  z.slots = P * T * shape.k * H;
  z.act_s = Fs > 0 ? P * T * Fs : 0;
  z.s = Fs > 0 ? P * T * H : 0;
  z.hs = Fs > 0 && config.save_h ? P * T * 2 * Fs : 0;
  z.dy = P * z.capacity * H;
  z.dh = P * z.capacity * 2 * F;
  z.dx_slots = P * T * shape.k * H;
  z.dhs = Fs > 0 ? P * T * 2 * Fs : 0;
  z.rank_group_offsets = P * (shape.experts_per_rank() + 1);  // recompute_h's and the weight gradients' groups
  z.chunk_cells = P * z.chunks_per_rank * shape.E;
  z.workspace_bytes = layout_workspace(0, shape, z).total_bytes;
  Workspace backward{};
  z.backward_bytes = layout_backward_workspace(0, z, backward);
  return z;
}

namespace {
// A set overlap_rows holds for every kind of tile; 0 picks the kind's default.
int32_t band_or_default(const LayerConfig& config, int32_t default_mblocks) {
  return config.overlap_rows <= 0 ? default_mblocks : std::max<int32_t>(1, config.overlap_rows / kRowsPerMBlock);
}
}  // namespace

int32_t forward_band_mblocks(const LayerConfig& config) { return band_or_default(config, kDefaultForwardBandMBlocks); }

int32_t forward_down_band_mblocks(const LayerConfig& config) {
  return band_or_default(config, kDefaultForwardDownBandMBlocks);
}

int32_t data_grad_band_mblocks(const LayerConfig& config) {
  return band_or_default(config, kDefaultDataGradBandMBlocks);
}

int32_t weight_grad_band_mblocks(const LayerConfig& config) {
  return band_or_default(config, kDefaultWeightGradBandMBlocks);
}

int32_t comm_ctas_per_rank(const LayerConfig& config, int64_t P) {
  if (config.comm_sms <= 0 || P <= 0) return 0;
  return static_cast<int32_t>(div_up(config.comm_sms, P));
}

namespace {

// Hands out 256-byte aligned pieces from a base address.
class Carver {
 public:
  explicit Carver(uintptr_t base) : base_(base), at_(base) {}
  template <class T>
  T* take(int64_t count) {
    if (count <= 0) return nullptr;
    T* p = reinterpret_cast<T*>(at_);
    at_ += static_cast<uintptr_t>(round256(static_cast<int64_t>(sizeof(T)) * count));
    return p;
  }
  int64_t used() const { return static_cast<int64_t>(at_ - base_); }

 private:
  uintptr_t base_, at_;
};

}  // namespace

WorkspaceLayout layout_workspace(uintptr_t base, const Shape& shape, const LayerSizes& z) {
  WorkspaceLayout out;
  Carver c(base);
  Workspace& ws = out.ws;
  ws.launch_state = c.take<unsigned int>(2);
  ws.tickets = c.take<unsigned int>(2 * shape.P);
  ws.bad_key = c.take<unsigned long long>(1);
  ws.barriers = c.take<unsigned long long>(kPlanBarriers);
  ws.error = c.take<DeviceErrorRecord>(1);
  ws.counters = c.take<unsigned long long>(z.counter_words);
  out.control_bytes = c.used();
  ws.chunk_base = c.take<int32_t>(z.chunk_cells);
  ws.expert_count = c.take<int32_t>(shape.E);
  ws.expert_offset = c.take<int32_t>(shape.E + 1);
  ws.mblock_offset = c.take<int32_t>(shape.E + 1);
  ws.rank_row_begin = c.take<int32_t>(shape.P + 1);
  ws.slot_row = c.take<int32_t>(z.rows);
  ws.row_token = c.take<int32_t>(z.rows);
  ws.row_slot = c.take<int32_t>(z.rows);
  ws.recv = c.take<uint16_t>(z.recv);
  ws.act = c.take<uint16_t>(z.act);
  ws.h = c.take<uint16_t>(z.h);
  ws.slots = c.take<uint16_t>(z.slots);
  ws.act_s = c.take<uint16_t>(z.act_s);
  ws.s = c.take<uint16_t>(z.s);
  ws.hs = c.take<uint16_t>(z.hs);
  out.total_bytes = c.used();
  return out;
}

int64_t layout_backward_workspace(uintptr_t base, const LayerSizes& z, Workspace& ws) {
  Carver c(base);
  ws.dy = c.take<uint16_t>(z.dy);
  ws.dh = c.take<uint16_t>(z.dh);
  ws.dx_slots = c.take<uint16_t>(z.dx_slots);
  ws.dhs = c.take<uint16_t>(z.dhs);
  ws.rank_group_offsets = c.take<int32_t>(z.rank_group_offsets);
  ws.wgrad_tickets = c.take<unsigned int>(1);
  return c.used();
}

std::string describe_task(uint64_t id, int32_t plan_chunk_tokens) {
  const uint32_t rank = task_rank(id), index = task_index(id);
  switch (task_kind(id)) {
    case TaskKind::kPlan: {
      static const char* kPhases[] = {"validate+count", "chunk scan", "offsets+capacity"};
      return fmt::format("plan phase {} ({})", index, index < 3 ? kPhases[index] : "?");
    }
    case TaskKind::kPlaceDispatch:
      return fmt::format("place+dispatch of token chunk {} (tokens {}..) of rank {}", index,
                         int64_t{index} * plan_chunk_tokens, rank);
    case TaskKind::kGemm1: return fmt::format("GEMM1 (+SwiGLU) tile {} of rank {}", index, rank);
    case TaskKind::kSharedGemm1: return fmt::format("shared-expert GEMM1 tile {} of rank {}", index, rank);
    case TaskKind::kGemm2: return fmt::format("GEMM2 (+combine) tile {} of rank {}", index, rank);
    case TaskKind::kSharedGemm2: return fmt::format("shared-expert GEMM2 tile {} of rank {}", index, rank);
    case TaskKind::kWeightedSum:
      return fmt::format("weighted sum of token chunk {} (tokens {}..) of rank {}", index, index * kSumChunkTokens, rank);
    case TaskKind::kBackwardStart: return "backward start (counter stamp + grid barrier)";
    case TaskKind::kDyDispatch:
      return fmt::format("backward dy dispatch of token chunk {} (tokens {}..) of rank {}", index,
                         int64_t{index} * plan_chunk_tokens, rank);
    case TaskKind::kSharedDgrad1: return fmt::format("backward shared-expert da (+dSwiGLU) tile {} of rank {}", index, rank);
    case TaskKind::kDgrad1: return fmt::format("backward da = dy·W_down (+dSwiGLU) tile {} of rank {}", index, rank);
    case TaskKind::kSharedDgrad2: return fmt::format("backward shared-expert dx tile {} of rank {}", index, rank);
    case TaskKind::kWgradDown: return fmt::format("backward dW_down tile {} of rank {}", index, rank);
    case TaskKind::kSharedWgradDown: return fmt::format("backward dWs_down tile {} of rank {}", index, rank);
    case TaskKind::kDgrad2: return fmt::format("backward dx = dh·W_gate_up (+push to slots) tile {} of rank {}", index, rank);
    case TaskKind::kWgradGateUp: return fmt::format("backward dW_gate_up tile {} of rank {}", index, rank);
    case TaskKind::kSharedWgradGateUp: return fmt::format("backward dWs_gate_up tile {} of rank {}", index, rank);
    case TaskKind::kDxSum:
      return fmt::format("backward d_x sum of token chunk {} (tokens {}..) of rank {}", index, index * kSumChunkTokens, rank);
  }
  return fmt::format("task 0x{:x}", id);
}

std::string describe_counter(CounterKind kind, uint32_t rank, int64_t index) {
  switch (kind) {
    case CounterKind::kGridBarrier: return fmt::format("plan grid barrier {}", index);
    case CounterKind::kDispatchReady: return fmt::format("dispatch-ready counter of m-block {} of rank {}", index, rank);
    case CounterKind::kGemm1Done: return fmt::format("GEMM1-done counter of m-block {} of rank {}", index, rank);
    case CounterKind::kShared1Done: return fmt::format("shared GEMM1-done counter of token m-block {} of rank {}", index, rank);
    case CounterKind::kShared2Done: return fmt::format("shared GEMM2-done counter of token m-block {} of rank {}", index, rank);
    case CounterKind::kSlotsReady: return fmt::format("slots-ready counter of token chunk {} of rank {}", index, rank);
    case CounterKind::kDyReady: return fmt::format("backward dy-ready counter of m-block {} of rank {}", index, rank);
    case CounterKind::kDgrad1Done: return fmt::format("backward dh-done counter of m-block {} of rank {}", index, rank);
    case CounterKind::kSharedDgrad1Done:
      return fmt::format("backward shared dh-done counter of token m-block {} of rank {}", index, rank);
    case CounterKind::kSharedDgrad2Done:
      return fmt::format("backward shared dx-done counter of token m-block {} of rank {}", index, rank);
    case CounterKind::kDxReady: return fmt::format("backward dx-ready counter of token chunk {} of rank {}", index, rank);
  }
  return fmt::format("counter kind {} index {} of rank {}", static_cast<uint32_t>(kind), index, rank);
}

Status fault_status(const DeviceErrorRecord& r, const Shape& shape, int32_t plan_chunk_tokens) {
  const auto code = static_cast<FaultCode>(r.state & 0xffffffffull);
  const auto epoch = static_cast<uint32_t>(r.state >> 32);
  const int64_t token = r.counter_index;
  const int64_t t = shape.T > 0 ? token % shape.T : token, src = shape.T > 0 ? token / shape.T : 0;
  switch (code) {
    case FaultCode::kNone: return Status::Ok();
    case FaultCode::kTimeout:
      return {ErrorCode::kDeviceTimeout,
              fmt::format("megakernel launch (epoch {}): {} waited past the spin timeout on the {}: expected {}, saw {} "
                          "(CTA {}, thread {})",
                          epoch, describe_task(r.task, plan_chunk_tokens),
                          describe_counter(static_cast<CounterKind>(r.counter_kind), r.rank, r.counter_index),
                          r.expected, r.seen < 0 ? std::string("a stale epoch") : std::to_string(r.seen), r.block,
                          r.thread)};
    case FaultCode::kInvalidExpert:
      return invalid_argument(fmt::format("topk_idx[{},{}] = {} of rank {} is out of range [0, {}) (found on the device)",
                                          t, r.expected, r.seen, src, shape.E));
    case FaultCode::kRepeatedExpert:
      return invalid_argument(fmt::format(
          "topk_idx[{},{}] = {} of rank {} repeats an earlier slot of the same token (found on the device)", t,
          r.expected, r.seen, src));
    case FaultCode::kNonFiniteWeight: {
      float w;
      const auto bits = static_cast<uint32_t>(r.seen);
      std::memcpy(&w, &bits, sizeof w);
      return invalid_argument(
          fmt::format("topk_w[{},{}] = {} of rank {} is not finite (found on the device)", t, r.expected, w, src));
    }
    case FaultCode::kCapacityExceeded:
      return {ErrorCode::kCapacityExceeded,
              fmt::format("rank {} would receive {} rows but its receive buffer holds recv_capacity_rows = {} (found on "
                          "the device, before any row was written)",
                          r.rank, r.seen, r.expected)};
  }
  return {ErrorCode::kInternal, fmt::format("megakernel fault record with unknown code {}", static_cast<uint32_t>(code))};
}

}  // namespace detmoe::mk
