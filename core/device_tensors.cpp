#include "detmoe/device_tensors.h"

#include <fmt/format.h>

namespace detmoe {
namespace {

Status check_pointer(const void* p, const char* field, int rank, bool required) {
  if (p == nullptr) {
    if (!required) return Status::Ok();
    return invalid_argument(fmt::format("rank {}: {} is null", rank, field));
  }
  const auto at = reinterpret_cast<uintptr_t>(p);
  if (at % kDevicePointerAlignment != 0)
    return invalid_argument(fmt::format("rank {}: {} = {} is not {}-byte aligned (every device tensor must be, for "
                                        "16-byte vector access)", rank, field, p, kDevicePointerAlignment));
  return Status::Ok();
}

}  // namespace

Status validate_device_inputs(const Shape& shape, const DeviceLayerInputs& in, int rank) {
  DETMOE_RETURN_IF_ERROR(check_pointer(in.x, "x", rank, true));
  DETMOE_RETURN_IF_ERROR(check_pointer(in.topk_idx, "topk_idx", rank, true));
  DETMOE_RETURN_IF_ERROR(check_pointer(in.topk_w, "topk_w", rank, true));
  DETMOE_RETURN_IF_ERROR(check_pointer(in.w_gate_up, "w_gate_up", rank, true));
  DETMOE_RETURN_IF_ERROR(check_pointer(in.w_down, "w_down", rank, true));
  const bool shared = shape.Fs > 0;
  DETMOE_RETURN_IF_ERROR(check_pointer(in.ws_gate_up, "ws_gate_up (Fs > 0)", rank, shared));
  DETMOE_RETURN_IF_ERROR(check_pointer(in.ws_down, "ws_down (Fs > 0)", rank, shared));
  return Status::Ok();
}

Status validate_device_outputs(const Shape&, const DeviceLayerOutputs& out, int rank) {
  DETMOE_RETURN_IF_ERROR(check_pointer(out.out, "out", rank, true));
  return check_pointer(out.y, "y", rank, false);
}

Status validate_device_grad_inputs(const Shape&, const DeviceGradInputs& in, int rank) {
  return check_pointer(in.dout, "dout", rank, true);
}

Status validate_device_grad_outputs(const Shape& shape, const DeviceGradOutputs& out, int rank) {
  DETMOE_RETURN_IF_ERROR(check_pointer(out.d_x, "d_x", rank, true));
  DETMOE_RETURN_IF_ERROR(check_pointer(out.d_topk_w, "d_topk_w", rank, true));
  DETMOE_RETURN_IF_ERROR(check_pointer(out.dw_gate_up, "dw_gate_up", rank, true));
  DETMOE_RETURN_IF_ERROR(check_pointer(out.dw_down, "dw_down", rank, true));
  const bool shared = shape.Fs > 0;
  DETMOE_RETURN_IF_ERROR(check_pointer(out.dws_gate_up, "dws_gate_up (Fs > 0)", rank, shared));
  DETMOE_RETURN_IF_ERROR(check_pointer(out.dws_down, "dws_down (Fs > 0)", rank, shared));
  return Status::Ok();
}

}  // namespace detmoe
