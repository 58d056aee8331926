#include "pointer_table.h"

#include "detmoe/cuda_status.h"

namespace detmoe::ref {
namespace {

__global__ void write_pointer_table_kernel(const PointerTableArgs args, const void** table) {
  for (int i = threadIdx.x; i < args.count; i += blockDim.x) table[i] = args.pointers[i];
}

}  // namespace

Status launch_write_pointer_table(const PointerTableArgs& args, const void** table, cudaStream_t stream) {
  write_pointer_table_kernel<<<1, 256, 0, stream>>>(args, table);
  DETMOE_LAUNCH_RETURN("write_pointer_table_kernel");
  return Status::Ok();
}

}  // namespace detmoe::ref
