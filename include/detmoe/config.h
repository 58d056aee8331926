// Knobs of a layer run. DESIGN.md §3 D1: every knob here changes speed, never bits — except
// the precision fields, which select a different math contract.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "detmoe/problem.h"
#include "detmoe/status.h"

namespace detmoe {

// Where the megakernel's backward computes the routed experts' weight gradients (dW_down,
// dW_gate_up). A speed knob: both give the same bits (the same tiles, k order and stores).
enum class WeightGradLaunch : int32_t {
  kAuto,          // the measured-faster choice for the shape (megakernel/host/weight_grads.h)
  kFused,         // inside the backward's one launch, after the d_x sum
  kGateUpLater,   // dW_gate_up in a GEMM-core launch after it; dW_down stays in the fused launch,
                  // where its tiles fill the d_x sum's tail
  kSecondLaunch,  // both in GEMM-core launches after it (four operand stages, no staging to share)
};
inline constexpr std::array kWeightGradLaunches{WeightGradLaunch::kAuto, WeightGradLaunch::kFused,
                                                WeightGradLaunch::kGateUpLater, WeightGradLaunch::kSecondLaunch};
const char* to_string(WeightGradLaunch w);  // auto | fused | gate-up-later | second
StatusOr<WeightGradLaunch> parse_weight_grad_launch(std::string_view s);  // to_string's names

struct LayerConfig {
  Precision precision = Precision::kBF16;
  GradPrecision grad_precision = GradPrecision::kFP32;
  // Keep h = [g, u] from forward for backward (true) or recompute it from x (false). Same bits.
  bool save_h = true;
  // Streaming multiprocessors the persistent kernel may use; 0 = all of the device.
  int32_t num_sms = 0;
  // SMs (of num_sms) dedicated to data movement; 0 = none: every SM takes every kind of task.
  // Megakernel: each of the P rank slices of the grid gives min(slice CTAs − 1, ⌈comm_sms / P⌉)
  // CTAs to dispatch and the weighted sum only (the combine is GEMM2's epilogue, so it stays
  // with the GEMM CTAs); the rest run the GEMM tiles. A 1-CTA slice never splits.
  int32_t comm_sms = 0;
  // Rows per GEMM band, the overlap granularity between GEMM1 and GEMM2: the tile order walks
  // max(1, overlap_rows / 128) m-blocks of 128 rows before the next column block, so those rows
  // finish GEMM1 together and their GEMM2 can start. 0 = 16 m-blocks forward, 32 for the
  // backward's data-grad tiles and 8 for its weight-gradient tiles (the GEMM core's band); a value
  // sets them all.
  int32_t overlap_rows = 0;
  // Rows each rank's receive buffer holds; 0 = the worst case P·T·min(k, E/P), which can never
  // overflow. A smaller cap is checked against the plan before any write.
  int64_t recv_capacity_rows = 0;
  WeightGradLaunch weight_grad_launch = WeightGradLaunch::kAuto;
  // How the weight-gradient GEMM-core launches (weight_grad_launch other than kFused) deal their
  // tiles to CTAs: true, by tickets where the experts' rows are uneven — each CTA takes the next
  // tile from a counter when it is free (gemm::GroupedGemm::tile_tickets) — and statically where
  // they are even; false, always tile i to CTA i mod grid. A tile's K is its expert's rows, so with
  // uneven experts the static deal leaves CTAs uneven. Speed only.
  bool weight_grad_tickets = true;
  // The weight-gradient GEMM-core launches' tile order (gemm::GroupedGemm::band_budget_kb): each
  // expert's tiles in bands that keep at most this many KB of operand panels, m-blocks or n-blocks
  // first, whichever re-reads fewer bytes; 0 = the GEMM core's fixed bands of 8 m-blocks. Their
  // tiles' K is the expert's rows, so an expert's grid spans many waves and fixed bands re-read the
  // second operand once per band (docs/PERF.md session 40). Speed only.
  int32_t weight_grad_band_budget_kb = 8192;
  // The weight-gradient launches store their output with an L2 evict-first priority
  // (gemm::GroupedGemm::stream_stores): the gradients are not read again in the step, and their
  // fp32 tiles would otherwise push the operand panels that later tiles re-read out of L2. Speed only.
  bool weight_grad_stream_stores = true;
  // The weight-gradient launches in the GEMM core's deep-store-ring form (gemm::GroupedGemm::
  // deep_store_ring: 3 operand stages, 5 staging slabs per warpgroup), for experts of few rows whose
  // short tiles leave their fp32 stores exposed between mainloops (gpt-oss-120b). Off until measured
  // (docs/PERF.md session 40). Speed only.
  bool weight_grad_deep_ring = false;
  // Bound of every device spin-wait, in milliseconds, before the launch fails with kDeviceTimeout.
  int32_t spin_timeout_ms = 2000;
};

Status validate(const LayerConfig& config, const Shape& shape);

// Rows a rank may receive in the worst case (every token of every rank picks experts of it).
int64_t worst_case_recv_rows(const Shape& shape);

}  // namespace detmoe
