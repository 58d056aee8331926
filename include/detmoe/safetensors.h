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

// int64 tensors (PyTorch's default index dtype) are read as int32 when every value fits;
// otherwise the error names the tensor and the value.
StatusOr<std::vector<NamedTensor>> read_safetensors(const std::string& path);
Status write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                         const std::map<std::string, std::string>& metadata = {});

// The layer problem from tensors named x, topk_idx, topk_w, w_gate, w_up, w_down, optional
// ws_gate/ws_up/ws_down (shared expert) and dout (backward). Shapes give T, H, F, E, k, Fs;
// P = 1. Errors name the missing tensor, or the tensor with the wrong dtype or shape.
StatusOr<HostProblem> problem_from_tensors(const std::vector<NamedTensor>& tensors, GradPrecision grad_precision);

}  // namespace detmoe
