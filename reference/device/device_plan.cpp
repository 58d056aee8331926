#include "device_plan.h"

#include <fmt/format.h>

#include <algorithm>

#include "detmoe/config.h"
#include "detmoe/cuda_status.h"
#include "detmoe/device_plan.h"
#include "detmoe/routing.h"

namespace detmoe::ref {
namespace {

template <class T>
Status download_into(std::vector<T>& dst, const T* src, int64_t count, cudaStream_t stream) {
  dst.resize(count);
  if (count > 0)
    DETMOE_CUDA_RETURN(cudaMemcpyAsync(dst.data(), src, count * sizeof(T), cudaMemcpyDeviceToHost, stream));
  return Status::Ok();
}

}  // namespace

Status capacity_error(const Shape& shape, int64_t rank, int64_t rows, int64_t capacity_rows) {
  return Status(ErrorCode::kCapacityExceeded,
                fmt::format("rank {} receives {} rows, but the receive capacity is {} rows (recv_capacity_rows; "
                            "0 = worst case {})",
                            rank, rows, capacity_rows, worst_case_recv_rows(shape)));
}

Status DevicePlan::allocate(const Shape& shape) {
  shape_ = shape;
  const int64_t E = shape.E, P = shape.P, rows = shape.rows_global();
  const int64_t chunks = plan_chunks_per_rank(shape) * P;
  // Two passes of the same carving: the first only measures.
  auto carve = [&](Carver& c) {
    tables_.chunk_base = c.take<int32_t>(chunks * E);
    tables_.expert_count = c.take<int32_t>(E);
    tables_.expert_offset = c.take<int64_t>(E + 1);
    tables_.expert_src_count = c.take<int32_t>(E * P);
    tables_.expert_src_offset = c.take<int64_t>(E * P);
    tables_.rank_row_begin = c.take<int64_t>(P + 1);
    tables_.row_token = c.take<int32_t>(rows);
    tables_.row_slot = c.take<int32_t>(rows);
    tables_.slot_row = c.take<int64_t>(rows);
    tables_.pair_rows = c.take<int64_t>(P * P);
    tables_.send_offset = c.take<int64_t>(P * P);
    tables_.recv_offset = c.take<int64_t>(P * P);
    tables_.max_recv_rows = c.take<int64_t>(1);
    tables_.error_key = c.take<unsigned long long>(1);
  };
  Carver measure;
  carve(measure);
  DETMOE_RETURN_IF_ERROR(memory_.allocate(static_cast<size_t>(measure.used()), "the routing plan tables"));
  Carver real(memory_.as<char>());
  carve(real);

  host_offset_at_ = (E * P + 1) / 2;  // int32 counts first, then int64 offsets
  host_error_at_ = host_offset_at_ + E + 1;
  return host_.allocate(static_cast<size_t>(host_error_at_ + 1) * sizeof(int64_t), "the plan's host counts");
}

Status DevicePlan::enqueue(const int32_t* topk_idx, const float* topk_w, cudaStream_t stream) {
  DETMOE_RETURN_IF_ERROR(launch_plan_kernels(shape_, topk_idx, topk_w, tables_, stream));
  const int64_t E = shape_.E, P = shape_.P;
  DETMOE_CUDA_RETURN(cudaMemcpyAsync(host_.as<int32_t>(), tables_.expert_src_count, E * P * sizeof(int32_t),
                                     cudaMemcpyDeviceToHost, stream));
  DETMOE_CUDA_RETURN(cudaMemcpyAsync(host_.as<int64_t>() + host_offset_at_, tables_.expert_offset,
                                     (E + 1) * sizeof(int64_t), cudaMemcpyDeviceToHost, stream));
  DETMOE_CUDA_RETURN(cudaMemcpyAsync(host_.as<int64_t>() + host_error_at_, tables_.error_key, sizeof(int64_t),
                                     cudaMemcpyDeviceToHost, stream));
  return Status::Ok();
}

Status DevicePlan::check(const int32_t* topk_idx, const float* topk_w, int64_t capacity_rows,
                         cudaStream_t stream) const {
  const uint64_t key = static_cast<uint64_t>(host_.as<int64_t>()[host_error_at_]);
  if (key != ~uint64_t{0}) {
    // The device found the first bad (token, slot); the host validator words the message, so
    // device and host paths report bad input identically.
    const int64_t n = shape_.rows_global();
    std::vector<int32_t> idx(n);
    std::vector<float> w(topk_w != nullptr ? n : 0);
    DETMOE_CUDA_RETURN(cudaMemcpyAsync(idx.data(), topk_idx, n * sizeof(int32_t), cudaMemcpyDeviceToHost, stream));
    if (topk_w != nullptr)
      DETMOE_CUDA_RETURN(cudaMemcpyAsync(w.data(), topk_w, n * sizeof(float), cudaMemcpyDeviceToHost, stream));
    DETMOE_CUDA_RETURN(cudaStreamSynchronize(stream));
    Status host = validate_routing(shape_, idx.data(), topk_w != nullptr ? w.data() : nullptr, shape_.tokens_global());
    if (!host.ok()) return host;
    return Status(ErrorCode::kInternal,
                  fmt::format("the device routing check flagged topk[{},{}] but the host validator accepts the routing",
                              key / 64, key % 64));
  }
  if (capacity_rows < 0)
    return invalid_argument(fmt::format("capacity_rows = {} must be >= 0 (0 = worst case)", capacity_rows));
  const int64_t capacity = capacity_rows == 0 ? worst_case_recv_rows(shape_) : capacity_rows;
  const int64_t* offset = host_expert_offset();
  const int64_t epr = shape_.experts_per_rank();
  for (int64_t r = 0; r < shape_.P; ++r) {
    const int64_t rows = offset[(r + 1) * epr] - offset[r * epr];
    if (rows > capacity) return capacity_error(shape_, r, rows, capacity);
  }
  return Status::Ok();
}

StatusOr<RoutingPlan> DevicePlan::download(int64_t capacity_rows, cudaStream_t stream) const {
  RoutingPlan p;
  p.shape = shape_;
  const int64_t E = shape_.E, P = shape_.P, rows = shape_.rows_global();
  p.rows = rows;
  DETMOE_RETURN_IF_ERROR(download_into(p.expert_count, tables_.expert_count, E, stream));
  DETMOE_RETURN_IF_ERROR(download_into(p.expert_offset, tables_.expert_offset, E + 1, stream));
  DETMOE_RETURN_IF_ERROR(download_into(p.expert_src_count, tables_.expert_src_count, E * P, stream));
  DETMOE_RETURN_IF_ERROR(download_into(p.expert_src_offset, tables_.expert_src_offset, E * P, stream));
  DETMOE_RETURN_IF_ERROR(download_into(p.rank_row_begin, tables_.rank_row_begin, P + 1, stream));
  DETMOE_RETURN_IF_ERROR(download_into(p.row_token, tables_.row_token, rows, stream));
  DETMOE_RETURN_IF_ERROR(download_into(p.row_slot, tables_.row_slot, rows, stream));
  DETMOE_RETURN_IF_ERROR(download_into(p.slot_row, tables_.slot_row, rows, stream));
  DETMOE_RETURN_IF_ERROR(download_into(p.pair_rows, tables_.pair_rows, P * P, stream));
  DETMOE_RETURN_IF_ERROR(download_into(p.send_offset, tables_.send_offset, P * P, stream));
  DETMOE_RETURN_IF_ERROR(download_into(p.recv_offset, tables_.recv_offset, P * P, stream));
  DETMOE_CUDA_RETURN(cudaMemcpyAsync(&p.max_recv_rows, tables_.max_recv_rows, sizeof(int64_t), cudaMemcpyDeviceToHost, stream));
  DETMOE_CUDA_RETURN(cudaStreamSynchronize(stream));
  p.capacity_rows = capacity_rows == 0 ? worst_case_recv_rows(shape_) : capacity_rows;
  return p;
}

}  // namespace detmoe::ref

namespace detmoe {

StatusOr<RoutingPlan> build_routing_plan_on_device(const Shape& shape, const int32_t* d_topk_idx, const float* d_topk_w,
                                                   int64_t capacity_rows, cudaStream_t stream) {
  DETMOE_RETURN_IF_ERROR(validate(shape));
  if (d_topk_idx == nullptr) return invalid_argument("topk_idx is null");
  ref::DevicePlan plan;
  DETMOE_RETURN_IF_ERROR(plan.allocate(shape));
  DETMOE_RETURN_IF_ERROR(plan.enqueue(d_topk_idx, d_topk_w, stream));
  DETMOE_CUDA_RETURN(cudaStreamSynchronize(stream));
  DETMOE_RETURN_IF_ERROR(plan.check(d_topk_idx, d_topk_w, capacity_rows, stream));
  return plan.download(capacity_rows, stream);
}

}  // namespace detmoe
