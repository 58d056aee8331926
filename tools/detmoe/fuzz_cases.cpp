#include "fuzz_cases.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace detmoe::cli {
namespace {

// splitmix64 of (seed, index): independent streams per problem, stable across platforms.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

class Draw {
 public:
  explicit Draw(uint64_t seed) : state_(seed) {}
  uint64_t next() { return state_ = mix(state_); }
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  int64_t uniform(int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo + 1)); }
  // log-uniform integer in [lo, hi]: small problems are common, large ones still drawn.
  int64_t log_uniform(int64_t lo, int64_t hi) {
    const double v = std::exp(std::log(static_cast<double>(lo)) +
                              unit() * (std::log(static_cast<double>(hi) + 1) - std::log(static_cast<double>(lo))));
    return std::clamp(static_cast<int64_t>(v), lo, hi);
  }

 private:
  uint64_t state_;
};

int64_t multiple_of_64(Draw& d, int64_t max) { return 64 * d.log_uniform(1, std::max<int64_t>(1, max / 64)); }

}  // namespace

std::string FuzzCase::problem_options() const {
  std::string s = fmt::format("--T {} --H {} --F {} --E {} --k {} --P {} --Fs {} --routing {} --seed {}", shape.T, shape.H,
                              shape.F, shape.E, shape.k, shape.P, shape.Fs, spec.to_string(), data_seed);
  if (!backward) s += " --forward-only";
  if (grad_precision == GradPrecision::kBF16) s += " --grad-dtype bf16";
  return s;
}

std::string FuzzCase::describe() const {
  return fmt::format("T={} H={} F={} E={} k={} P={} Fs={} routing={} seed={} {} {}", shape.T, shape.H, shape.F, shape.E,
                     shape.k, shape.P, shape.Fs, spec.to_string(), data_seed, backward ? "fwd+bwd" : "fwd",
                     to_string(grad_precision));
}

FuzzCase draw_case(uint64_t campaign_seed, int64_t index, const FuzzLimits& L) {
  Draw d(mix(campaign_seed) ^ mix(static_cast<uint64_t>(index) * 0x632be59bd9b4e019ull));
  FuzzCase c;
  c.index = index;
  Shape& s = c.shape;
  s.E = d.log_uniform(1, L.max_experts);
  s.k = d.uniform(1, std::min(L.max_k, s.E));
  s.H = multiple_of_64(d, L.max_hidden);
  s.F = multiple_of_64(d, L.max_intermediate);
  s.Fs = d.unit() < 0.5 ? 0 : multiple_of_64(d, L.max_shared);
  int64_t tokens = d.log_uniform(1, L.max_tokens);
  tokens = std::max<int64_t>(1, std::min(tokens, L.max_rows / s.k));
  std::vector<int64_t> ranks;
  for (int64_t p : L.ranks)
    if (p >= 1 && s.E % p == 0 && tokens >= p) ranks.push_back(p);
  s.P = ranks.empty() ? 1 : ranks[d.uniform(0, static_cast<int64_t>(ranks.size()) - 1)];
  s.T = std::max<int64_t>(1, tokens / s.P);
  // Routing: the distributions the issue names, each with its parameter drawn.
  RoutingSpec& r = c.spec;
  switch (d.uniform(0, 4)) {
    case 0: r.kind = RoutingKind::kBalanced; break;
    case 1: r.kind = RoutingKind::kZipf; r.zipf_s = std::round(d.unit() * 300.0) / 100.0; break;
    case 2:
      r.kind = RoutingKind::kHotExpert;
      r.hot_expert = d.uniform(0, s.E - 1);
      r.hot_fraction = std::round(d.unit() * 100.0 / static_cast<double>(s.k)) / 100.0;
      break;
    case 3: r.kind = RoutingKind::kAllToOne; r.hot_expert = d.uniform(0, s.E - 1); break;
    default:
      r.kind = RoutingKind::kEmptyExperts;
      r.empty_experts = s.E - s.k >= 1 ? d.uniform(1, s.E - s.k) : 0;
      if (r.empty_experts == 0) r.kind = RoutingKind::kBalanced;
      break;
  }
  c.data_seed = d.next() >> 16;
  c.backward = d.unit() < 0.75;
  c.grad_precision = d.unit() < 0.5 ? GradPrecision::kFP32 : GradPrecision::kBF16;
  return c;
}

