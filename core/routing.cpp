// Routing generators (the test distributions of DESIGN.md §7 and the stress cases), their text
// form, and validation of caller-given routing.
//
// Reproducibility: every random decision is integer arithmetic on Philox words, or a
// comparison against a double built exactly from them, so a (shape, spec, seed) triple names one
// routing on every machine. Token t draws from its own Philox counter range
// {t_lo, t_hi, stream, block}, so its picks depend only on (seed, t, spec, E, k) — not on T, P,
// the thread count or the other tokens (D2/D3 tests).
#include "detmoe/routing.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>

#include "detmoe/data.h"
#include "detmoe/parallel.h"
#include "detmoe/philox.h"

namespace detmoe {
namespace {

// Router logits are uniform in [-kLogitRange, kLogitRange): weights then vary by up to e^(2·range)
// between slots, like a trained router's top-k, and stay well away from 0.
constexpr double kLogitRange = 2.0;

// The endless stream of random words of one token.
class TokenRandom {
 public:
  TokenRandom(uint64_t seed, uint64_t token) : seed_(seed), token_(token) {}

  uint32_t next_u32() {
    if (used_ == 4) {
      block_ = philox4x32_10(seed_, static_cast<uint32_t>(token_), static_cast<uint32_t>(token_ >> 32),
                             static_cast<uint32_t>(TensorStream::kRoutingPick), next_block_++);
      used_ = 0;
    }
    return block_.v[used_++];
  }

  // Exactly uniform in [0, n), n ≥ 1 (Lemire's multiply-and-reject: no modulo bias).
  uint32_t below(uint32_t n) {
    uint64_t m = static_cast<uint64_t>(next_u32()) * n;
    if (static_cast<uint32_t>(m) < n) {
      const uint32_t threshold = (0u - n) % n;
      while (static_cast<uint32_t>(m) < threshold) m = static_cast<uint64_t>(next_u32()) * n;
    }
    return static_cast<uint32_t>(m >> 32);
  }

  // Uniform in [0, 1) with 53 random bits: an exact double, the same on every machine.
  double uniform01() {
    const uint64_t hi = next_u32() >> 5, lo = next_u32() >> 6;  // 27 + 26 bits
    return static_cast<double>((hi << 26) | lo) * 0x1p-53;
  }

