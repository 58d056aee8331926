// The one translation unit that instantiates the fused backward kernel (one instantiation).
#include "megakernel/host/cooperative_launch.cuh"
#include "megakernel/host/layer_kernel.h"
#include "megakernel/layer/backward_kernel.cuh"

namespace detmoe::mk {

static_assert(sizeof(BackwardParams) <= 32764, "BackwardParams exceeds the kernel parameter limit");

Status configure_backward_kernel(int* blocks_per_sm) {
  return configure_layer_kernel(layer_backward_kernel, blocks_per_sm);
}

Status launch_backward_kernel(const BackwardParams& params, int grid, cudaStream_t stream) {
  return launch_layer_kernel(layer_backward_kernel, params, grid, stream);
}

}  // namespace detmoe::mk
