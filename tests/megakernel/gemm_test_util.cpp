#include "gemm_test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <sstream>

#include "detmoe/numeric.h"

namespace detmoe::gemm::testing {

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  // Never a zero-byte allocation: kernels get a valid 16-byte-aligned pointer either way.
  if (cudaMalloc(&ptr_, bytes == 0 ? 256 : bytes) != cudaSuccess) ptr_ = nullptr;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = nullptr;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}

int64_t Problem::b_rows() const {
  switch (layout) {
    case Layout::kForward: return int64_t{groups()} * n;
    case Layout::kDataGrad: return int64_t{groups()} * k;
    case Layout::kWeightGrad: return rows;
  }
  return 0;
}

int64_t Problem::b_cols() const { return layout == Layout::kForward ? k : n; }

std::vector<int32_t> offsets_from_sizes(const std::vector<int32_t>& sizes, int32_t first) {
  std::vector<int32_t> off{first};
  for (int32_t s : sizes) off.push_back(off.back() + s);
  return off;
}

float bf16_to_float(uint16_t bits) { return float_from_bf16_bits(bits); }
uint16_t float_to_bf16(float f) { return bf16_bits_from_float(f); }

std::vector<uint16_t> integer_bf16(size_t count, int lo, int hi, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> dist(lo, hi);
  std::vector<uint16_t> v(count);
  for (auto& x : v) x = float_to_bf16(static_cast<float>(dist(rng)));
  return v;
}

std::vector<uint16_t> normal_bf16(size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<uint16_t> v(count);
  for (auto& x : v) x = float_to_bf16(dist(rng));
  return v;
}

std::vector<double> reference_product(const Problem& p, const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  const int64_t n = p.n;
  std::vector<double> c(static_cast<size_t>(p.c_rows() * n), std::numeric_limits<double>::quiet_NaN());
  auto A = [&](int64_t r, int64_t col) { return static_cast<double>(bf16_to_float(a[r * p.pitch_a() + col])); };
  auto B = [&](int64_t r, int64_t col) { return static_cast<double>(bf16_to_float(b[r * p.pitch_b() + col])); };
  for (int32_t g = 0; g < p.groups(); ++g) {
    const int64_t r0 = p.offsets[g], r1 = p.offsets[g + 1];
    if (p.layout == Layout::kWeightGrad) {
      for (int64_t i = 0; i < p.m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (int64_t r = r0; r < r1; ++r) s += A(r, i) * B(r, j);
          c[(g * p.m + i) * n + j] = s;
        }
    } else {
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (int64_t kk = 0; kk < p.k; ++kk)
            s += A(r, kk) * (p.layout == Layout::kForward ? B(g * n + j, kk) : B(g * p.k + kk, j));
          c[r * n + j] = s;
        }
    }
  }
  return c;
}

int64_t out_cols(const Problem& p, Epilogue e) { return e == Epilogue::kSwiGLU ? p.n / 2 : p.n; }
int64_t out_pitch(const Problem& p, Epilogue e) { return p.ldc ? p.ldc : out_cols(p, e); }

void upload_problem(const Problem& p, const std::vector<uint16_t>& a, const std::vector<uint16_t>& b, Epilogue epilogue,
                    DeviceProblem& d, const std::vector<float>& row_scale, bool with_h) {
  d.a = upload(a);
  d.b = upload(b);
  d.offsets = upload(p.offsets);
  const int64_t bytes = epilogue == Epilogue::kStoreFP32 ? 4 : 2;
  d.ldc = out_pitch(p, epilogue);
  d.c = DeviceBuffer(static_cast<size_t>(p.c_rows() * d.ldc * bytes));
  if (with_h) d.h = DeviceBuffer(static_cast<size_t>(p.rows * p.n * 2));
  if (!row_scale.empty()) d.scale = upload(row_scale);
}

Status run_problem(const Problem& p, Epilogue epilogue, DeviceProblem& d, int32_t grid_ctas, bool use_offsets,
                   unsigned int* tile_tickets, int32_t band_budget_kb, bool stream_stores, bool deep_store_ring) {
  // Poison: 0xFF.. is NaN in bf16 and fp32, so an element the kernel did not write stays NaN.
  if (d.c.get()) cudaMemset(d.c.get(), 0xFF, d.c.bytes());
  if (d.h.get()) cudaMemset(d.h.get(), 0xFF, d.h.bytes());
  GroupedGemm g;
  g.layout = p.layout;
  g.epilogue = epilogue;
  g.rows = p.rows;
  g.m = p.m;
  g.n = p.n;
  g.k = p.k;
  g.groups = use_offsets ? p.groups() : 1;
  g.group_offsets = use_offsets ? d.offsets.as<int32_t>() : nullptr;
  g.a = d.a.get();
  g.lda = p.lda;
  g.b = d.b.get();
  g.ldb = p.ldb;
  g.c = d.c.get();
  g.ldc = d.ldc;
  g.row_scale = d.scale.as<float>();
  g.h = d.h.get();
  g.grid_ctas = grid_ctas;
  g.tile_tickets = tile_tickets;
  g.band_budget_kb = band_budget_kb;
  g.stream_stores = stream_stores;
  g.deep_store_ring = deep_store_ring;
  Status s = run(g, nullptr);
  if (!s.ok()) return s;
  const cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) return Status(ErrorCode::kCudaError, cudaGetErrorString(err));
  return Status::Ok();
}

std::string describe(const Problem& p) {
  std::ostringstream os;
  os << to_string(p.layout) << " rows=" << p.rows << " m=" << p.m << " n=" << p.n << " k=" << p.k << " groups=[";
  for (int32_t g = 0; g < p.groups(); ++g) os << (g ? "," : "") << (p.offsets[g + 1] - p.offsets[g]);
  os << "] from " << (p.offsets.empty() ? 0 : p.offsets[0]);
  return os.str();
}

std::string layout_test_name(Layout layout) {
  switch (layout) {
    case Layout::kForward: return "Forward";
    case Layout::kDataGrad: return "DataGrad";
    case Layout::kWeightGrad: return "WeightGrad";
  }
  return "UnknownLayout";
}

}  // namespace detmoe::gemm::testing
