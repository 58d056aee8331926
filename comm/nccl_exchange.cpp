// NCCL backend: one communicator per GPU. A single process may drive every GPU (communicators
// from ncclCommInitAll) or each process drives one (ncclCommInitRank with an exchanged id); the
// exchange code is the same — every segment that touches a local rank becomes an ncclSend or
// ncclRecv inside one ncclGroupStart/End, posted in list order so that the k-th send from s to d
// matches d's k-th receive from s.
#include <nccl.h>

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>

#include "detmoe/cuda_status.h"
#include "detmoe/row_exchange.h"

namespace detmoe {
namespace {

Status nccl_status(ncclResult_t r, const char* call, ncclComm_t comm = nullptr) {
  if (r == ncclSuccess) return Status::Ok();
  std::string msg = fmt::format("{} failed: {}", call, ncclGetErrorString(r));
  if (comm != nullptr) {
    const char* last = ncclGetLastError(comm);
    if (last != nullptr && *last != '\0') msg += fmt::format(" ({})", last);
  }
  return {ErrorCode::kNcclError, msg};
}

#define DETMOE_NCCL_RETURN(call) DETMOE_RETURN_IF_ERROR(nccl_status((call), #call))

// Multicast (NVLS) can take a shared host's GPUs out of service; it is never wanted here.
void disable_multicast() { setenv("NCCL_NVLS_ENABLE", "0", 1); }

class NcclExchange final : public RowExchange {
 public:
  NcclExchange(int world, std::vector<int> ranks, std::vector<int> devices, std::vector<ncclComm_t> comms,
               std::vector<cudaStream_t> streams)
      : world_(world), ranks_(std::move(ranks)), devices_(std::move(devices)), comms_(std::move(comms)),
        streams_(std::move(streams)) {}

  ~NcclExchange() override {
    // Finalize is collective: one thread driving several communicators must group it.
    ncclGroupStart();
    for (ncclComm_t c : comms_) ncclCommFinalize(c);
    ncclGroupEnd();
    for (size_t i = 0; i < comms_.size(); ++i) {
      ncclCommDestroy(comms_[i]);
      cudaSetDevice(devices_[i]);
      cudaStreamDestroy(streams_[i]);
    }
  }

  const char* backend() const override { return "nccl"; }
  int world_size() const override { return world_; }
  int local_count() const override { return static_cast<int>(comms_.size()); }
  int local_rank(int slot) const override { return ranks_[slot]; }
  int device(int slot) const override { return devices_[slot]; }
  cudaStream_t stream(int slot) const override { return streams_[slot]; }
  bool single_stream() const override { return false; }

  Status exchange(std::span<const RowSegment> segments, std::span<const void* const> src, std::span<void* const> dst,
                  int64_t row_bytes) override {
    if (src.size() != comms_.size() || dst.size() != comms_.size())
      return invalid_argument(fmt::format("nccl exchange: {} source and {} destination buffers for {} local ranks",
                                          src.size(), dst.size(), comms_.size()));
    std::vector<int> slot_of(world_, -1);
    for (size_t i = 0; i < ranks_.size(); ++i) slot_of[ranks_[i]] = static_cast<int>(i);
    DETMOE_NCCL_RETURN(ncclGroupStart());
    Status status;
    for (const RowSegment& s : segments) {
      if (s.rows == 0) continue;
      const size_t bytes = static_cast<size_t>(s.rows * row_bytes);
      const int from = slot_of[s.src_rank], to = slot_of[s.dst_rank];
      if (from >= 0) {
        const char* p = static_cast<const char*>(src[from]) + s.src_row * row_bytes;
        status = nccl_status(ncclSend(p, bytes, ncclUint8, s.dst_rank, comms_[from], streams_[from]), "ncclSend", comms_[from]);
        if (!status.ok()) break;
      }
      if (to >= 0) {
        char* p = static_cast<char*>(dst[to]) + s.dst_row * row_bytes;
        status = nccl_status(ncclRecv(p, bytes, ncclUint8, s.src_rank, comms_[to], streams_[to]), "ncclRecv", comms_[to]);
        if (!status.ok()) break;
      }
    }
    const ncclResult_t end = ncclGroupEnd();
    DETMOE_RETURN_IF_ERROR(status);
    DETMOE_NCCL_RETURN(end);
    return Status::Ok();
  }

