// Deterministic problem data from a seed (Philox, DESIGN.md issue "foundation" item 4).
//
// Element i of tensor S is bf16(2^scale_log2 · (2u − 1)), u = philox_uniform(seed, S, i): the
// scale is a power of two, so the value is the same bits on host and device. Indices are
// *global* (token rows of all ranks, all experts), so the same global problem is generated
// whatever the EP size P — the basis of D2 tests.
#pragma once

#include <cstdint>
#include <vector>

#include "detmoe/numeric.h"
#include "detmoe/philox.h"
#include "detmoe/problem.h"

namespace detmoe {

enum class TensorStream : uint32_t {
  kX = 1,
  kWGate,
  kWUp,
  kWDown,
  kWsGate,
  kWsUp,
  kWsDown,
  kDout,
  kRouterLogits,   // topk_w = softmax over the k picked slots of these logits
  kRoutingPick,    // random keys of the routing-distribution samplers
};

// -ceil(log2(fan_in) / 2): weights ~ U(-1,1)/sqrt(fan_in) rounded to a power of two, so layer
// outputs stay O(1) for any H, F.
int weight_scale_log2(int64_t fan_in);

DETMOE_HD uint16_t generated_bf16_bits(uint64_t seed, TensorStream stream, uint64_t index, int scale_log2) {
  const float u = philox_uniform(seed, static_cast<uint32_t>(stream), index);
  float v = 2.0f * u - 1.0f;  // exact: 24-bit u
  // Multiply by 2^scale_log2 exactly (no ldexpf on device needed).
  v *= bits_float(static_cast<uint32_t>(127 + scale_log2) << 23);
  return bf16_bits_from_float(v);
}

// Host fill of `count` elements starting at global element `first`.
void fill_bf16(uint16_t* dst, int64_t count, uint64_t seed, TensorStream stream, uint64_t first,
               int scale_log2);

// The scale of each stream for a shape (x and dout: 0; weights: by fan-in).
int stream_scale_log2(const Shape& shape, TensorStream stream);

// All dense inputs of one global problem (P·T tokens) as bf16 bits, generated on the host.
struct LayerData {
  Shape shape;
  std::vector<uint16_t> x;        // [P·T, H]
  std::vector<uint16_t> w_gate;   // [E, F, H]
  std::vector<uint16_t> w_up;     // [E, F, H]
  std::vector<uint16_t> w_down;   // [E, H, F]
  std::vector<uint16_t> ws_gate;  // [Fs, H]
  std::vector<uint16_t> ws_up;    // [Fs, H]
  std::vector<uint16_t> ws_down;  // [H, Fs]
  std::vector<uint16_t> dout;     // [P·T, H]
};
LayerData generate_layer_data(const Shape& shape, uint64_t seed);

// Makes every odd expert 2m+1 a copy of expert 2m (gate, up and down weights), so both give the
// same bits for the same token: with routing "cancel" their large opposite weights cancel and
// the slot-sum order decides the result's low bits (golden sensitivity cases). An odd E leaves
// the last expert alone.
void make_twin_experts(LayerData& data);

}  // namespace detmoe
