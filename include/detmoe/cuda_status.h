// CUDA runtime errors as detmoe::Status, naming the failing call and where it was made.
//
// Every CUDA call on a DetMoE path goes through DETMOE_CUDA_RETURN (or cuda_status), so a
// failure surfaces as kCudaError "cudaMalloc(&p, bytes) failed: out of memory (file.cpp:42)"
// instead of a trap or a silently wrong result. Header-only so comm/ and reference/ share it.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "detmoe/status.h"

namespace detmoe {

inline Status cuda_status(cudaError_t err, const char* call, const char* file, int line) {
  if (err == cudaSuccess) return Status::Ok();
  return {ErrorCode::kCudaError, std::string(call) + " failed: " + cudaGetErrorString(err) + " (" +
                                     cudaGetErrorName(err) + ", " + file + ":" + std::to_string(line) + ")"};
}

// The last launch error (a bad launch configuration, or an earlier asynchronous fault), named
// after the kernel that was just launched.
inline Status launch_status(const char* kernel, const char* file, int line) {
  return cuda_status(cudaGetLastError(), kernel, file, line);
}

}  // namespace detmoe

#define DETMOE_CUDA_RETURN(call) DETMOE_RETURN_IF_ERROR(::detmoe::cuda_status((call), #call, __FILE__, __LINE__))
#define DETMOE_LAUNCH_RETURN(kernel_name) \
  DETMOE_RETURN_IF_ERROR(::detmoe::launch_status("launch of " kernel_name, __FILE__, __LINE__))
