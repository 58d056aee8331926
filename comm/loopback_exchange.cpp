// Loopback backend: P virtual ranks share one GPU and one stream, so an exchange is a list of
// device-to-device copies in stream order — the same segments NCCL would move between GPUs.
#include <fmt/format.h>

#include "detmoe/cuda_status.h"
#include "detmoe/row_exchange.h"

namespace detmoe {
namespace {

class LoopbackExchange final : public RowExchange {
 public:
  LoopbackExchange(int ranks, int device, cudaStream_t stream, bool owns)
      : ranks_(ranks), device_(device), stream_(stream), owns_stream_(owns) {}
  ~LoopbackExchange() override {
    if (owns_stream_) {
      cudaSetDevice(device_);
      cudaStreamDestroy(stream_);
    }
  }
  const char* backend() const override { return "loopback"; }
  int world_size() const override { return ranks_; }
  int local_count() const override { return ranks_; }
  int local_rank(int slot) const override { return slot; }
  int device(int) const override { return device_; }
  cudaStream_t stream(int) const override { return stream_; }
  bool single_stream() const override { return true; }

  Status exchange(std::span<const RowSegment> segments, std::span<const void* const> src, std::span<void* const> dst,
                  int64_t row_bytes) override {
    if (src.size() != static_cast<size_t>(ranks_) || dst.size() != static_cast<size_t>(ranks_))
      return invalid_argument(fmt::format("loopback exchange: {} source and {} destination buffers for {} ranks",
                                          src.size(), dst.size(), ranks_));
    DETMOE_CUDA_RETURN(cudaSetDevice(device_));
    for (size_t i = 0; i < segments.size();) {
      // Merge runs that are contiguous on both sides: one copy instead of many.
      RowSegment run = segments[i++];
      while (i < segments.size() && segments[i].src_rank == run.src_rank && segments[i].dst_rank == run.dst_rank &&
             segments[i].src_row == run.src_row + run.rows && segments[i].dst_row == run.dst_row + run.rows)
        run.rows += segments[i++].rows;
      if (run.rows == 0) continue;
      const char* from = static_cast<const char*>(src[run.src_rank]) + run.src_row * row_bytes;
      char* to = static_cast<char*>(dst[run.dst_rank]) + run.dst_row * row_bytes;
      if (from == to) continue;  // P = 1 with aliased buffers: the identity
      DETMOE_CUDA_RETURN(cudaMemcpyAsync(to, from, static_cast<size_t>(run.rows * row_bytes), cudaMemcpyDeviceToDevice, stream_));
    }
    return Status::Ok();
  }

  Status synchronize() override {
    DETMOE_CUDA_RETURN(cudaSetDevice(device_));
    DETMOE_CUDA_RETURN(cudaStreamSynchronize(stream_));
    return Status::Ok();
  }

 private:
  int ranks_;
  int device_;
  cudaStream_t stream_;
  bool owns_stream_;
};

}  // namespace

StatusOr<std::unique_ptr<RowExchange>> make_loopback_exchange(int ranks, int device, cudaStream_t stream) {
  return make_loopback_exchange(ranks, device, stream, stream == nullptr ? LoopbackStream::kCreate : LoopbackStream::kBorrow);
}

StatusOr<std::unique_ptr<RowExchange>> make_loopback_exchange(int ranks, int device, cudaStream_t stream,
                                                              LoopbackStream how) {
  if (ranks < 1 || ranks > 64) return invalid_argument(fmt::format("loopback ranks = {} is out of range [1, 64]", ranks));
  int count = 0;
  DETMOE_CUDA_RETURN(cudaGetDeviceCount(&count));
  if (device < 0 || device >= count)
    return invalid_argument(fmt::format("loopback device = {} is out of range [0, {})", device, count));
  DETMOE_CUDA_RETURN(cudaSetDevice(device));
  const bool owns = how == LoopbackStream::kCreate;
  if (owns) DETMOE_CUDA_RETURN(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return std::unique_ptr<RowExchange>(new LoopbackExchange(ranks, device, stream, owns));
}

}  // namespace detmoe
