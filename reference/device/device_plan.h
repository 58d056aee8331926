// The routing plan of one step on one rank's device: the tables of plan_kernels.h, plus host
// copies of the two small tables (per-(expert, source) counts and expert offsets) that cuBLAS
// sizes and exchange segments need as host integers.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "detmoe/plan.h"
#include "detmoe/problem.h"
#include "detmoe/status.h"
#include "device_buffer.h"
#include "plan_kernels.h"

namespace detmoe::ref {

class DevicePlan {
 public:
  // Allocates the tables on the current device.
  Status allocate(const Shape& shape);
  // Validation, plan kernels and the copy of counts and error flag to pinned host memory.
  Status enqueue(const int32_t* topk_idx, const float* topk_w, cudaStream_t stream);
  // After `stream` is synchronised: the first routing error (the same Status the host
  // validate_routing / build_routing_plan gives) or the capacity error, else Ok.
  Status check(const int32_t* topk_idx, const float* topk_w, int64_t capacity_rows, cudaStream_t stream) const;

  const PlanTables& tables() const { return tables_; }
  const int32_t* host_expert_src_count() const { return host_.as<int32_t>(); }  // [E, P]
  const int64_t* host_expert_offset() const { return host_.as<int64_t>() + host_offset_at_; }  // [E+1]

  // Every table, downloaded (synchronises `stream`).
  StatusOr<RoutingPlan> download(int64_t capacity_rows, cudaStream_t stream) const;

 private:
  Shape shape_;
  DeviceBuffer memory_;
  PinnedBuffer host_;            // [E·P] int32 counts, padding, [E+1] int64 offsets, error key
  int64_t host_offset_at_ = 0;   // index (in int64 units) of expert_offset inside host_
  int64_t host_error_at_ = 0;
  PlanTables tables_;
};

// Same text as build_routing_plan's capacity error.
Status capacity_error(const Shape& shape, int64_t rank, int64_t rows, int64_t capacity_rows);

}  // namespace detmoe::ref
