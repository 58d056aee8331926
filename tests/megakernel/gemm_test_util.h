// Shared helpers of the GEMM core tests: host problems with integer or random bf16 data, a CPU
// reference, device buffers, and running a problem through detmoe::gemm::run.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "detmoe/gemm.h"

namespace detmoe::gemm::testing {

#define DETMOE_CUDA_CHECK(expr)                                                             \
  do {                                                                                      \
    const cudaError_t detmoe_err_ = (expr);                                                 \
    ASSERT_EQ(detmoe_err_, cudaSuccess) << #expr << ": " << cudaGetErrorString(detmoe_err_); \
  } while (0)

// Owns a device allocation.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  ~DeviceBuffer();
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  template <class T>
  T* as() const { return static_cast<T*>(ptr_); }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

template <class T>
DeviceBuffer upload(const std::vector<T>& host) {
  DeviceBuffer d(host.size() * sizeof(T));
  if (!host.empty()) cudaMemcpy(d.get(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  return d;
}

template <class T>
std::vector<T> download(const DeviceBuffer& d, size_t count) {
  std::vector<T> host(count);
  if (count > 0) cudaMemcpy(host.data(), d.get(), count * sizeof(T), cudaMemcpyDeviceToHost);
  return host;
}

// Host description of one grouped problem (see detmoe/gemm.h for the layouts).
struct Problem {
  Layout layout = Layout::kForward;
  int64_t rows = 0;  // token rows (A, and C unless weight-grad)
  int64_t m = 0;     // weight-grad rows per group block
  int64_t n = 0;
  int64_t k = 0;
  std::vector<int32_t> offsets;  // [groups + 1]; the groups may cover only part of `rows`
  int64_t lda = 0, ldb = 0, ldc = 0;  // 0 = dense

  int32_t groups() const { return static_cast<int32_t>(offsets.size()) - 1; }
  int64_t a_rows() const { return rows; }
  int64_t a_cols() const { return layout == Layout::kWeightGrad ? m : k; }
  int64_t b_rows() const;
  int64_t b_cols() const;
  int64_t c_rows() const { return layout == Layout::kWeightGrad ? int64_t{groups()} * m : rows; }
  int64_t pitch_a() const { return lda ? lda : a_cols(); }
  int64_t pitch_b() const { return ldb ? ldb : b_cols(); }
};

// Group sizes → offsets starting at `first` (rows before it belong to no group).
std::vector<int32_t> offsets_from_sizes(const std::vector<int32_t>& sizes, int32_t first = 0);

// bf16 bit patterns of integers drawn uniformly from [lo, hi]: every product and partial sum
// of a small problem is then exact in fp32, so any summation order gives the same bits.
std::vector<uint16_t> integer_bf16(size_t count, int lo, int hi, uint64_t seed);
// bf16 bit patterns of N(0, 1) samples.
std::vector<uint16_t> normal_bf16(size_t count, uint64_t seed);

float bf16_to_float(uint16_t bits);
uint16_t float_to_bf16(float f);

// Exact (fp64) reference C [c_rows, n] (dense pitch n) of A·B per the problem's layout. Rows of
// C outside every group are NaN (they must stay untouched).
std::vector<double> reference_product(const Problem& p, const std::vector<uint16_t>& a, const std::vector<uint16_t>& b);

// Device copies of a problem's inputs and a NaN-poisoned output with `ldc` (or a padded pitch).
struct DeviceProblem {
  DeviceBuffer a, b, c, offsets, h, scale;
  int64_t ldc = 0;
};

// Runs `p` with `epilogue` on freshly NaN-poisoned outputs. `out_cols` columns of C
// (n, or n/2 for swiglu) with pitch p.ldc (0 = out_cols). Returns the run's Status.
// `tile_tickets`: the ticket deal's device counter (GroupedGemm::tile_tickets), nullptr = static.
Status run_problem(const Problem& p, Epilogue epilogue, DeviceProblem& d, int32_t grid_ctas = 0,
                   bool use_offsets = true, unsigned int* tile_tickets = nullptr, int32_t band_budget_kb = 0,
                   bool stream_stores = false, bool deep_store_ring = false);

// Uploads inputs into d (a, b, offsets) and allocates C (and h / scale when asked).
void upload_problem(const Problem& p, const std::vector<uint16_t>& a, const std::vector<uint16_t>& b, Epilogue epilogue,
                    DeviceProblem& d, const std::vector<float>& row_scale = {}, bool with_h = false);

// C's element bytes, columns and pitch for an epilogue.
int64_t out_cols(const Problem& p, Epilogue e);
int64_t out_pitch(const Problem& p, Epilogue e);

std::string describe(const Problem& p);

// Test-name suffix of a Layout parameter ("Forward", "DataGrad", "WeightGrad": gtest names allow
// no '-', so to_string(Layout) cannot serve).
std::string layout_test_name(Layout layout);
template <class ParamInfo>
std::string layout_param_name(const ParamInfo& info) {
  return layout_test_name(info.param);
}

}  // namespace detmoe::gemm::testing
