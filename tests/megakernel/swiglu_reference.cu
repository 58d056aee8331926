#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "detmoe/contract_math.h"
#include "swiglu_reference.h"

namespace detmoe::gemm::testing {
namespace {

__global__ void swiglu_reference_kernel(const float* in, int64_t rows, int64_t n, uint16_t* out) {
  const int64_t half = n / 2;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < rows * half; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / half, j = i % half;
    const int64_t gate = (j / 8) * 16 + (j % 8);  // gate block 2b, up block 2b + 1
    const float g = __bfloat162float(__float2bfloat16_rn(in[r * n + gate]));
    const float u = __bfloat162float(__float2bfloat16_rn(in[r * n + gate + 8]));
    const __nv_bfloat16 a = __float2bfloat16_rn(contract_swiglu(g, u));
    out[i] = *reinterpret_cast<const uint16_t*>(&a);
  }
}

}  // namespace

bool swiglu_reference(const float* gemm_out, int64_t rows, int64_t n, uint16_t* out) {
  if (rows * n == 0) return true;
  swiglu_reference_kernel<<<264, 256>>>(gemm_out, rows, n, out);
  return cudaDeviceSynchronize() == cudaSuccess;
}

}  // namespace detmoe::gemm::testing