 private:
  uint64_t seed_, token_;
  Philox4 block_{};
  uint32_t next_block_ = 0;
  int used_ = 4;
};

// k distinct indices of [0, n) in random order, uniformly (a Fisher–Yates shuffle stopped after
// k steps, on a virtual identity array whose few swapped entries are kept in a small list).
void sample_uniform_distinct(TokenRandom& rng, int64_t n, int64_t k, int32_t* out) {
  std::array<std::pair<int32_t, int32_t>, kMaxTopK> moved;  // (position, value) overrides
  int num_moved = 0;
  auto value_at = [&](int32_t pos) {
    for (int m = 0; m < num_moved; ++m)
      if (moved[m].first == pos) return moved[m].second;
    return pos;
  };
  for (int32_t i = 0; i < k; ++i) {
    const int32_t r = i + static_cast<int32_t>(rng.below(static_cast<uint32_t>(n - i)));
    const int32_t vi = value_at(i), vr = value_at(r);
    out[i] = vr;
    // Position i is never read again; position r now holds what was at i.
    bool updated = false;
    for (int m = 0; m < num_moved && !updated; ++m)
      if (moved[m].first == r) moved[m].second = vi, updated = true;
    if (!updated) moved[num_moved++] = {r, vi};
  }
}

// k distinct experts drawn one after another with probability w_e / (weight of the experts not yet
// drawn): successive sampling, the same law as Efraimidis–Spirakis top-k keys u^(1/w) but with k
// draws instead of E. `suffix[i]` = Σ_{e ≥ i} w_e (summed from the small end, so the mass of any
// tail range is a difference of two small numbers: no cancellation for steep Zipf).
void sample_weighted_distinct(TokenRandom& rng, const std::vector<double>& suffix, int64_t E, int64_t k,
                              int32_t* out) {
  std::array<int32_t, kMaxTopK + 1> chosen;  // sorted ids drawn so far
  int num_chosen = 0;
  std::array<double, kMaxTopK + 1> mass;
  for (int64_t i = 0; i < k; ++i) {
    // The undrawn experts form num_chosen + 1 ranges [begin(r), end(r)).
    auto begin = [&](int r) { return r == 0 ? 0 : chosen[r - 1] + 1; };
    auto end = [&](int r) { return r == num_chosen ? static_cast<int32_t>(E) : chosen[r]; };
    double total = 0.0;
    int last_nonempty = -1;
    for (int r = 0; r <= num_chosen; ++r) {
      mass[r] = begin(r) < end(r) ? suffix[begin(r)] - suffix[end(r)] : 0.0;
      total += mass[r];
      if (begin(r) < end(r)) last_nonempty = r;
    }
    double x = rng.uniform01() * total;
    int range = -1;
    for (int r = 0; r <= num_chosen && range < 0; ++r) {
      if (mass[r] > 0.0 && x < mass[r]) range = r;
      else x -= mass[r];
    }
    if (range < 0) range = last_nonempty, x = mass[range];  // rounding ran off the end: take its last id
    // Smallest id e of the range whose cumulative mass from begin passes x.
    int32_t lo = begin(range), hi = end(range) - 1;
    const double base = suffix[begin(range)];
    while (lo < hi) {
      const int32_t mid = lo + (hi - lo) / 2;
      if (base - suffix[mid + 1] > x) hi = mid;
      else lo = mid + 1;
    }
    out[i] = lo;
    chosen[num_chosen++] = lo;
    std::sort(chosen.begin(), chosen.begin() + num_chosen);
  }
}

// Softmax over the k slots of seeded logits, in double and rounded once to fp32 (exp in double
// makes the fp32 result the same across math libraries in all but vanishingly rare cases).
void softmax_weights(uint64_t seed, uint64_t token, int64_t k, float* out) {
  std::array<double, kMaxTopK> logit;
  double max_logit = -kLogitRange;
  for (int64_t j = 0; j < k; ++j) {
    const float u = philox_uniform(seed, static_cast<uint32_t>(TensorStream::kRouterLogits),
                                   token * kMaxTopK + static_cast<uint64_t>(j));
    logit[j] = kLogitRange * (2.0 * u - 1.0);
    max_logit = std::max(max_logit, logit[j]);
  }
  double sum = 0.0;
  for (int64_t j = 0; j < k; ++j) sum += (logit[j] = std::exp(logit[j] - max_logit));
  for (int64_t j = 0; j < k; ++j) out[j] = static_cast<float>(logit[j] / sum);
}

Status validate_spec(const Shape& s, const RoutingSpec& spec) {
  switch (spec.kind) {
    case RoutingKind::kBalanced:
    case RoutingKind::kExplicit: return Status::Ok();
    case RoutingKind::kZipf:
      if (!std::isfinite(spec.zipf_s) || spec.zipf_s < 0)
        return invalid_argument(fmt::format("zipf_s = {} must be finite and >= 0", spec.zipf_s));
      return Status::Ok();
    case RoutingKind::kHotExpert:
      if (!(spec.hot_fraction >= 0.0 && spec.hot_fraction <= 1.0))
        return invalid_argument(fmt::format("hot_fraction = {} is out of range [0, 1]", spec.hot_fraction));
      [[fallthrough]];
    case RoutingKind::kAllToOne:
      if (spec.hot_expert < 0 || spec.hot_expert >= s.E)
        return invalid_argument(fmt::format("hot_expert = {} is out of range [0, {})", spec.hot_expert, s.E));
      return Status::Ok();
    case RoutingKind::kEmptyExperts:
      if (spec.empty_experts < 0 || spec.empty_experts > s.E - s.k)
        return invalid_argument(fmt::format("empty_experts = {} is out of range [0, E - k = {}]: every token needs "
                                            "k = {} distinct experts among the E = {}",
                                            spec.empty_experts, s.E - s.k, s.k, s.E));
      return Status::Ok();
    case RoutingKind::kCancel:
      if (spec.cancel_log2 < 1 || spec.cancel_log2 > 24)
        return invalid_argument(fmt::format("cancel_log2 = {} is out of range [1, 24]", spec.cancel_log2));
      if (s.k < 2 || s.E < 2)
        return invalid_argument(fmt::format("routing cancel needs k >= 2 and E >= 2 (a twin pair in slots 0 and 1); "
                                            "the shape has k = {}, E = {}", s.k, s.E));
      return Status::Ok();
  }
  return invalid_argument(fmt::format("routing kind {} is unknown", static_cast<int>(spec.kind)));
}

// Fills tokens [first, last) of `r` for a generated (non-explicit) kind.
class Sampler {
 public:
  Sampler(const Shape& s, const RoutingSpec& spec, uint64_t seed) : s_(s), spec_(spec), seed_(seed) {
    if (spec.kind == RoutingKind::kZipf) {
      suffix_.assign(s.E + 1, 0.0);
      for (int64_t e = s.E - 1; e >= 0; --e) {
        // s = 1 (the headline zipf1) by a correctly rounded division, not pow.
        const double w = spec.zipf_s == 1.0 ? 1.0 / static_cast<double>(e + 1)
                                            : std::pow(static_cast<double>(e + 1), -spec.zipf_s);
        suffix_[e] = suffix_[e + 1] + w;
      }
    }
    if (spec.kind == RoutingKind::kEmptyExperts) {
      const std::vector<int32_t> empty = empty_expert_ids(s.E, spec.empty_experts);
      for (int32_t e = 0, next = 0; e < s.E; ++e) {
        if (next < static_cast<int32_t>(empty.size()) && empty[next] == e) ++next;
        else allowed_.push_back(e);
      }
    }
  }

