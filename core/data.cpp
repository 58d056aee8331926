#include "detmoe/data.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "detmoe/parallel.h"

namespace detmoe {

int weight_scale_log2(int64_t fan_in) {
  int log2_fan_in = 0;
  while ((int64_t{1} << log2_fan_in) < fan_in) ++log2_fan_in;
  return -((log2_fan_in + 1) / 2);
}

int stream_scale_log2(const Shape& shape, TensorStream stream) {
  switch (stream) {
    case TensorStream::kWGate:
    case TensorStream::kWUp:
    case TensorStream::kWsGate:
    case TensorStream::kWsUp: return weight_scale_log2(shape.H);
    case TensorStream::kWDown: return weight_scale_log2(shape.F);
    case TensorStream::kWsDown: return weight_scale_log2(shape.Fs);
    default: return 0;
  }
}

void fill_bf16(uint16_t* dst, int64_t count, uint64_t seed, TensorStream stream, uint64_t first, int scale_log2) {
  // Each element is independent: contiguous ranges over threads for the big shapes (elements
  // interleaved across threads shared cache lines and cost more than the threads gained).
  parallel_ranges(count, workers_for(count, 1, int64_t{1} << 20), [&](int, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      dst[i] = generated_bf16_bits(seed, stream, first + static_cast<uint64_t>(i), scale_log2);
  });
}

LayerData generate_layer_data(const Shape& s, uint64_t seed) {
  LayerData d;
  d.shape = s;
  auto gen = [&](std::vector<uint16_t>& v, int64_t n, TensorStream stream) {
    v.resize(n);
    fill_bf16(v.data(), n, seed, stream, 0, stream_scale_log2(s, stream));
  };
  const int64_t N = s.tokens_global();
  gen(d.x, N * s.H, TensorStream::kX);
  gen(d.w_gate, s.E * s.F * s.H, TensorStream::kWGate);
  gen(d.w_up, s.E * s.F * s.H, TensorStream::kWUp);
  gen(d.w_down, s.E * s.H * s.F, TensorStream::kWDown);
  gen(d.ws_gate, s.Fs * s.H, TensorStream::kWsGate);
  gen(d.ws_up, s.Fs * s.H, TensorStream::kWsUp);
  gen(d.ws_down, s.H * s.Fs, TensorStream::kWsDown);
  gen(d.dout, N * s.H, TensorStream::kDout);
  return d;
}

void make_twin_experts(LayerData& d) {
  const Shape& s = d.shape;
  const int64_t up = s.F * s.H, down = s.H * s.F;
  for (int64_t e = 1; e < s.E; e += 2) {
    std::copy_n(d.w_gate.begin() + (e - 1) * up, up, d.w_gate.begin() + e * up);
    std::copy_n(d.w_up.begin() + (e - 1) * up, up, d.w_up.begin() + e * up);
    std::copy_n(d.w_down.begin() + (e - 1) * down, down, d.w_down.begin() + e * down);
  }
}

}  // namespace detmoe
