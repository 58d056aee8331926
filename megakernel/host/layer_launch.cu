// The one translation unit that instantiates the fused forward kernel (one instantiation).
#include "megakernel/host/cooperative_launch.cuh"
#include "megakernel/host/layer_kernel.h"
#include "megakernel/layer/forward_kernel.cuh"

namespace detmoe::mk {

// Kernel parameters above 4 KB need CUDA ≥ 12.1 on sm_70+; the limit is 32764 bytes.
static_assert(sizeof(LayerParams) <= 32764, "LayerParams exceeds the kernel parameter limit");

Status configure_forward_kernel(int* blocks_per_sm) { return configure_layer_kernel(layer_forward_kernel, blocks_per_sm); }

Status launch_forward_kernel(const LayerParams& params, int grid, cudaStream_t stream) {
  return launch_layer_kernel(layer_forward_kernel, params, grid, stream);
}

}  // namespace detmoe::mk
