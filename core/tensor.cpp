#include "detmoe/tensor.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "detmoe/numeric.h"

namespace detmoe {

const char* to_string(DType d) {
  switch (d) {
    case DType::kBF16: return "bf16";
    case DType::kFP32: return "fp32";
    case DType::kFP64: return "fp64";
    case DType::kInt32: return "int32";
  }
  return "?";
}

int64_t dtype_size(DType d) {
  switch (d) {
    case DType::kBF16: return 2;
    case DType::kFP32: return 4;
    case DType::kFP64: return 8;
    case DType::kInt32: return 4;
  }
  return 0;
}

int64_t NamedTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

double NamedTensor::at(int64_t i) const {
  const uint8_t* p = bytes.data() + i * dtype_size(dtype);
  switch (dtype) {
    case DType::kBF16: {
      uint16_t b;
      std::memcpy(&b, p, 2);
      return float_from_bf16_bits(b);
    }
    case DType::kFP32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DType::kFP64: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    case DType::kInt32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
  }
  return 0;
}

std::string multi_index(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    const int64_t extent = std::max<int64_t>(shape[d], 1);
    idx[d] = flat % extent;
    flat /= extent;
  }
  std::string out = "[";
  for (size_t d = 0; d < idx.size(); ++d) {
    if (d > 0) out += ',';
    out += std::to_string(idx[d]);
  }
  return out + "]";
}

double round_to_bf16(double v) {
  if (std::isnan(v)) return v;
  // Round the fp64 mantissa (52 bits) to bf16's 7 at once: nearest, ties to even.
  uint64_t u = std::bit_cast<uint64_t>(v);
  const uint64_t drop = 52 - 7;
  const uint64_t half = uint64_t{1} << (drop - 1);
  const uint64_t lsb = (u >> drop) & 1u;
  u += half - 1 + lsb;
  u &= ~((uint64_t{1} << drop) - 1);
  double r = std::bit_cast<double>(u);
  // Out of bf16's exponent range: bf16 shares fp32's exponent, so defer range (overflow to
  // inf, subnormals) to fp32, which is exact here because r has 8 significant bits.
  if (std::fabs(r) >= 3.3961775292304957e38 /* just above bf16 max */ || (r != 0 && std::fabs(r) < 1.1754943508222875e-38)) {
    return float_from_bf16_bits(bf16_bits_from_float(static_cast<float>(v)));
  }
  return r;
}

NamedTensor make_tensor(std::string name, DType dtype, std::vector<int64_t> shape, const std::vector<double>& values) {
  NamedTensor t{std::move(name), dtype, std::move(shape), {}};
  if (t.numel() != static_cast<int64_t>(values.size()))
    throw std::invalid_argument("make_tensor: " + t.name + " has " + std::to_string(values.size()) +
                                " values for " + std::to_string(t.numel()) + " elements");
  const int64_t es = dtype_size(dtype);
  t.bytes.resize(values.size() * es);
  uint8_t* p = t.bytes.data();
  for (double v : values) {
    switch (dtype) {
      case DType::kBF16: {
        const uint16_t b = bf16_bits_from_float(static_cast<float>(round_to_bf16(v)));
        std::memcpy(p, &b, 2);
        break;
      }
      case DType::kFP32: {
        const float f = static_cast<float>(v);
        std::memcpy(p, &f, 4);
        break;
      }
      case DType::kFP64: std::memcpy(p, &v, 8); break;
      case DType::kInt32: {
        const int32_t i = static_cast<int32_t>(v);
        std::memcpy(p, &i, 4);
        break;
      }
    }
    p += es;
  }
  return t;
}

const NamedTensor* find_tensor(const std::vector<NamedTensor>& list, const std::string& name) {
  for (const NamedTensor& t : list)
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace detmoe
