#include "fill_kernels.h"

#include <algorithm>

#include "detmoe/cuda_status.h"

namespace detmoe::ref {
namespace {

__global__ void fill_bf16_kernel(uint16_t* dst, FillSpec s, uint64_t seed) {
  const int64_t total = s.batches * s.rows * s.cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = i % s.cols, r = (i / s.cols) % s.rows, b = i / (s.cols * s.rows);
    const bool low = r < s.split_rows;
    const int64_t per_batch = low ? s.split_rows : s.rows - s.split_rows;
    const int64_t row = (s.first_batch + b) * per_batch + (low ? r : r - s.split_rows);
    dst[i] = generated_bf16_bits(seed, low ? s.low : s.high, static_cast<uint64_t>(row * s.cols + c),
                                 low ? s.low_scale_log2 : s.high_scale_log2);
  }
}

}  // namespace

Status launch_fill_bf16(uint16_t* dst, const FillSpec& spec, uint64_t seed, cudaStream_t stream) {
  const int64_t total = spec.batches * spec.rows * spec.cols;
  if (total == 0) return Status::Ok();
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((total + 255) / 256, 132 * 32));
  fill_bf16_kernel<<<blocks, 256, 0, stream>>>(dst, spec, seed);
  DETMOE_LAUNCH_RETURN("fill_bf16_kernel");
  return Status::Ok();
}

}  // namespace detmoe::ref
