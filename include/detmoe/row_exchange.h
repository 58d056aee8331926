// Host-driven exchange of rows between the ranks of an expert-parallel group: the transport of
// the unfused reference path (the megakernel's symmetric-memory transport is separate).
//
// Two backends behind one interface:
// - loopback: P virtual ranks on one GPU and one stream; a segment is a device-to-device copy.
// - NCCL: one communicator per GPU, ncclSend/ncclRecv grouped, either one process driving
//   every GPU (ncclCommInitAll) or one process per GPU joined by an id from nccl_unique_id().
//   NVLink multicast is never used (NCCL_NVLS_ENABLE=0 is set before the first communicator).
//
// Rows land at offsets the caller computed from the routing plan, so the bits of a result never
// depend on arrival order.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "detmoe/status.h"

namespace detmoe {

// `rows` rows of `row_bytes` each, from src_rank's buffer (starting at row src_row) to
// dst_rank's buffer (starting at row dst_row).
struct RowSegment {
  int32_t src_rank = 0;
  int32_t dst_rank = 0;
  int64_t src_row = 0;
  int64_t dst_row = 0;
  int64_t rows = 0;
};

class RowExchange {
 public:
  virtual ~RowExchange() = default;
  virtual const char* backend() const = 0;  // "loopback" or "nccl"
  virtual int world_size() const = 0;       // P
  // Ranks this process drives (loopback: all P; NCCL single process: all P; one process per
  // GPU: 1), as local slots 0..local_count()−1.
  virtual int local_count() const = 0;
  virtual int local_rank(int slot) const = 0;  // global rank of a local slot
  virtual int device(int slot) const = 0;
  virtual cudaStream_t stream(int slot) const = 0;  // the one stream the slot's work runs on
  // True when all ranks share one device and stream (loopback), so a P = 1 exchange is the
  // identity and callers may alias send and receive buffers.
  virtual bool single_stream() const = 0;

  // Enqueues the copies of every segment that touches a local rank, in list order; every rank
  // must pass the same list. src[slot] / dst[slot] are the local slots' buffer bases. Segments
  // whose source and destination are the same memory are skipped. Asynchronous on the streams.
  virtual Status exchange(std::span<const RowSegment> segments, std::span<const void* const> src,
                          std::span<void* const> dst, int64_t row_bytes) = 0;
  // Blocks until every local stream is idle.
  virtual Status synchronize() = 0;
};

// Checks a segment list against the world size and the buffers' row counts (per rank).
Status validate_segments(std::span<const RowSegment> segments, int world_size, std::span<const int64_t> src_rows,
                         std::span<const int64_t> dst_rows);

// P virtual ranks on `device`; a stream is created for them (stream = nullptr) or borrowed.
StatusOr<std::unique_ptr<RowExchange>> make_loopback_exchange(int ranks, int device = 0, cudaStream_t stream = nullptr);
// The same, saying whether to create a stream or borrow `stream` — including the null (legacy
// default) stream, which is the current stream of a PyTorch program that never picked one.
enum class LoopbackStream { kCreate, kBorrow };
StatusOr<std::unique_ptr<RowExchange>> make_loopback_exchange(int ranks, int device, cudaStream_t stream,
                                                              LoopbackStream how);

// One process drives every GPU in `devices` (rank i on devices[i]) with one communicator each.
StatusOr<std::unique_ptr<RowExchange>> make_nccl_exchange(const std::vector<int>& devices);

// One process per GPU: rank 0 calls nccl_unique_id() and hands the bytes to every process
// out of band; each then calls make_nccl_exchange_rank with its own rank and device.
using NcclUniqueIdBytes = std::array<char, 128>;
StatusOr<NcclUniqueIdBytes> nccl_unique_id();
StatusOr<std::unique_ptr<RowExchange>> make_nccl_exchange_rank(const NcclUniqueIdBytes& id, int world_size, int rank,
                                                               int device);

// NCCL's library version as "2.28.9", or why it is unavailable.
std::string nccl_version_string();

}  // namespace detmoe
