// A named host tensor in its storage dtype: what outputs are hashed, compared and written as.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "detmoe/hash.h"

namespace detmoe {

enum class DType { kBF16, kFP32, kFP64, kInt32 };
const char* to_string(DType d);
int64_t dtype_size(DType d);

struct NamedTensor {
  std::string name;
  DType dtype = DType::kFP32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // little-endian, row-major

  int64_t numel() const;
  // Element i as a double (bf16 / fp32 / fp64 / int32).
  double at(int64_t i) const;
  Hash128 hash() const { return hash_bytes(bytes.data(), bytes.size()); }
};

// The tensor named `name` in `list`, or null.
const NamedTensor* find_tensor(const std::vector<NamedTensor>& list, const std::string& name);

// Rounds each value to `dtype` (bf16: round to nearest even directly from fp64, no double
// rounding through fp32) and stores it.
NamedTensor make_tensor(std::string name, DType dtype, std::vector<int64_t> shape,
                        const std::vector<double>& values);

// "[i,j,k]" of a flat row-major index in `shape`: how every report names an element.
std::string multi_index(int64_t flat, const std::vector<int64_t>& shape);

// Correctly rounded fp64 -> bf16 (nearest even), returned as the bf16 value in a double.
double round_to_bf16(double v);
// fp64 -> fp32 (nearest even) as a double.
inline double round_to_fp32(double v) { return static_cast<double>(static_cast<float>(v)); }

}  // namespace detmoe
