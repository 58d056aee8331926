// The PyTorch op: detmoe::forward / detmoe::backward as torch.library ops (schemas below; fake
// tensors and autograd are registered in python/detmoe/_ops.py). They run the reference layer
// or the megakernel on the caller's current CUDA stream, allocate their outputs through the
// torch caching allocator, and keep each layer's workspace cached (layer_pool.h).
//
// Host synchronisation: the reference forward waits once for the per-expert row counts cuBLAS
// needs as host integers, so it cannot run under CUDA-graph capture (refused with a message);
// the megakernel forward and every backward never wait.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/StringUtil.h>
#include <cuda_runtime_api.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>

#include "detmoe/device_tensors.h"
#include "layer_pool.h"

namespace detmoe::torch_op {
namespace {

// Every error names its argument or value. (Throwing a plain OpError inside and converting at the
// op's entry was tried against the H200 crash of docs/PYTORCH.md "Known defects": it changed
// nothing, so errors are thrown where they are found.)
#define DETMOE_OP_CHECK(kind, cond, ...) TORCH_CHECK_##kind(cond, "detmoe: ", __VA_ARGS__)

[[noreturn]] void raise(const Status& s) {
  if (s.code() == ErrorCode::kInvalidArgument || s.code() == ErrorCode::kCapacityExceeded)
    TORCH_CHECK_VALUE(false, "detmoe: ", s.message());
  if (s.code() == ErrorCode::kNotImplemented) TORCH_CHECK_NOT_IMPLEMENTED(false, "detmoe: ", s.message());
  TORCH_CHECK(false, "detmoe: ", s.to_string());
}
void check(const Status& s) {
  if (!s.ok()) raise(s);
}
template <class T>
T take(StatusOr<T> v) {
  if (!v.ok()) raise(v.status());
  return std::move(*v);
}

// No fmt here: torch's headers carry their own fmt, another version than the one our libraries link.
std::string sizes_of(const at::Tensor& t) { return c10::Join(", ", t.sizes()); }

// dtype, rank, device, contiguity and 16-byte alignment of one tensor argument.
void check_tensor(const at::Tensor& t, const char* name, std::initializer_list<at::ScalarType> dtypes, int64_t dim,
                  const at::Device& device, bool dense = true) {
  bool dtype_ok = false;
  for (auto d : dtypes) dtype_ok = dtype_ok || t.scalar_type() == d;
  std::string allowed;
  for (auto d : dtypes) allowed += std::string(allowed.empty() ? "" : " or ") + c10::toString(d);
  DETMOE_OP_CHECK(TYPE, dtype_ok, name, " has dtype ", c10::toString(t.scalar_type()), "; expected ", allowed);
  DETMOE_OP_CHECK(VALUE, t.dim() == dim, name, " has ", t.dim(), " dimensions [", sizes_of(t), "]; expected ", dim);
  DETMOE_OP_CHECK(VALUE, t.device() == device, name, " is on ", t.device().str(), "; expected ", device.str(),
                    " (the device of x)");
  if (dense) {
    DETMOE_OP_CHECK(VALUE, t.is_contiguous(), name, " [", sizes_of(t),
                      "] is not contiguous (strides ", c10::Join(", ", t.strides()),
                      "); pass .contiguous()");
    DETMOE_OP_CHECK(VALUE, reinterpret_cast<uintptr_t>(t.data_ptr()) % kDevicePointerAlignment == 0, name,
                      " starts at ", t.data_ptr(), ", which is not 16-byte aligned");
  }
}

void check_dim(const at::Tensor& t, const char* name, int64_t d, int64_t want, const char* what) {
  DETMOE_OP_CHECK(VALUE, t.size(d) == want, name, " [", sizes_of(t), "] has size ", t.size(d), " in dimension ",
                    d, "; expected ", want, " (", what, ")");
}

// The layer's inputs, validated, with the conversions the device path needs: topk_idx to int32
// (out-of-range ids clamped to -1 or E so the layer reports them, never wrapped into range),
// topk_w to fp32 and fp32 weights rounded to bf16.
struct Inputs {
  Shape shape;
  at::Tensor x, idx, w, w_gate_up, w_down, ws_gate_up, ws_down;
  DeviceLayerInputs device() const {
    DeviceLayerInputs d;
    d.x = static_cast<const uint16_t*>(x.data_ptr());
    d.topk_idx = idx.data_ptr<int32_t>();
    d.topk_w = w.data_ptr<float>();
    d.w_gate_up = static_cast<const uint16_t*>(w_gate_up.data_ptr());
    d.w_down = static_cast<const uint16_t*>(w_down.data_ptr());
    if (shape.Fs > 0) {
      d.ws_gate_up = static_cast<const uint16_t*>(ws_gate_up.data_ptr());
      d.ws_down = static_cast<const uint16_t*>(ws_down.data_ptr());
    }
    return d;
  }
};

at::Tensor as_bf16_weight(const at::Tensor& w) {
  return w.scalar_type() == at::kBFloat16 ? w : w.to(at::kBFloat16).contiguous();
}

Inputs check_inputs(const at::Tensor& x, const at::Tensor& topk_idx, const at::Tensor& topk_w,
                    const at::Tensor& w_gate_up, const at::Tensor& w_down, const std::optional<at::Tensor>& ws_gate_up,
                    const std::optional<at::Tensor>& ws_down) {
  DETMOE_OP_CHECK(VALUE, x.is_cuda(), "x is on ", x.device().str(), "; the layer runs on a CUDA device");
  const at::Device dev = x.device();
  check_tensor(x, "x", {at::kBFloat16}, 2, dev);
  check_tensor(topk_idx, "topk_idx", {at::kInt, at::kLong}, 2, dev, false);
  check_tensor(topk_w, "topk_w", {at::kFloat, at::kBFloat16, at::kHalf}, 2, dev, false);
  check_tensor(w_gate_up, "w_gate_up", {at::kBFloat16, at::kFloat}, 3, dev);
  check_tensor(w_down, "w_down", {at::kBFloat16, at::kFloat}, 3, dev);
  Inputs in;
  Shape& s = in.shape;
  s.T = x.size(0);
  s.H = x.size(1);
  s.k = topk_idx.size(1);
  s.E = w_gate_up.size(0);
  DETMOE_OP_CHECK(VALUE, w_gate_up.size(1) % 2 == 0, "w_gate_up [", sizes_of(w_gate_up),
                    "] has an odd size in dimension 1; expected 2F (gate rows, then up rows)");
  s.F = w_gate_up.size(1) / 2;
  check_dim(topk_idx, "topk_idx", 0, s.T, "T, the rows of x");
  check_dim(topk_w, "topk_w", 0, s.T, "T, the rows of x");
  check_dim(topk_w, "topk_w", 1, s.k, "k, the columns of topk_idx");
  check_dim(w_gate_up, "w_gate_up", 2, s.H, "H, the columns of x");
  check_dim(w_down, "w_down", 0, s.E, "E, the experts of w_gate_up");
  check_dim(w_down, "w_down", 1, s.H, "H, the columns of x");
  check_dim(w_down, "w_down", 2, s.F, "F, half the rows of w_gate_up");
  DETMOE_OP_CHECK(VALUE, ws_gate_up.has_value() == ws_down.has_value(), "the shared expert needs both ws_gate_up and ws_down (",
                    ws_gate_up.has_value() ? "ws_down" : "ws_gate_up", " is None)");
  if (ws_gate_up.has_value()) {
    check_tensor(*ws_gate_up, "ws_gate_up", {at::kBFloat16, at::kFloat}, 2, dev);
    check_tensor(*ws_down, "ws_down", {at::kBFloat16, at::kFloat}, 2, dev);
    DETMOE_OP_CHECK(VALUE, ws_gate_up->size(0) % 2 == 0, "ws_gate_up [", sizes_of(*ws_gate_up),
                      "] has an odd size in dimension 0; expected 2Fs");
    s.Fs = ws_gate_up->size(0) / 2;
    check_dim(*ws_gate_up, "ws_gate_up", 1, s.H, "H, the columns of x");
    check_dim(*ws_down, "ws_down", 0, s.H, "H, the columns of x");
    check_dim(*ws_down, "ws_down", 1, s.Fs, "Fs, half the rows of ws_gate_up");
  }
  if (s.T > 0) check(validate(s));
  in.x = x;
  in.idx = topk_idx.scalar_type() == at::kInt ? topk_idx.contiguous()
                                              : topk_idx.clamp(-1, s.E).to(at::kInt).contiguous();
  in.w = topk_w.to(at::kFloat).contiguous();
  in.w_gate_up = as_bf16_weight(w_gate_up);
  in.w_down = as_bf16_weight(w_down);
  if (s.Fs > 0) {
    in.ws_gate_up = as_bf16_weight(*ws_gate_up);
    in.ws_down = as_bf16_weight(*ws_down);
  }
  return in;
}

cudaStream_t current_stream(const at::Device& device) {
  const c10::Stream s = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(device);
  return static_cast<cudaStream_t>(s.native_handle());
}

bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaError_t err = cudaStreamIsCapturing(stream, &status);
  TORCH_CHECK(err == cudaSuccess, "detmoe: cudaStreamIsCapturing: ", cudaGetErrorString(err));
  return status != cudaStreamCaptureStatusNone;
}

// Shapes where the megakernel forward measured faster than the reference from PyTorch (H200,
// docs/PYTORCH.md): qwen3-30b-a3b (H = 2048) 3.05 vs 3.60 ms; deepseek-v3, mixtral-8x7b and
// gpt-oss-120b (H ≥ 2880) slower by 3–23 %. The two give the same out bits (test_op.py checks
// it), so the choice is speed only.
bool megakernel_forward_is_faster(const Shape& s) { return s.H <= 2048; }

// Training (backward) under "auto" stays on the reference: the megakernel's fwd+bwd measured
// 1.17x the reference's on qwen3-30b-a3b but 0.88-0.98x on the three larger shapes through the
// seam (docs/PERF.md, session 15), and it is not measured from PyTorch yet; impl='megakernel'
// asks for the fused backward.
Impl resolve(const std::string& impl, const Shape& s, bool backward, bool stream_capturing) {
  if (impl == "reference") return Impl::kReference;
  if (impl == "megakernel") return Impl::kMegakernel;
  DETMOE_OP_CHECK(VALUE, impl == "auto", "impl = '", impl, "'; expected 'auto', 'reference' or 'megakernel'");
  if (backward) return Impl::kReference;
  return stream_capturing || megakernel_forward_is_faster(s) ? Impl::kMegakernel : Impl::kReference;
}

// Autograd contexts: every forward returns a one-element int64 CPU tensor holding a context id
// (0 when nothing is kept); the id names the leased layer whose workspace holds the saved
// activations. The tensor's storage owns the lease: when autograd frees it, the layer is idle again.
// A megakernel context also keeps the forward's converted topk_idx (int32) and topk_w (fp32): the
// fused backward must get the very tensors its forward read (Layer::backward checks the pointers),
// and a conversion made again in the backward is a new tensor.
struct Saved {
  std::shared_ptr<Lease> lease;
  at::Tensor idx, w;
};
struct Contexts {
  std::mutex mutex;
  std::unordered_map<int64_t, Saved> leases;
  std::atomic<int64_t> next{1};
};
Contexts& contexts() {
  static Contexts* c = new Contexts;
  return *c;
}

at::Tensor context_tensor(Saved saved) {
  Contexts& c = contexts();
  const int64_t id = c.next++;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    c.leases.emplace(id, std::move(saved));
  }
  auto* cell = new int64_t(id);
  return at::from_blob(
      cell, {1},
      [](void* p) {
        auto* cell = static_cast<int64_t*>(p);
        Saved dropped;  // released outside the lock
        {
          std::lock_guard<std::mutex> lock(contexts().mutex);
          auto it = contexts().leases.find(*cell);
          if (it != contexts().leases.end()) {
            dropped = std::move(it->second);
            contexts().leases.erase(it);
          }
        }
        delete cell;
      },
      at::TensorOptions().dtype(at::kLong).device(at::kCPU));
}

