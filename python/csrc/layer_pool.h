// The layers behind the PyTorch op, cached per (implementation, shape, config, device[, stream])
// and lent out one call — or, for a forward whose backward is still to come, one autograd
// context — at a time.
//
// Why leases: a layer's workspace holds what its backward needs (the plan, the dispatched x
// rows, h, a, y). A model with several MoE blocks of one shape runs several forwards before the
// first backward, so each forward that will be differentiated takes a layer of its own and keeps
// it until its context is freed. Idle layers are reused by the next call, so a training loop
// allocates its workspaces in the first step only.
//
// Streams: a reference layer is bound to the stream it was made on (its cuBLAS handle and row
// exchange), so the stream is part of its key. A megakernel layer takes the stream per launch;
// a call on another stream than the layer's previous one first waits for that launch (an event),
// so two streams never share a workspace at the same time.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "detmoe/config.h"
#include "detmoe/layer.h"
#include "detmoe/problem.h"
#include "detmoe/reference_layer.h"
#include "detmoe/row_exchange.h"
#include "detmoe/status.h"

namespace detmoe::torch_op {

enum class Impl { kReference, kMegakernel };
const char* to_string(Impl impl);

struct LayerKey {
  Impl impl = Impl::kReference;
  Shape shape;
  GradPrecision grad_precision = GradPrecision::kFP32;
  bool save_h = true;
  int32_t num_sms = 0;
  int device = 0;
  cudaStream_t stream = nullptr;  // reference only (a megakernel layer takes any stream)
};

struct PooledLayer {
  LayerKey key;
  std::shared_ptr<RowExchange> exchange;       // reference
  std::unique_ptr<ReferenceLayer> reference;   // reference
  std::unique_ptr<Layer> megakernel;           // megakernel
  cudaEvent_t last_launch = nullptr;           // megakernel: recorded after each eager launch
  cudaStream_t last_stream = nullptr;
  bool launched = false;
  bool leased = false;
  ~PooledLayer();
};

// Holds one layer until destroyed; then the layer is idle again (and reused by the next call).
class Lease {
 public:
  explicit Lease(std::shared_ptr<PooledLayer> layer) : layer_(std::move(layer)) {}
  ~Lease();
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  PooledLayer& layer() const { return *layer_; }

 private:
  std::shared_ptr<PooledLayer> layer_;
};

// An idle layer for `key`, or a new one (which allocates its workspace and synchronises the
// device: refused while `key.stream` is being captured into a CUDA graph, with a message that
// says to warm up first).
StatusOr<std::shared_ptr<Lease>> acquire(const LayerKey& key, bool stream_capturing);

// Megakernel: before a launch on `stream`, wait for the layer's previous launch when it was on
// another stream; after it, record the launch. Nothing is recorded while capturing (torch
// synchronises the device before a capture starts, and a graph's replays are ordered by the
// stream that replays them).
Status order_before_launch(PooledLayer& layer, cudaStream_t stream, bool stream_capturing);
Status record_launch(PooledLayer& layer, cudaStream_t stream, bool stream_capturing);

// Calls `fn` on every cached megakernel layer (outside the pool's lock); the first error wins.
Status for_each_megakernel_layer(const std::function<Status(PooledLayer&)>& fn);

// Frees every idle layer (leased ones stay until their lease ends).
void release_idle_layers();
// "N layers (M leased)" per implementation, for tests and debugging.
std::string describe_pool();

}  // namespace detmoe::torch_op
