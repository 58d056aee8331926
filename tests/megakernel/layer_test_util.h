// Helpers of the megakernel's own tests (CUDA graphs, task traces, fault hooks: what only the
// Layer has): a seeded problem run through detmoe::Layer, outputs poisoned with NaN first and
// downloaded in the oracle's layout. Comparisons with other implementations go through the seam
// (testing::run_impl in gpu_problem.h).
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "detmoe/config.h"
#include "detmoe/device_problem.h"
#include "detmoe/layer.h"
#include "detmoe/routing.h"
#include "detmoe/row_exchange.h"
#include "detmoe/tensor.h"

namespace detmoe::testing {

// One seeded problem on the device (every loopback rank) plus a Layer for it.
class MegakernelCase {
 public:
  static StatusOr<std::unique_ptr<MegakernelCase>> create(const Shape& shape, const Routing& routing, uint64_t seed,
                                                          const LayerConfig& config = {},
                                                          const LayerOptions& options = {}, bool write_y = true);
  // A host problem: seeded data filled on the device, other data uploaded (DeviceProblem::create).
  static StatusOr<std::unique_ptr<MegakernelCase>> create(const HostProblem& problem, const LayerConfig& config = {},
                                                          const LayerOptions& options = {}, bool write_y = true);
  // Poison, one forward (+ backward), synchronize, download (out, y; with backward the gradients).
  StatusOr<std::vector<NamedTensor>> run(bool backward = false);
  // Poison, then forward (+ backward) captured in one CUDA graph replayed `replays` times; the
  // outputs of every replay (each replay poisons first, outside the graph).
  StatusOr<std::vector<std::vector<NamedTensor>>> run_graph(int replays, bool backward = false);

  Layer& layer() { return *layer_; }
  DeviceProblem& problem() { return *problem_; }
  cudaStream_t stream() const { return exchange_->stream(0); }

 private:
  std::shared_ptr<RowExchange> exchange_;
  std::unique_ptr<DeviceProblem> problem_;
  std::unique_ptr<Layer> layer_;

  Status enqueue(bool backward);  // forward (+ backward) on stream(), no synchronisation

  // The exchange, the problem `make_problem` puts on it, and a Layer for `shape`.
  template <class MakeProblem>
  static StatusOr<std::unique_ptr<MegakernelCase>> assemble(const Shape& shape, const LayerConfig& config,
                                                            const LayerOptions& options, MakeProblem&& make_problem);
};

// One forward (+ backward) of a fresh MegakernelCase; a failure is a test failure (EXPECT) and an
// empty list.
std::vector<NamedTensor> run_megakernel_once(const Shape& s, const Routing& r, uint64_t seed, LayerConfig config = {},
                                             bool backward = false);

// A LayerConfig of num_sms CTAs, comm_sms of them moving data (D1's speed knobs).
LayerConfig grid_config(int num_sms, int comm_sms = 0);

// D1 for the wave gate (megakernel/layer/wave_gate.cuh), a speed-only mechanism: the case run at
// each of `configs` gives the default config's bits (the full grid), and the gate checked tiles in
// each of those launches (traced: LayerTaskTrace::gated_tiles) but none at the full grid, where the
// gated phase fits one wave — so a gate that silently never engages fails the test. Failures name
// the config's num_sms and comm_sms.
void expect_gated_configs_keep_bits(const Shape& s, const Routing& r, uint64_t seed,
                                    const std::vector<LayerConfig>& configs, bool backward = false);

// D3's permutation of T tokens: reversed, then rotated by 77.
std::vector<int64_t> token_permutation(int64_t T);

// Rank 0's x, routing and dout with new token t taken from old token perm[t], as device copies
// that live as long as this object (P = 1); inputs()/grads() are the problem's with them in.
class PermutedTokens {
 public:
  PermutedTokens(const DeviceProblem& problem, const Shape& shape, const std::vector<int64_t>& perm);
  ~PermutedTokens();
  PermutedTokens(const PermutedTokens&) = delete;
  PermutedTokens& operator=(const PermutedTokens&) = delete;
  const Status& status() const { return status_; }
  const DeviceLayerInputs& inputs() const { return in_; }
  const DeviceGradInputs& grads() const { return grad_; }

 private:
  Status status_;
  DeviceLayerInputs in_;
  DeviceGradInputs grad_;
  void* memory_ = nullptr;
};

// Rows t of `permuted` that differ from row perm[t] of `base` (both with perm.size() rows).
int64_t rows_not_permuted(const NamedTensor& permuted, const NamedTensor& base, const std::vector<int64_t>& perm);

// out[t] = bf16(Σ_j fma(w[t,j], y[t,j]) + 0) on the host from a run's own y (Fs = 0): the
// combine's contract order, which the megakernel must reproduce bit for bit.
NamedTensor host_combine(const Shape& shape, const Routing& routing, const NamedTensor& y);

}  // namespace detmoe::testing