  void fill(Routing& r, int64_t first, int64_t last) const {
    const int64_t k = s_.k, E = s_.E;
    for (int64_t t = first; t < last; ++t) {
      int32_t* idx = &r.topk_idx[t * k];
      TokenRandom rng(seed_, static_cast<uint64_t>(t));
      switch (spec_.kind) {
        case RoutingKind::kBalanced: sample_uniform_distinct(rng, E, k, idx); break;
        case RoutingKind::kZipf: sample_weighted_distinct(rng, suffix_, E, k, idx); break;
        case RoutingKind::kHotExpert: fill_hot(rng, idx); break;
        case RoutingKind::kAllToOne:
          for (int64_t j = 0; j < k; ++j) idx[j] = static_cast<int32_t>((spec_.hot_expert + j) % E);
          break;
        case RoutingKind::kEmptyExperts:
          sample_uniform_distinct(rng, static_cast<int64_t>(allowed_.size()), k, idx);
          for (int64_t j = 0; j < k; ++j) idx[j] = allowed_[idx[j]];
          break;
        case RoutingKind::kCancel: fill_cancel_ids(rng, idx); break;
        case RoutingKind::kExplicit: break;
      }
      softmax_weights(seed_, static_cast<uint64_t>(t), k, &r.topk_w[t * k]);
      if (spec_.kind == RoutingKind::kCancel) {
        const float L = static_cast<float>(int64_t{1} << spec_.cancel_log2);
        r.topk_w[t * k] = L;
        r.topk_w[t * k + 1] = -(L - 1.0f);
      }
    }
  }

 private:
  // The hot expert is in a token with probability min(1, f·k) (so it takes a fraction min(f, 1/k)
  // of all picks), at a random slot; the other slots are uniform over the other experts.
  void fill_hot(TokenRandom& rng, int32_t* idx) const {
    const int64_t k = s_.k, E = s_.E;
    const int32_t hot = static_cast<int32_t>(spec_.hot_expert);
    const double p = std::min(1.0, spec_.hot_fraction * static_cast<double>(k));
    const bool include = E - 1 < k || rng.uniform01() < p;  // E = k: every token holds every expert
    std::array<int32_t, kMaxTopK> others;
    const int64_t num_others = include ? k - 1 : k;
    sample_uniform_distinct(rng, E - 1, num_others, others.data());
    const int64_t hot_slot = include ? rng.below(static_cast<uint32_t>(k)) : k;
    for (int64_t j = 0, o = 0; j < k; ++j) {
      if (j == hot_slot) {
        idx[j] = hot;
      } else {
        const int32_t other = others[o++];
        idx[j] = other < hot ? other : other + 1;  // skip the hot id
      }
    }
  }

  // A random twin pair (2m, 2m+1) in slots 0 and 1 (either order), the other slots uniform over
  // the remaining experts.
  void fill_cancel_ids(TokenRandom& rng, int32_t* idx) const {
    const int64_t k = s_.k, E = s_.E;
    const int32_t pair = 2 * static_cast<int32_t>(rng.below(static_cast<uint32_t>(E / 2)));
    const bool swap = rng.below(2) == 1;
    idx[0] = pair + (swap ? 1 : 0);
    idx[1] = pair + (swap ? 0 : 1);
    std::array<int32_t, kMaxTopK> others;
    sample_uniform_distinct(rng, E - 2, k - 2, others.data());
    for (int64_t j = 2; j < k; ++j) idx[j] = others[j - 2] < pair ? others[j - 2] : others[j - 2] + 2;
  }

