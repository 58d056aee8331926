// The one way the fused layer's kernels are configured and launched: dynamic shared memory raised
// to the stage ring's size, and a cooperative cudaLaunchKernelEx of `grid` CTAs of Cfg::kThreads
// (a grid larger than what can be co-resident is refused by the launch, never hangs). Included by
// the translation units that instantiate a kernel (layer_launch.cu, layer_backward_launch.cu).
#pragma once

#include <cuda_runtime.h>

#include "detmoe/cuda_status.h"
#include "megakernel/layer/tile_mainloop.cuh"

namespace detmoe::mk {

template <class Params>
Status configure_layer_kernel(void (*kernel)(Params), int* blocks_per_sm) {
  constexpr int kSmem = Smem::kDynamicBytes;
  DETMOE_CUDA_RETURN(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  DETMOE_CUDA_RETURN(cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks_per_sm, kernel, Cfg::kThreads, kSmem));
  return Status::Ok();
}

template <class Params>
Status launch_layer_kernel(void (*kernel)(Params), const Params& params, int grid, cudaStream_t stream) {
  cudaLaunchConfig_t launch{};
  launch.gridDim = dim3(static_cast<unsigned>(grid));
  launch.blockDim = dim3(Cfg::kThreads);
  launch.dynamicSmemBytes = Smem::kDynamicBytes;
  launch.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  launch.attrs = attr;
  launch.numAttrs = 1;
  DETMOE_CUDA_RETURN(cudaLaunchKernelEx(&launch, kernel, params));
  return Status::Ok();
}

}  // namespace detmoe::mk
