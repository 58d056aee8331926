// Reading and writing the safetensors format (8-byte little-endian header length, a JSON
// header {name: {dtype, shape, data_offsets}}, then the raw bytes) — what PyTorch users
// already write — so captured training inputs can be replayed and outputs compared outside.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "detmoe/host_problem.h"
#include "detmoe/status.h"
#include "detmoe/tensor.h"

namespace detmoe {

// The header of a file, checked: the format's 100 MB header cap, whole non-negative numbers for
// shapes and offsets (no 1.5), offsets inside the data, no two tensors sharing bytes, and for a
// known dtype a byte count that matches the shape. No tensor data is read; tensors in dtypes
// DetMoE does not read are listed (PyTorch captures carry extras) and fail only when read.
struct SafetensorsEntry {
  std::string name, dtype;  // dtype as the file writes it ("BF16", "F32", …)
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte range within the data
};
struct SafetensorsIndex {
  std::string path;
  uint64_t data_begin = 0, data_size = 0;
  std::vector<SafetensorsEntry> entries;
};
StatusOr<SafetensorsIndex> read_safetensors_index(const std::string& path);
// One tensor's bytes. int64 tensors (PyTorch's default index dtype) are read as int32 when every
// value fits; otherwise the error names the tensor and the value.
StatusOr<NamedTensor> read_safetensors_tensor(const SafetensorsIndex& index, const SafetensorsEntry& entry);
// Every tensor of the file.
StatusOr<std::vector<NamedTensor>> read_safetensors(const std::string& path);

// The names problem_from_tensors reads.
inline constexpr const char* kProblemInputNames[] = {"x",     "topk_idx", "topk_w",  "w_gate", "w_up",
                                                     "w_down", "ws_gate", "ws_up", "ws_down", "dout"};
bool is_problem_input_name(const std::string& name);
// A replay file's problem: reads only the input tensors (an unused tensor of any size or dtype
// costs nothing and names itself in `unused`), after checking that the host has the memory.
StatusOr<HostProblem> read_problem_safetensors(const std::string& path, GradPrecision grad_precision,
                                               std::vector<std::string>* unused = nullptr);
Status write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                         const std::map<std::string, std::string>& metadata = {});

// The layer problem from tensors named x, topk_idx, topk_w, w_gate, w_up, w_down, optional
// ws_gate/ws_up/ws_down (shared expert) and dout (backward). Shapes give T, H, F, E, k, Fs;
// P = 1. Errors name the missing tensor, or the tensor with the wrong dtype or shape.
StatusOr<HostProblem> problem_from_tensors(const std::vector<NamedTensor>& tensors, GradPrecision grad_precision);

}  // namespace detmoe
