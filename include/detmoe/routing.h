// Routing (topk_idx, topk_w) for a global batch of P·T tokens: generators for the test
// distributions, and validation that names the offending value.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "detmoe/problem.h"
#include "detmoe/status.h"

namespace detmoe {

enum class RoutingKind {
  kBalanced,      // k distinct experts uniformly at random ("balanced" of DESIGN.md §7)
  kZipf,          // k distinct experts with weight 1/(i+1)^s
  kHotExpert,     // one expert taking a fraction f of all picks, the rest uniform
  kAllToOne,      // every token picks the same k experts {e0, e0+1, …} (mod E)
  kEmptyExperts,  // uniform over all but `empty_experts` experts, which receive nothing
  kCancel,        // slots 0 and 1 hold a twin pair (2m, 2m+1) with weights +L and -(L-1), L = 2^cancel_log2;
                  // the other slots uniform with softmax weights. With twin-expert data (make_twin_experts)
                  // the two large terms cancel, so the result depends on the order of the slot sum: the
                  // golden cases that prove a summation-order change flips bits
  kExplicit,      // lists given by the caller
};

struct RoutingSpec {
  RoutingKind kind = RoutingKind::kBalanced;
  double zipf_s = 1.0;          // kZipf
  double hot_fraction = 0.5;    // kHotExpert: fraction of all T·k picks going to hot_expert
                                //   (at most 1/k: a token holds an expert once)
  int64_t hot_expert = 0;       // kHotExpert / kAllToOne: the favoured expert
  int64_t empty_experts = 0;    // kEmptyExperts: how many (spread over the id range) get nothing
  int64_t cancel_log2 = 16;     // kCancel: log2 of the large weight L, in [1, 24] (L and L-1 exact in fp32)
  std::vector<int32_t> explicit_idx;  // kExplicit: [P·T, k]
  std::vector<float> explicit_w;      // kExplicit: [P·T, k]; empty = softmax of seeded logits
  std::string to_string() const;
};

// Parses "balanced", "zipf1", "zipf:1.5", "hot:0.3", "hot:0.3:5", "all-to-one", "empty:4", "cancel:16".
StatusOr<RoutingSpec> parse_routing(const std::string& text);

struct Routing {
  int64_t tokens = 0;  // P·T
  int64_t k = 0;
  std::vector<int32_t> topk_idx;  // [tokens, k], global expert ids, distinct within a token
  std::vector<float> topk_w;      // [tokens, k], softmax of seeded logits over the k slots
};

// The experts kEmptyExperts leaves without a single row: floor(i·E/n) for i < n, spread over the
// id range (and so over the ranks). Empty when n is outside [1, E].
std::vector<int32_t> empty_expert_ids(int64_t E, int64_t empty_experts);

// Deterministic in (shape, spec, seed); token t's picks depend only on (seed, t), so a token
// subset or a different P gives the same rows (D2/D3 tests rely on this).
StatusOr<Routing> generate_routing(const Shape& shape, const RoutingSpec& spec, uint64_t seed);

// Ids in [0, E), no duplicates within a token, finite weights, k ≤ E. The message names the
// token, the slot and the value, e.g. "topk_idx[5,1] = -3 is out of range [0, 8)".
Status validate_routing(const Shape& shape, const int32_t* topk_idx, const float* topk_w, int64_t tokens);

}  // namespace detmoe
