// The fused forward and backward kernels as seen from host C++ (layer.cpp, layer_backward.cpp):
// only layer_launch.cu and layer_backward_launch.cu compile them, so the rest of the host code
// never goes through nvcc.
#pragma once

#include <cuda_runtime_api.h>

#include "detmoe/status.h"
#include "megakernel/layer/backward_params.h"
#include "megakernel/layer/layer_params.h"

namespace detmoe::mk {

// Raises the kernel's dynamic shared-memory limit; *blocks_per_sm = resident CTAs per SM (≥ 1
// for the cooperative launch to be possible).
Status configure_forward_kernel(int* blocks_per_sm);

// One cooperative launch (cudaLaunchKernelEx + cudaLaunchAttributeCooperative) of `grid` CTAs.
// Asynchronous; a grid larger than what can be co-resident is refused by the launch, never hangs.
Status launch_forward_kernel(const LayerParams& params, int grid, cudaStream_t stream);

// The same for the backward kernel (same block size, shared memory and grid as the forward's).
Status configure_backward_kernel(int* blocks_per_sm);
Status launch_backward_kernel(const BackwardParams& params, int grid, cudaStream_t stream);

}  // namespace detmoe::mk