Saved saved_of(const at::Tensor& ctx) {
  DETMOE_OP_CHECK(VALUE, ctx.device().is_cpu() && ctx.scalar_type() == at::kLong && ctx.numel() == 1,
                    "ctx is not a context returned by detmoe::forward with save_context=True");
  const int64_t id = ctx.data_ptr<int64_t>()[0];
  DETMOE_OP_CHECK(VALUE, id != 0, "ctx is empty: its forward ran with save_context=False (nothing was kept for a backward)");
  std::lock_guard<std::mutex> lock(contexts().mutex);
  auto it = contexts().leases.find(id);
  DETMOE_OP_CHECK(VALUE, it != contexts().leases.end(), "context ", id,
                    " is unknown or was freed (backward needs the context its own forward returned)");
  return it->second;
}

LayerKey key_for(Impl impl, const Shape& s, bool grad_fp32, bool save_h, int64_t num_sms, const at::Device& dev,
                 cudaStream_t stream) {
  DETMOE_OP_CHECK(VALUE, num_sms >= 0, "num_sms = ", num_sms, " must be >= 0 (0 = every SM)");
  LayerKey key;
  key.impl = impl;
  key.shape = s;
  key.grad_precision = grad_fp32 ? GradPrecision::kFP32 : GradPrecision::kBF16;
  key.save_h = save_h;
  key.num_sms = impl == Impl::kMegakernel ? static_cast<int32_t>(num_sms) : 0;  // the reference has no SM knob
  key.device = dev.index();
  key.stream = impl == Impl::kReference ? stream : nullptr;
  return key;
}

