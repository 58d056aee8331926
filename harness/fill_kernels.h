// Fills device tensors with the seeded data of detmoe/data.h, element by element from global
// indices, so each rank's slice is bitwise the host's generate_layer_data.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "detmoe/data.h"
#include "detmoe/status.h"

namespace detmoe::ref {

// dst is [batches, rows, cols]. Row r < split_rows of batch b is global row
// (first_batch + b)·split_rows + r of stream `low`; a row r ≥ split_rows is row
// (first_batch + b)·(rows − split_rows) + (r − split_rows) of stream `high`. Stacked weights
// [W_gate; W_up] use the split; everything else has split_rows = rows.
struct FillSpec {
  int64_t batches = 1, rows = 0, cols = 0, split_rows = 0, first_batch = 0;
  TensorStream low = TensorStream::kX, high = TensorStream::kX;
  int low_scale_log2 = 0, high_scale_log2 = 0;
};

Status launch_fill_bf16(uint16_t* dst, const FillSpec& spec, uint64_t seed, cudaStream_t stream);

}  // namespace detmoe::ref
