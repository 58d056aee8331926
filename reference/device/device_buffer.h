// Owning device and pinned-host allocations whose failures are Statuses naming what they were for.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "detmoe/cuda_status.h"

namespace detmoe::ref {

template <bool kPinnedHost>
class OwnedMemory {
 public:
  OwnedMemory() = default;
  OwnedMemory(OwnedMemory&& o) noexcept : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  OwnedMemory& operator=(OwnedMemory&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  OwnedMemory(const OwnedMemory&) = delete;
  OwnedMemory& operator=(const OwnedMemory&) = delete;
  ~OwnedMemory() { release(); }

  // Zero bytes gives an empty (null) buffer.
  Status allocate(size_t bytes, const std::string& what) {
    release();
    if (bytes == 0) return Status::Ok();
    const cudaError_t err = kPinnedHost ? cudaMallocHost(&p_, bytes) : cudaMalloc(&p_, bytes);
    if (err != cudaSuccess) {
      p_ = nullptr;
      return {ErrorCode::kCudaError, std::string(kPinnedHost ? "cudaMallocHost" : "cudaMalloc") + " of " +
                                         std::to_string(bytes) + " bytes for " + what + " failed: " + cudaGetErrorString(err)};
    }
    bytes_ = bytes;
    return Status::Ok();
  }
  void release() {
    if (p_ != nullptr) kPinnedHost ? cudaFreeHost(p_) : cudaFree(p_);
    p_ = nullptr;
    bytes_ = 0;
  }
  void* get() const { return p_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(p_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

using DeviceBuffer = OwnedMemory<false>;
using PinnedBuffer = OwnedMemory<true>;

}  // namespace detmoe::ref

namespace detmoe::ref {

// Carves typed arrays out of one allocation, each 256-byte aligned. Run the same carving twice:
// first with no base to measure, then over the allocation.
class Carver {
 public:
  explicit Carver(char* base = nullptr) : base_(base) {}
  template <class T>
  T* take(int64_t count) {
    const int64_t at = used_;
    used_ += (count * static_cast<int64_t>(sizeof(T)) + 255) / 256 * 256;
    return base_ == nullptr ? nullptr : reinterpret_cast<T*>(base_ + at);
  }
  int64_t used() const { return used_; }

 private:
  char* base_;
  int64_t used_ = 0;
};

}  // namespace detmoe::ref
