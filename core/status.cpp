#include "detmoe/status.h"

namespace detmoe {

const char* to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return "Ok";
    case ErrorCode::kInvalidArgument: return "InvalidArgument";
    case ErrorCode::kCapacityExceeded: return "CapacityExceeded";
    case ErrorCode::kCudaError: return "CudaError";
    case ErrorCode::kCublasError: return "CublasError";
    case ErrorCode::kNcclError: return "NcclError";
    case ErrorCode::kDeviceTimeout: return "DeviceTimeout";
    case ErrorCode::kDeviceFault: return "DeviceFault";
    case ErrorCode::kNotImplemented: return "NotImplemented";
    case ErrorCode::kIoError: return "IoError";
    case ErrorCode::kOutOfMemory: return "OutOfMemory";
    case ErrorCode::kInternal: return "Internal";
  }
  return "Unknown";
}

std::string Status::to_string() const {
  if (ok()) return "Ok";
  return std::string(detmoe::to_string(code_)) + ": " + message_;
}

}  // namespace detmoe
