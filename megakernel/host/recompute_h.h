// LayerConfig::save_h = false: the backward's h = [g | u] recomputed from the saved x rows before
// the backward launch, by the GEMM core (detmoe/gemm.h), into the buffer the dSwiGLU epilogue then
// overwrites with dh — so keeping h costs no memory between forward and backward, and nothing
// extra during the backward. Same bits as the forward's h: both are bf16 of one fp32 sum over H
// in the same k order (MegakernelBackwardSaveH tests it on every output).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>

#include "detmoe/device_tensors.h"
#include "detmoe/shapes.h"
#include "detmoe/status.h"
#include "megakernel/layer/layer_params.h"

namespace detmoe::mk {

// For every rank r: h rows of its experts [r·cap, r·cap + rows_r) of ws.dh = recv · W_gate_upᵀ
// (one group per local expert, offsets in ws.rank_group_offsets: rank_group_offsets() of
// weight_grads.h earlier on `stream`), and with a shared expert ws.dhs rows [r·T, (r+1)·T) = x · Ws_gate_upᵀ.
// Asynchronous on `stream`.
Status recompute_h(const Shape& shape, int64_t capacity, const Workspace& ws, std::span<const DeviceLayerInputs> inputs,
                   cudaStream_t stream);

}  // namespace detmoe::mk