  Shape s_;
  const RoutingSpec& spec_;
  uint64_t seed_;
  std::vector<double> suffix_;   // kZipf
  std::vector<int32_t> allowed_; // kEmptyExperts
};

// Runs fill(first, last) over contiguous token chunks on several threads (at most 32). Every
// token is independent, so the result does not depend on the split.
template <class Fill>
void for_token_chunks(int64_t tokens, int64_t work_per_token, Fill fill) {
  const int workers = std::min(32, workers_for(tokens, work_per_token, int64_t{1} << 18));
  parallel_ranges(tokens, workers, [&](int, int64_t first, int64_t last) { fill(first, last); });
}

// ---- text form ------------------------------------------------------------------------------

bool parse_number(std::string_view text, double& value) {
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && ptr == text.data() + text.size() && std::isfinite(value);
}

bool parse_number(std::string_view text, int64_t& value) {
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && ptr == text.data() + text.size();
}

constexpr const char* kRoutingForms =
    "balanced, zipf<s>, zipf:<s>, hot:<fraction>[:<expert>], all-to-one[:<expert>], empty:<count>, cancel[:<log2 L>]";

}  // namespace

std::vector<int32_t> empty_expert_ids(int64_t E, int64_t empty_experts) {
  std::vector<int32_t> ids;
  if (empty_experts < 1 || empty_experts > E) return ids;
  for (int64_t i = 0; i < empty_experts; ++i) ids.push_back(static_cast<int32_t>(i * E / empty_experts));
  return ids;
}

std::string RoutingSpec::to_string() const {
  switch (kind) {
    case RoutingKind::kBalanced: return "balanced";
    case RoutingKind::kZipf: return zipf_s == 1.0 ? "zipf1" : fmt::format("zipf:{}", zipf_s);
    case RoutingKind::kHotExpert:
      return hot_expert == 0 ? fmt::format("hot:{}", hot_fraction) : fmt::format("hot:{}:{}", hot_fraction, hot_expert);
    case RoutingKind::kAllToOne: return hot_expert == 0 ? "all-to-one" : fmt::format("all-to-one:{}", hot_expert);
    case RoutingKind::kEmptyExperts: return fmt::format("empty:{}", empty_experts);
    case RoutingKind::kCancel: return fmt::format("cancel:{}", cancel_log2);
    case RoutingKind::kExplicit: return "explicit";
  }
  return "unknown";
}

StatusOr<RoutingSpec> parse_routing(const std::string& text) {
  std::vector<std::string_view> parts;
  for (size_t begin = 0;;) {
    const size_t colon = text.find(':', begin);
    parts.emplace_back(std::string_view(text).substr(begin, colon == std::string::npos ? colon : colon - begin));
    if (colon == std::string::npos) break;
    begin = colon + 1;
  }
  auto bad = [&](const std::string& why) {
    return invalid_argument(fmt::format("routing '{}': {} (forms: {})", text, why, kRoutingForms));
  };
  auto not_a_number = [&](std::string_view part) { return bad(fmt::format("'{}' is not a number", part)); };
  RoutingSpec spec;
  const std::string_view name = parts[0];
  const size_t args = parts.size() - 1;
  if (name == "balanced" && args == 0) {
    spec.kind = RoutingKind::kBalanced;
  } else if (name.starts_with("zipf") && ((name.size() > 4 && args == 0) || (name == "zipf" && args == 1))) {
    spec.kind = RoutingKind::kZipf;
    const std::string_view s = args == 0 ? name.substr(4) : parts[1];
    if (!parse_number(s, spec.zipf_s)) return not_a_number(s);
    if (spec.zipf_s < 0) return bad(fmt::format("zipf exponent {} must be >= 0", spec.zipf_s));
  } else if (name == "hot" && (args == 1 || args == 2)) {
    spec.kind = RoutingKind::kHotExpert;
    if (!parse_number(parts[1], spec.hot_fraction)) return not_a_number(parts[1]);
    if (spec.hot_fraction < 0 || spec.hot_fraction > 1)
      return bad(fmt::format("hot fraction {} is out of range [0, 1]", spec.hot_fraction));
    if (args == 2 && !parse_number(parts[2], spec.hot_expert)) return not_a_number(parts[2]);
    if (spec.hot_expert < 0) return bad(fmt::format("expert {} must be >= 0", spec.hot_expert));
  } else if (name == "all-to-one" && args <= 1) {
    spec.kind = RoutingKind::kAllToOne;
    if (args == 1 && !parse_number(parts[1], spec.hot_expert)) return not_a_number(parts[1]);
    if (spec.hot_expert < 0) return bad(fmt::format("expert {} must be >= 0", spec.hot_expert));
  } else if (name == "empty" && args == 1) {
    spec.kind = RoutingKind::kEmptyExperts;
    if (!parse_number(parts[1], spec.empty_experts)) return not_a_number(parts[1]);
    if (spec.empty_experts < 0) return bad(fmt::format("empty expert count {} must be >= 0", spec.empty_experts));
  } else if (name == "cancel" && args <= 1) {
    spec.kind = RoutingKind::kCancel;
    if (args == 1 && !parse_number(parts[1], spec.cancel_log2)) return not_a_number(parts[1]);
    if (spec.cancel_log2 < 1 || spec.cancel_log2 > 24) return bad(fmt::format("log2 L = {} is out of range [1, 24]", spec.cancel_log2));
  } else {
    return bad("unknown routing");
  }
  return spec;
}

// ---- generation and validation --------------------------------------------------------------

StatusOr<Routing> generate_routing(const Shape& shape, const RoutingSpec& spec, uint64_t seed) {
  DETMOE_RETURN_IF_ERROR(validate(shape));
  DETMOE_RETURN_IF_ERROR(validate_spec(shape, spec));
  Routing r;
  r.tokens = shape.tokens_global();
  r.k = shape.k;
  const int64_t n = r.tokens * r.k;
  if (spec.kind == RoutingKind::kExplicit) {
    if (static_cast<int64_t>(spec.explicit_idx.size()) != n)
      return invalid_argument(fmt::format("explicit_idx has {} entries, but P·T·k = {}·{}·{} = {}",
                                          spec.explicit_idx.size(), shape.P, shape.T, shape.k, n));
    if (!spec.explicit_w.empty() && static_cast<int64_t>(spec.explicit_w.size()) != n)
      return invalid_argument(fmt::format("explicit_w has {} entries, but P·T·k = {}·{}·{} = {} (or 0 for seeded weights)",
                                          spec.explicit_w.size(), shape.P, shape.T, shape.k, n));
    r.topk_idx = spec.explicit_idx;
    if (!spec.explicit_w.empty()) {
      r.topk_w = spec.explicit_w;
    } else {
      r.topk_w.resize(n);
      for (int64_t t = 0; t < r.tokens; ++t) softmax_weights(seed, static_cast<uint64_t>(t), r.k, &r.topk_w[t * r.k]);
    }
    DETMOE_RETURN_IF_ERROR(validate_routing(shape, r.topk_idx.data(), r.topk_w.data(), r.tokens));
    return r;
  }
  r.topk_idx.resize(n);
  r.topk_w.resize(n);
  const Sampler sampler(shape, spec, seed);
  for_token_chunks(r.tokens, r.k, [&](int64_t first, int64_t last) { sampler.fill(r, first, last); });
  return r;
}

Status validate_routing(const Shape& shape, const int32_t* topk_idx, const float* topk_w, int64_t tokens) {
  DETMOE_RETURN_IF_ERROR(validate(shape));
  if (tokens != shape.tokens_global())
    return invalid_argument(fmt::format("routing has {} tokens, but the shape has P·T = {}·{} = {}", tokens, shape.P,
                                        shape.T, shape.tokens_global()));
  if (topk_idx == nullptr) return invalid_argument("topk_idx is null");
  const int64_t E = shape.E, k = shape.k;
  // For each expert, the last token that picked it and in which slot: finds repeats in O(k).
  std::vector<int64_t> seen_token(E, -1);
  std::vector<int32_t> seen_slot(E, 0);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = topk_idx[t * k + j];
      if (e < 0 || e >= E)
        return invalid_argument(fmt::format("topk_idx[{},{}] = {} is out of range [0, {})", t, j, e, E));
      if (seen_token[e] == t)
        return invalid_argument(fmt::format("topk_idx[{},{}] = {} repeats topk_idx[{},{}]", t, j, e, t, seen_slot[e]));
      seen_token[e] = t;
      seen_slot[e] = static_cast<int32_t>(j);
    }
    if (topk_w == nullptr) continue;
    for (int64_t j = 0; j < k; ++j)
      if (!std::isfinite(topk_w[t * k + j]))
        return invalid_argument(fmt::format("topk_w[{},{}] = {} is not finite", t, j, topk_w[t * k + j]));
  }
  return Status::Ok();
}

}  // namespace detmoe
