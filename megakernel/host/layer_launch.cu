// The one translation unit that instantiates the fused forward kernel (one instantiation).
#include <cuda_runtime.h>

#include "detmoe/cuda_status.h"
#include "megakernel/host/layer_kernel.h"
#include "megakernel/layer/forward_kernel.cuh"

namespace detmoe::mk {

// Kernel parameters above 4 KB need CUDA ≥ 12.1 on sm_70+; the limit is 32764 bytes.
static_assert(sizeof(LayerParams) <= 32764, "LayerParams exceeds the kernel parameter limit");

Status configure_forward_kernel(int* blocks_per_sm) {
  constexpr int kSmem = Smem::kDynamicBytes;
  DETMOE_CUDA_RETURN(cudaFuncSetAttribute(layer_forward_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  DETMOE_CUDA_RETURN(cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks_per_sm, layer_forward_kernel, Cfg::kThreads, kSmem));
  return Status::Ok();
}

Status launch_forward_kernel(const LayerParams& params, int grid, cudaStream_t stream) {
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
  DETMOE_CUDA_RETURN(cudaLaunchKernelEx(&launch, layer_forward_kernel, params));
  return Status::Ok();
}

}  // namespace detmoe::mk