std::tuple<at::Tensor, at::Tensor> forward_op(const at::Tensor& x, const at::Tensor& topk_idx, const at::Tensor& topk_w,
                                              const at::Tensor& w_gate_up, const at::Tensor& w_down,
                                              const std::optional<at::Tensor>& ws_gate_up,
                                              const std::optional<at::Tensor>& ws_down, c10::string_view impl,
                                              int64_t num_sms, bool save_h, bool grad_fp32, bool save_context) {
  const Inputs in = check_inputs(x, topk_idx, topk_w, w_gate_up, w_down, ws_gate_up, ws_down);
  const c10::DeviceGuard guard(x.device());
  const cudaStream_t stream = current_stream(x.device());
  const bool captured = capturing(stream);
  const Impl which = resolve(std::string(impl), in.shape, save_context, captured);
  at::Tensor out = at::empty({in.shape.T, in.shape.H}, x.options());
  at::Tensor none = at::zeros({1}, at::TensorOptions().dtype(at::kLong));  // context 0: none kept
  if (in.shape.T == 0) return {out, none};
  DETMOE_OP_CHECK(NOT_IMPLEMENTED, !(captured && which == Impl::kReference),
                              "the reference forward waits on the host once per call (the per-expert row counts "
                              "cuBLAS needs), so it cannot be captured into a CUDA graph; capture a no-grad forward "
                              "with impl='auto' or 'megakernel', or a training step with impl='megakernel' after one "
                              "eager step");
  const std::shared_ptr<Lease> lease =
      take(acquire(key_for(which, in.shape, grad_fp32, save_h, num_sms, x.device(), stream), captured));
  PooledLayer& layer = lease->layer();
  const DeviceLayerInputs d_in = in.device();
  DeviceLayerOutputs d_out;
  d_out.out = static_cast<uint16_t*>(out.data_ptr());
  if (which == Impl::kReference) {
    check(layer.reference->forward({&d_in, 1}, {&d_out, 1}));
  } else {
    check(order_before_launch(layer, stream, captured));
    check(layer.megakernel->forward({{&d_in, 1}, {&d_out, 1}}, stream));
    check(record_launch(layer, stream, captured));
  }
  if (!save_context) return {out, none};
  return {out, context_tensor(which == Impl::kMegakernel ? Saved{lease, in.idx, in.w} : Saved{lease, {}, {}})};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> backward_op(
    const at::Tensor& ctx, const at::Tensor& dout, const at::Tensor& x, const at::Tensor& topk_idx,
    const at::Tensor& topk_w, const at::Tensor& w_gate_up, const at::Tensor& w_down,
    const std::optional<at::Tensor>& ws_gate_up, const std::optional<at::Tensor>& ws_down, bool grad_fp32) {
  const Inputs in = check_inputs(x, topk_idx, topk_w, w_gate_up, w_down, ws_gate_up, ws_down);
  check_tensor(dout, "dout", {at::kBFloat16}, 2, x.device());
  check_dim(dout, "dout", 0, in.shape.T, "T, the rows of x");
  check_dim(dout, "dout", 1, in.shape.H, "H, the columns of x");
  const Shape& s = in.shape;
  const c10::DeviceGuard guard(x.device());
  const auto f32 = x.options().dtype(at::kFloat);
  const auto wopt = x.options().dtype(grad_fp32 ? at::kFloat : at::kBFloat16);
  at::Tensor d_x = at::empty({s.T, s.H}, x.options());
  at::Tensor d_w = at::empty({s.T, s.k}, f32);
  at::Tensor dw_gate_up = at::empty({s.E, 2 * s.F, s.H}, wopt);
  at::Tensor dw_down = at::empty({s.E, s.H, s.F}, wopt);
  at::Tensor dws_gate_up = at::empty({2 * s.Fs, s.H}, wopt);
  at::Tensor dws_down = at::empty({s.H, s.Fs}, wopt);
  if (s.T == 0) {  // no tokens: every weight gradient is exactly zero
    dw_gate_up.zero_(), dw_down.zero_(), dws_gate_up.zero_(), dws_down.zero_();
    return {d_x, d_w, dw_gate_up, dw_down, dws_gate_up, dws_down};
  }
  const Saved saved = saved_of(ctx);
  PooledLayer& layer = saved.lease->layer();
  DETMOE_OP_CHECK(VALUE, layer.key.shape == s, "ctx belongs to a forward of shape ", layer.key.shape.to_string(),
                    "; this backward has ", s.to_string());
  DETMOE_OP_CHECK(VALUE, (layer.key.grad_precision == GradPrecision::kFP32) == grad_fp32, "grad_fp32 = ", grad_fp32,
                    " differs from the forward's");
  const cudaStream_t stream = current_stream(x.device());
  const bool megakernel = layer.key.impl == Impl::kMegakernel;
  DETMOE_OP_CHECK(VALUE, megakernel || stream == layer.key.stream, "backward runs on another CUDA stream than its "
                    "forward; the reference layer is bound to the forward's stream");
  DeviceLayerInputs d_in = in.device();
  if (megakernel) {  // the forward's own converted routing tensors (see Saved)
    d_in.topk_idx = saved.idx.data_ptr<int32_t>();
    d_in.topk_w = saved.w.data_ptr<float>();
  }
  DeviceGradInputs d_grad;
  d_grad.dout = static_cast<const uint16_t*>(dout.data_ptr());
  DeviceGradOutputs d_out;
  d_out.d_x = static_cast<uint16_t*>(d_x.data_ptr());
  d_out.d_topk_w = d_w.data_ptr<float>();
  d_out.dw_gate_up = dw_gate_up.data_ptr();
  d_out.dw_down = dw_down.data_ptr();
  if (s.Fs > 0) {
    d_out.dws_gate_up = dws_gate_up.data_ptr();
    d_out.dws_down = dws_down.data_ptr();
  }
  if (megakernel) {
    // The fused backward on the current stream, after the layer's forward (another stream waits
    // for it); its first call allocates the backward's buffers, so it cannot be the first one
    // under capture (Layer::backward says so).
    const bool captured = capturing(stream);
    check(order_before_launch(layer, stream, captured));
    check(layer.megakernel->backward({{&d_in, 1}, {&d_grad, 1}, {&d_out, 1}}, stream));
    check(record_launch(layer, stream, captured));
  } else {
    check(layer.reference->backward({&d_in, 1}, {&d_grad, 1}, {&d_out, 1}));
  }
  return {d_x, d_w, dw_gate_up, dw_down, dws_gate_up, dws_down};
}

// The layer's shape rules (validate(Shape), core/problem.cpp) for the Python checks: "" or the
// message naming the value. T = 0 (an empty batch) is allowed: the op returns empty outputs.
std::string validate_shape_op(int64_t T, int64_t H, int64_t F, int64_t E, int64_t k, int64_t Fs) {
  Shape s;
  s.T = std::max<int64_t>(T, 1), s.H = H, s.F = F, s.E = E, s.k = k, s.Fs = Fs;
  if (T < 0) return c10::str("T = ", T, " must be >= 0");
  const Status status = validate(s);
  return status.ok() ? std::string() : status.message();
}

// What impl="auto" picks for these sizes (for tests, benchmarks and the docs).
std::string resolve_op(int64_t T, int64_t H, int64_t F, int64_t E, int64_t k, int64_t Fs, c10::string_view impl,
                       bool backward, bool stream_capturing) {
  Shape s;
  s.T = T, s.H = H, s.F = F, s.E = E, s.k = k, s.Fs = Fs;
  return to_string(resolve(std::string(impl), s, backward, stream_capturing));
}

// Device faults the megakernel recorded (an invalid expert id, a spin-wait timeout) surface at
// the next synchronisation: this waits for every cached megakernel layer's last stream.
void synchronize_op() {
  check(for_each_megakernel_layer([](PooledLayer& layer) {
    return layer.megakernel->synchronize(layer.launched ? layer.last_stream : nullptr);
  }));
}

void release_idle_op() { release_idle_layers(); }
std::string describe_op() { return describe_pool(); }

}  // namespace

