// detmoe::Layer's state, shared by the forward (layer.cpp) and the backward (layer_backward.cpp).
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "detmoe/layer.h"
#include "megakernel/host/layer_sizes.h"
#include "megakernel/layer/layer_params.h"

namespace detmoe {

struct Layer::Impl {
  Shape shape;
  LayerConfig config;
  LayerOptions options;
  mk::LayerSizes sizes;
  int grid = 0;
  void* memory = nullptr;
  void* backward_memory = nullptr;  // the backward's buffers, allocated at the first backward
  mk::Workspace ws{};

  unsigned long long* trace = nullptr;  // [grid, trace_tasks_per_cta, 4] when tracing
  int32_t* trace_count = nullptr;       // [grid]

  // The last forward's kernel parameters: the backward reads what that launch saved (plan, x
  // rows, a, h, y) through the same maps and rank tensors. has_forward is cleared when
  // synchronize() reports a fault (the saved state may then be incomplete).
  mk::LayerParams last_forward{};
  bool has_forward = false;

  ~Impl() {
    if (memory != nullptr) cudaFree(memory);
    if (backward_memory != nullptr) cudaFree(backward_memory);
    if (trace != nullptr) cudaFree(trace);
    if (trace_count != nullptr) cudaFree(trace_count);
  }
};

namespace mk {

// A ragged bf16 TMA map (gemm/ragged_map.cuh) over a dense row-major [rows, cols] matrix, boxes of
// 64 columns × box_rows.
Status encode_bf16_map(CUtensorMap& out, const void* p, int64_t rows, int64_t cols, int box_rows);

}  // namespace mk
}  // namespace detmoe