std::vector<FuzzCase> shrink_candidates(const FuzzCase& c) {
  std::vector<FuzzCase> out;
  auto add = [&](FuzzCase n) {
    if (n.spec.kind == RoutingKind::kHotExpert || n.spec.kind == RoutingKind::kAllToOne)
      n.spec.hot_expert = std::min<int64_t>(n.spec.hot_expert, n.shape.E - 1);
    if (n.spec.kind == RoutingKind::kEmptyExperts) {
      n.spec.empty_experts = std::min<int64_t>(n.spec.empty_experts, n.shape.E - n.shape.k);
      if (n.spec.empty_experts < 1) n.spec.kind = RoutingKind::kBalanced;
    }
    if (validate(n.shape).ok()) out.push_back(n);
  };
  const Shape& s = c.shape;
  if (s.T > 1) { FuzzCase n = c; n.shape.T = s.T / 2; add(n); }
  if (s.P > 1) { FuzzCase n = c; n.shape.T = s.T * s.P / 2 > 0 ? s.T : 1; n.shape.P = s.P / 2; add(n); }
  if (s.E > s.k && s.E / 2 >= s.k && (s.E / 2) % s.P == 0) { FuzzCase n = c; n.shape.E = s.E / 2; add(n); }
  if (s.k > 1) { FuzzCase n = c; n.shape.k = s.k - 1; add(n); }
  if (s.Fs > 0) { FuzzCase n = c; n.shape.Fs = 0; add(n); }
  if (s.H > 64) { FuzzCase n = c; n.shape.H = std::max<int64_t>(64, s.H / 2 / 64 * 64); add(n); }
  if (s.F > 64) { FuzzCase n = c; n.shape.F = std::max<int64_t>(64, s.F / 2 / 64 * 64); add(n); }
  if (c.backward) { FuzzCase n = c; n.backward = false; add(n); }
  return out;
}

LayerConfig draw_knobs(const FuzzCase& c, int sms) {
  Draw d(mix(c.data_seed) ^ mix(static_cast<uint64_t>(c.index) + 0x5bd1e995ull));
  LayerConfig k;
  const int64_t lo = std::min<int64_t>(c.shape.P, sms);
  k.num_sms = static_cast<int32_t>(d.uniform(lo, std::max<int64_t>(lo, sms)));
  k.comm_sms = static_cast<int32_t>(d.uniform(0, std::min<int64_t>(k.num_sms, 17) - 1));
  const int32_t rows[] = {0, 128, 256, 512, 1024, 4096};
  k.overlap_rows = rows[d.uniform(0, 5)];
  k.save_h = d.uniform(0, 1) == 0;
  const WeightGradLaunch launches[] = {WeightGradLaunch::kFused, WeightGradLaunch::kGateUpLater,
                                       WeightGradLaunch::kSecondLaunch};
  k.weight_grad_launch = launches[d.uniform(0, 2)];
  // Drawn last, so the draws above stay those of earlier logs: the weight-gradient launches' tile
  // order — 0 (fixed bands), 64 KB (the narrowest bands, in either orientation), the default's —
  // their stores (evict-first or plain) and store ring (deep or not).
  const int32_t band_kb[] = {0, 64, 8192};
  k.weight_grad_band_budget_kb = band_kb[d.uniform(0, 2)];
  k.weight_grad_stream_stores = d.uniform(0, 1) == 0;
  k.weight_grad_deep_ring = d.uniform(0, 1) == 0;
  return k;
}

}  // namespace detmoe::cli
