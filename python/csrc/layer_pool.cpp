#include "layer_pool.h"

#include <fmt/format.h>

#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "detmoe/cuda_status.h"

namespace detmoe::torch_op {
namespace {

auto key_tuple(const LayerKey& k) {
  const Shape& s = k.shape;
  return std::make_tuple(static_cast<int>(k.impl), s.T, s.H, s.F, s.E, s.k, s.P, s.Fs, static_cast<int>(k.grad_precision),
                         k.save_h, k.num_sms, k.device, reinterpret_cast<uintptr_t>(k.stream));
}
struct KeyLess {
  bool operator()(const LayerKey& a, const LayerKey& b) const { return key_tuple(a) < key_tuple(b); }
};

struct Pool {
  std::mutex mutex;
  std::map<LayerKey, std::vector<std::shared_ptr<PooledLayer>>, KeyLess> layers;
};
Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: layers may outlive static destruction order
  return *p;
}

StatusOr<std::shared_ptr<PooledLayer>> make_layer(const LayerKey& key) {
  auto layer = std::make_shared<PooledLayer>();
  layer->key = key;
  LayerConfig config;
  config.grad_precision = key.grad_precision;
  config.save_h = key.save_h;
  config.num_sms = key.num_sms;
  if (key.impl == Impl::kReference) {
    auto exchange = make_loopback_exchange(1, key.device, key.stream, LoopbackStream::kBorrow);
    if (!exchange.ok()) return exchange.status();
    layer->exchange = std::move(*exchange);
    auto made = ReferenceLayer::create(key.shape, config, layer->exchange);
    if (!made.ok()) return made.status();
    layer->reference = std::move(*made);
  } else {
    LayerOptions options;
    options.device = key.device;
    auto made = Layer::create(key.shape, config, options);
    if (!made.ok()) return made.status();
    layer->megakernel = std::move(*made);
    DETMOE_CUDA_RETURN(cudaEventCreateWithFlags(&layer->last_launch, cudaEventDisableTiming));
  }
  return layer;
}

}  // namespace

const char* to_string(Impl impl) { return impl == Impl::kReference ? "reference" : "megakernel"; }

PooledLayer::~PooledLayer() {
  if (last_launch != nullptr) cudaEventDestroy(last_launch);
}

Lease::~Lease() {
  std::lock_guard<std::mutex> lock(pool().mutex);
  layer_->leased = false;
}

StatusOr<std::shared_ptr<Lease>> acquire(const LayerKey& key, bool stream_capturing) {
  Pool& p = pool();
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    for (auto& layer : p.layers[key])
      if (!layer->leased) {
        layer->leased = true;
        return std::make_shared<Lease>(layer);
      }
  }
  if (stream_capturing)
    return Status(ErrorCode::kInvalidArgument,
                  fmt::format("detmoe: no idle {} layer for shape {} while the stream is being captured into a CUDA graph: "
                              "making one allocates and synchronises the device. Run the same call once before the "
                              "capture (the warm-up torch.cuda.graphs asks for)",
                              to_string(key.impl), key.shape.to_string()));
  auto made = make_layer(key);  // outside the lock: allocation and a device synchronisation
  if (!made.ok()) return made.status();
  std::lock_guard<std::mutex> lock(p.mutex);
  (*made)->leased = true;
  p.layers[key].push_back(*made);
  return std::make_shared<Lease>(*made);
}

Status order_before_launch(PooledLayer& layer, cudaStream_t stream, bool stream_capturing) {
  if (stream_capturing || !layer.launched || layer.last_stream == stream) return Status::Ok();
  DETMOE_CUDA_RETURN(cudaStreamWaitEvent(stream, layer.last_launch, 0));
  return Status::Ok();
}

Status record_launch(PooledLayer& layer, cudaStream_t stream, bool stream_capturing) {
  if (stream_capturing) return Status::Ok();
  DETMOE_CUDA_RETURN(cudaEventRecord(layer.last_launch, stream));
  layer.last_stream = stream;
  layer.launched = true;
  return Status::Ok();
}

Status for_each_megakernel_layer(const std::function<Status(PooledLayer&)>& fn) {
  std::vector<std::shared_ptr<PooledLayer>> layers;
  {
    std::lock_guard<std::mutex> lock(pool().mutex);
    for (auto& [key, list] : pool().layers)
      if (key.impl == Impl::kMegakernel) layers.insert(layers.end(), list.begin(), list.end());
  }
  Status first = Status::Ok();
  for (auto& l : layers) {
    Status s = fn(*l);
    if (first.ok() && !s.ok()) first = std::move(s);
  }
  return first;
}

void release_idle_layers() {
  std::vector<std::shared_ptr<PooledLayer>> dropped;  // destroyed outside the lock
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  for (auto it = p.layers.begin(); it != p.layers.end();) {
    auto& list = it->second;
    for (auto l = list.begin(); l != list.end();) {
      if (!(*l)->leased) {
        dropped.push_back(std::move(*l));
        l = list.erase(l);
      } else {
        ++l;
      }
    }
    it = list.empty() ? p.layers.erase(it) : std::next(it);
  }
}

std::string describe_pool() {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  int counts[2] = {0, 0}, leased[2] = {0, 0};
  for (auto& [key, list] : p.layers)
    for (auto& l : list) {
      counts[static_cast<int>(key.impl)] += 1;
      leased[static_cast<int>(key.impl)] += l->leased ? 1 : 0;
    }
  return fmt::format("reference: {} layers ({} leased); megakernel: {} layers ({} leased)", counts[0], leased[0],
                     counts[1], leased[1]);
}

}  // namespace detmoe::torch_op
