// Status / error type of every public DetMoE entry point.
//
// Bad input is reported, never trapped: a Status carries a code and a message that names the
// offending value ("topk_idx[3,1] = 17 is out of range [0, 16)"). Functions return Status (or
// StatusOr<T>); `detmoe::Error` wraps a Status for callers that prefer exceptions.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace detmoe {

enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,    // a shape, id, weight or option is not allowed
  kCapacityExceeded,   // a receive buffer is smaller than the routing needs
  kCudaError,          // the CUDA runtime or a kernel launch failed
  kCublasError,
  kNcclError,
  kDeviceTimeout,      // a device spin-wait ran past its bound (names task and counter)
  kDeviceFault,        // a kernel found bad data (names task, rank and index)
  kNotImplemented,
  kIoError,
  kOutOfMemory,        // the machine has too little (host) memory for a valid problem: says how much is needed
  kInternal,
};

const char* to_string(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return {}; }

  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "InvalidArgument: <message>", or "Ok".
  std::string to_string() const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string message) {
  return {ErrorCode::kInvalidArgument, std::move(message)};
}

class Error : public std::runtime_error {
 public:
  explicit Error(Status status) : std::runtime_error(status.to_string()), status_(std::move(status)) {}
  const Status& status() const { return status_; }

 private:
  Status status_;
};

// Throws detmoe::Error when `status` is not ok.
inline void throw_if_error(const Status& status) {
  if (!status.ok()) throw Error(status);
}

// A value or the Status that explains why there is none.
template <class T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  StatusOr(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    if (std::get<Status>(v_).ok()) v_ = Status(ErrorCode::kInternal, "StatusOr built from an ok Status");
  }
  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & {
    if (!ok()) throw Error(std::get<Status>(v_));
    return std::get<T>(v_);
  }
  const T& value() const& {
    if (!ok()) throw Error(std::get<Status>(v_));
    return std::get<T>(v_);
  }
  // By value: `for (auto& x : f().value())` must not dangle into the destroyed temporary.
  T value() && {
    if (!ok()) throw Error(std::get<Status>(v_));
    return std::get<T>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace detmoe

// Early return of a non-ok Status from an expression.
#define DETMOE_RETURN_IF_ERROR(expr)               \
  do {                                             \
    ::detmoe::Status detmoe_status_ = (expr);      \
    if (!detmoe_status_.ok()) return detmoe_status_; \
  } while (0)
