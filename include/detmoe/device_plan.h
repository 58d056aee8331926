// The routing plan built on the GPU by counting sorts (reference/device/plan_kernels.cu): the
// same tables as build_routing_plan on the host, bit for bit, for any EP size. No float
// atomics; integer atomics only for per-chunk histograms, whose result is order-independent.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "detmoe/plan.h"
#include "detmoe/status.h"

namespace detmoe {

// d_topk_idx / d_topk_w: the global routing [P·T, k] in device memory (d_topk_w may be null).
// Validates on the device; bad input gets the same Status as build_routing_plan /
// validate_routing. Synchronises `stream` and downloads every table into a RoutingPlan.
StatusOr<RoutingPlan> build_routing_plan_on_device(const Shape& shape, const int32_t* d_topk_idx, const float* d_topk_w,
                                                   int64_t capacity_rows, cudaStream_t stream);

}  // namespace detmoe
