#include "support/gpu.h"

#include <cuda_runtime.h>

namespace detmoe::testing {

std::string gpu_unavailable_reason() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) return std::string("no CUDA device (") + cudaGetErrorString(err) + ")";
  if (count == 0) return "no CUDA device (device count is 0)";
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return "cudaGetDeviceProperties failed";
  if (prop.major != 9) return "device 0 is sm_" + std::to_string(prop.major * 10 + prop.minor) + ", the kernels need sm_90a (Hopper)";
  return {};
}

}  // namespace detmoe::testing
