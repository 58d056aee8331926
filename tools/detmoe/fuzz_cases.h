// The problems of a fuzz campaign (`detmoe fuzz`): problem i of campaign seed S is a pure
// function of (S, i) and the limits, so a campaign resumes at any index and a failure replays
// from its two numbers. Shrinking proposes smaller problems that keep the routing distribution.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "detmoe/config.h"
#include "detmoe/problem.h"
#include "detmoe/routing.h"

namespace detmoe::cli {

struct FuzzLimits {
  int64_t max_tokens = 65536;  // global tokens P·T, drawn log-uniform in [1, max]
  int64_t max_experts = 512;
  int64_t max_k = 16;
  int64_t max_hidden = 1024;        // H, a multiple of 64 in [64, max]
  int64_t max_intermediate = 512;   // F
  int64_t max_shared = 256;         // Fs when the shared expert is on (half the problems)
  std::vector<int64_t> ranks = {1, 2, 4, 8};  // P, among those dividing E and the token count
  int64_t max_rows = int64_t{1} << 18;        // P·T·k (y alone is rows·H·2 bytes on the host, ×5 runs); larger draws are scaled down in T
};

struct FuzzCase {
  int64_t index = 0;
  Shape shape;
  RoutingSpec spec;
  uint64_t data_seed = 0;
  bool backward = true;
  GradPrecision grad_precision = GradPrecision::kFP32;
  // "T=… H=… F=… E=… k=… P=… Fs=… routing=zipf:1.70 seed=… fwd+bwd fp32"
  std::string describe() const;
  // The `detmoe run` options that rebuild exactly this problem (seeded data and routing).
  std::string problem_options() const;
};

FuzzCase draw_case(uint64_t campaign_seed, int64_t index, const FuzzLimits& limits);

// Speed knobs for D1 on a GPU of `sms` SMs, a pure function of the problem: any SM count that
// leaves each of the P rank slices a CTA, fewer data-movement SMs than that, a band height, h
// saved or recomputed. (Knobs change speed, never bits: DESIGN.md D1.)
LayerConfig draw_knobs(const FuzzCase& c, int sms);

// Smaller problems than `c` (fewer tokens, experts, top-k, hidden, ranks; no shared expert;
// forward only), each still valid; the shrinker keeps the first that still fails.
std::vector<FuzzCase> shrink_candidates(const FuzzCase& c);

}  // namespace detmoe::cli
