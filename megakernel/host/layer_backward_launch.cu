// The one translation unit that instantiates the fused backward kernel (one instantiation).
#include <cuda_runtime.h>

#include "detmoe/cuda_status.h"
#include "megakernel/host/layer_kernel.h"
#include "megakernel/layer/backward_kernel.cuh"

namespace detmoe::mk {

static_assert(sizeof(BackwardParams) <= 32764, "BackwardParams exceeds the kernel parameter limit");

Status configure_backward_kernel(int* blocks_per_sm) {
  constexpr int kSmem = Smem::kDynamicBytes;
  DETMOE_CUDA_RETURN(cudaFuncSetAttribute(layer_backward_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  DETMOE_CUDA_RETURN(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks_per_sm, layer_backward_kernel, Cfg::kThreads, kSmem));
  return Status::Ok();
}

Status launch_backward_kernel(const BackwardParams& params, int grid, cudaStream_t stream) {
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
  DETMOE_CUDA_RETURN(cudaLaunchKernelEx(&launch, layer_backward_kernel, params));
  return Status::Ok();
}

}  // namespace detmoe::mk