  Status synchronize() override {
    for (size_t i = 0; i < comms_.size(); ++i) {
      DETMOE_CUDA_RETURN(cudaSetDevice(devices_[i]));
      DETMOE_CUDA_RETURN(cudaStreamSynchronize(streams_[i]));
    }
    return Status::Ok();
  }

 private:
  int world_;
  std::vector<int> ranks_;
  std::vector<int> devices_;
  std::vector<ncclComm_t> comms_;
  std::vector<cudaStream_t> streams_;
};

StatusOr<std::vector<cudaStream_t>> create_streams(const std::vector<int>& devices) {
  std::vector<cudaStream_t> streams(devices.size(), nullptr);
  for (size_t i = 0; i < devices.size(); ++i) {
    DETMOE_CUDA_RETURN(cudaSetDevice(devices[i]));
    DETMOE_CUDA_RETURN(cudaStreamCreateWithFlags(&streams[i], cudaStreamNonBlocking));
  }
  return streams;
}

Status check_device(int device) {
  int count = 0;
  DETMOE_CUDA_RETURN(cudaGetDeviceCount(&count));
  if (device < 0 || device >= count)
    return invalid_argument(fmt::format("device = {} is out of range [0, {})", device, count));
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<RowExchange>> make_nccl_exchange(const std::vector<int>& devices) {
  if (devices.empty() || devices.size() > 64)
    return invalid_argument(fmt::format("nccl exchange needs 1..64 devices, got {}", devices.size()));
  for (size_t i = 0; i < devices.size(); ++i) {
    DETMOE_RETURN_IF_ERROR(check_device(devices[i]));
    for (size_t j = 0; j < i; ++j)
      if (devices[j] == devices[i])
        return invalid_argument(fmt::format("devices[{}] = devices[{}] = {}: NCCL allows one rank per GPU (use the "
                                            "loopback backend for virtual ranks)", j, i, devices[i]));
  }
  disable_multicast();
  std::vector<ncclComm_t> comms(devices.size(), nullptr);
  DETMOE_NCCL_RETURN(ncclCommInitAll(comms.data(), static_cast<int>(devices.size()), devices.data()));
  auto streams = create_streams(devices);
  if (!streams.ok()) return streams.status();
  std::vector<int> ranks(devices.size());
  for (size_t i = 0; i < ranks.size(); ++i) ranks[i] = static_cast<int>(i);
  return std::unique_ptr<RowExchange>(
      new NcclExchange(static_cast<int>(devices.size()), std::move(ranks), devices, std::move(comms), std::move(*streams)));
}

StatusOr<NcclUniqueIdBytes> nccl_unique_id() {
  disable_multicast();
  ncclUniqueId id;
  DETMOE_NCCL_RETURN(ncclGetUniqueId(&id));
  NcclUniqueIdBytes bytes;
  static_assert(sizeof(id) == sizeof(bytes));
  std::memcpy(bytes.data(), &id, sizeof id);
  return bytes;
}

StatusOr<std::unique_ptr<RowExchange>> make_nccl_exchange_rank(const NcclUniqueIdBytes& id_bytes, int world_size,
                                                               int rank, int device) {
  if (world_size < 1 || world_size > 64)
    return invalid_argument(fmt::format("world_size = {} is out of range [1, 64]", world_size));
  if (rank < 0 || rank >= world_size)
    return invalid_argument(fmt::format("rank = {} is out of range [0, {})", rank, world_size));
  DETMOE_RETURN_IF_ERROR(check_device(device));
  disable_multicast();
  ncclUniqueId id;
  std::memcpy(&id, id_bytes.data(), sizeof id);
  DETMOE_CUDA_RETURN(cudaSetDevice(device));
  ncclComm_t comm = nullptr;
  DETMOE_NCCL_RETURN(ncclCommInitRank(&comm, world_size, id, rank));
  auto streams = create_streams({device});
  if (!streams.ok()) {
    ncclCommDestroy(comm);
    return streams.status();
  }
  return std::unique_ptr<RowExchange>(new NcclExchange(world_size, {rank}, {device}, {comm}, std::move(*streams)));
}

std::string nccl_version_string() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "unavailable";
  return fmt::format("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100);
}

}  // namespace detmoe
