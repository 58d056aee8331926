// Device arrays of pointers for cublasGemmGroupedBatchedEx, written by a kernel that receives
// them as a by-value argument: no host staging buffer to race with, and graph capture records
// the values.
#pragma once

#include <cuda_runtime_api.h>

#include "detmoe/status.h"

namespace detmoe::ref {

// 3 pointers (A, B, C) per problem; 3·kMaxTablePointers·8 bytes fits the 32 KB argument limit.
inline constexpr int kMaxTablePointers = 1024;

struct PointerTableArgs {
  int count = 0;
  const void* pointers[3 * kMaxTablePointers];
};

Status launch_write_pointer_table(const PointerTableArgs& args, const void** table, cudaStream_t stream);

}  // namespace detmoe::ref
