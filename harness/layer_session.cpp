// The LayerSession rows: thin adapters over ReferenceLayer and the megakernel's Layer.
#include "detmoe/layer_session.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "detmoe/device_problem.h"
#include "detmoe/layer.h"
#include "detmoe/reference_layer.h"

namespace detmoe {
namespace {

class ReferenceSessionImpl final : public LayerSession {
 public:
  explicit ReferenceSessionImpl(std::unique_ptr<ReferenceLayer> layer) : layer_(std::move(layer)) {}
  const char* impl() const override { return "reference"; }
  Status forward(std::span<const DeviceLayerInputs> in, std::span<const DeviceLayerOutputs> out) override {
    return layer_->forward(in, out);
  }
  Status backward(std::span<const DeviceLayerInputs> in, std::span<const DeviceGradInputs> grads,
                  std::span<const DeviceGradOutputs> out) override {
    return layer_->backward(in, grads, out);
  }
  Status synchronize() override { return layer_->synchronize(); }

 private:
  std::unique_ptr<ReferenceLayer> layer_;
};

class MegakernelSession final : public LayerSession {
 public:
  MegakernelSession(std::unique_ptr<Layer> layer, std::shared_ptr<RowExchange> exchange)
      : layer_(std::move(layer)), exchange_(std::move(exchange)) {}
  const char* impl() const override { return "megakernel"; }
  Status forward(std::span<const DeviceLayerInputs> in, std::span<const DeviceLayerOutputs> out) override {
    return layer_->forward({in, out}, exchange_->stream(0));
  }
  Status backward(std::span<const DeviceLayerInputs> in, std::span<const DeviceGradInputs> grads,
                  std::span<const DeviceGradOutputs> out) override {
    return layer_->backward({in, grads, out}, exchange_->stream(0));
  }
  Status synchronize() override { return layer_->synchronize(exchange_->stream(0)); }
  StatusOr<std::vector<LayerTaskTrace>> task_trace() const override { return layer_->downloaded_trace(); }

 private:
  std::unique_ptr<Layer> layer_;
  std::shared_ptr<RowExchange> exchange_;
};

StatusOr<std::unique_ptr<LayerSession>> make_reference(const Shape& shape, const LayerConfig& config,
                                                       std::shared_ptr<RowExchange> exchange, const LayerSessionOptions& o) {
  ReferenceOptions options;
  options.gemm = o.reference_gemm;
  auto layer = ReferenceLayer::create(shape, config, std::move(exchange), options);
  if (!layer.ok()) return layer.status();
  return std::unique_ptr<LayerSession>(new ReferenceSessionImpl(std::move(*layer)));
}

StatusOr<std::unique_ptr<LayerSession>> make_megakernel(const Shape& shape, const LayerConfig& config,
                                                        std::shared_ptr<RowExchange> exchange, const LayerSessionOptions& o) {
  LayerOptions options;
  options.device = exchange->device(0);
  options.trace_tasks_per_cta = o.trace_tasks_per_cta;
  auto layer = Layer::create(shape, config, options);
  if (!layer.ok()) return layer.status();
  return std::unique_ptr<LayerSession>(new MegakernelSession(std::move(*layer), std::move(exchange)));
}

struct Row {
  const char* name;
  bool has_backward;
  bool loopback_only;  // every rank on one GPU in one launch (the megakernel until its NCCL exchange)
  StatusOr<std::unique_ptr<LayerSession>> (*make)(const Shape&, const LayerConfig&, std::shared_ptr<RowExchange>,
                                                  const LayerSessionOptions&);
};
constexpr Row kRows[] = {{"reference", true, false, &make_reference}, {"megakernel", true, true, &make_megakernel}};

const Row* find_row(std::string_view impl) {
  for (const Row& r : kRows)
    if (impl == r.name) return &r;
  return nullptr;
}

}  // namespace

bool layer_session_has_backward(std::string_view impl) {
  const Row* r = find_row(impl);
  return r != nullptr && r->has_backward;
}

bool layer_session_loopback_only(std::string_view impl) {
  const Row* r = find_row(impl);
  return r != nullptr && r->loopback_only;
}

StatusOr<std::vector<LayerTaskTrace>> LayerSession::task_trace() const {
  return Status(ErrorCode::kNotImplemented, fmt::format("the {} records no task timeline", impl()));
}

bool LayerSession::has_backward() const { return layer_session_has_backward(impl()); }

std::vector<std::string> layer_session_impls() {
  std::vector<std::string> names;
  for (const Row& r : kRows) names.emplace_back(r.name);
  return names;
}

StatusOr<std::unique_ptr<LayerSession>> make_layer_session(std::string_view impl, const Shape& shape,
                                                           const LayerConfig& config, std::shared_ptr<RowExchange> exchange,
                                                           const LayerSessionOptions& options) {
  if (!exchange) return invalid_argument("make_layer_session: exchange is null");
  if (const Row* r = find_row(impl)) {
    if (r->loopback_only && !exchange->single_stream())
      return Status(ErrorCode::kNotImplemented,
                    fmt::format("the {} runs loopback ranks only (one GPU, one launch); the {} exchange is still to come",
                                r->name, exchange->backend()));
    return r->make(shape, config, std::move(exchange), options);
  }
  return invalid_argument(fmt::format("implementation '{}' is unknown (known: {})", impl, fmt::join(layer_session_impls(), ", ")));
}

StatusOr<std::vector<NamedTensor>> run_step(LayerSession& session, DeviceProblem& problem, bool backward) {
  if (backward && !session.has_backward())
    return Status(ErrorCode::kNotImplemented, fmt::format("the {}'s backward is not built yet (forward only)", session.impl()));
  DETMOE_RETURN_IF_ERROR(problem.poison_outputs());
  DETMOE_RETURN_IF_ERROR(session.forward(problem.inputs(), problem.outputs()));
  if (backward) DETMOE_RETURN_IF_ERROR(session.backward(problem.inputs(), problem.grad_inputs(), problem.grad_outputs()));
  DETMOE_RETURN_IF_ERROR(session.synchronize());
  return problem.download(backward);
}

}  // namespace detmoe