TORCH_LIBRARY(detmoe, m) {
  m.def("forward(Tensor x, Tensor topk_idx, Tensor topk_w, Tensor w_gate_up, Tensor w_down, Tensor? ws_gate_up, "
        "Tensor? ws_down, str impl, int num_sms, bool save_h, bool grad_fp32, bool save_context) -> (Tensor, Tensor)");
  m.def("backward(Tensor ctx, Tensor dout, Tensor x, Tensor topk_idx, Tensor topk_w, Tensor w_gate_up, Tensor w_down, "
        "Tensor? ws_gate_up, Tensor? ws_down, bool grad_fp32) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)");
  m.def("resolve_impl(int T, int H, int F, int E, int k, int Fs, str impl, bool backward, bool capturing) -> str",
        &resolve_op);
  m.def("validate_shape(int T, int H, int F, int E, int k, int Fs) -> str", &validate_shape_op);
  m.def("synchronize() -> ()", &synchronize_op);
  m.def("release_idle_layers() -> ()", &release_idle_op);
  m.def("describe_pool() -> str", &describe_op);
}

// CPU and CUDA both reach the same functions: on CPU tensors they raise the named error.
TORCH_LIBRARY_IMPL(detmoe, CUDA, m) {
  m.impl("forward", &forward_op);
  m.impl("backward", &backward_op);
}
TORCH_LIBRARY_IMPL(detmoe, CPU, m) {
  m.impl("forward", &forward_op);
  m.impl("backward", &backward_op);
}

}  // namespace detmoe::torch_op
