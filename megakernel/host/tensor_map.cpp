#include "megakernel/host/tensor_map.h"

#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <mutex>
#include <string>

namespace detmoe::gemm::host {
namespace {

struct Encoder {
  PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
  Status status;
};

const Encoder& encoder() {
  static Encoder enc;
  static std::once_flag once;
  std::call_once(once, [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult query = cudaDriverEntryPointSymbolNotFound;
    const cudaError_t err = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &query);
    if (err != cudaSuccess || query != cudaDriverEntryPointSuccess || fn == nullptr) {
      enc.status = Status(ErrorCode::kCudaError, std::string("cuTensorMapEncodeTiled is unavailable: ") +
                                                     cudaGetErrorString(err) + ", query result " +
                                                     std::to_string(static_cast<int>(query)));
      return;
    }
    enc.fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  });
  return enc;
}

}  // namespace

StatusOr<CUtensorMap> encode_ragged_map(const MatrixView& m, int box_cols, int box_rows) {
  const Encoder& enc = encoder();
  if (!enc.status.ok()) return enc.status;
  const int64_t element = m.type == ElementType::kBF16 ? 2 : 4;
  const int64_t pitch_bytes = m.pitch * element;
  // Dimension 1 spans one box of rows, dimension 2 the buffer's rows + 1 (ragged_map.cuh); both
  // step one row, and the base sits box_rows rows before the buffer.
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(m.cols), static_cast<cuuint64_t>(box_rows),
                              static_cast<cuuint64_t>(m.rows + 1)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(pitch_bytes), static_cast<cuuint64_t>(pitch_bytes)};
  const cuuint32_t box[3] = {static_cast<cuuint32_t>(box_cols), static_cast<cuuint32_t>(box_rows), 1};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  void* shifted = const_cast<char*>(static_cast<const char*>(m.base) - static_cast<int64_t>(box_rows) * pitch_bytes);
  CUtensorMap map{};
  const CUresult r = enc.fn(&map, m.type == ElementType::kBF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
                            3, shifted, dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    return Status(ErrorCode::kCudaError, "cuTensorMapEncodeTiled failed with CUresult " + std::to_string(static_cast<int>(r)) +
                                             " for a [" + std::to_string(m.rows) + ", " + std::to_string(m.cols) +
                                             "] matrix of pitch " + std::to_string(m.pitch) + " (box " +
                                             std::to_string(box_cols) + "x" + std::to_string(box_rows) + ")");
  }
  return map;
}

StatusOr<CUtensorMap> encode_row_map(const MatrixView& m, int box_cols) {
  const Encoder& enc = encoder();
  if (!enc.status.ok()) return enc.status;
  const int64_t element = m.type == ElementType::kBF16 ? 2 : 4;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(m.cols), static_cast<cuuint64_t>(m.rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(m.pitch * element)};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_cols), 1};
  const cuuint32_t element_strides[2] = {1, 1};
  CUtensorMap map{};
  const CUresult r = enc.fn(&map, m.type == ElementType::kBF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
                            2, const_cast<void*>(m.base), dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return Status(ErrorCode::kCudaError, "cuTensorMapEncodeTiled failed with CUresult " + std::to_string(static_cast<int>(r)) +
                                             " for a row map of [" + std::to_string(m.rows) + ", " + std::to_string(m.cols) + "]");
  return map;
}

}  // namespace detmoe::gemm::host
