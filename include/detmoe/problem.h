// The problem a layer solves: its shape, its precision, and the rules every field must obey.
//
// All alignment rules live here (kHiddenMultiple / kIntermediateMultiple) and nowhere else.
#pragma once

#include <cstdint>
#include <string>

#include "detmoe/status.h"

namespace detmoe {

// H, F and Fs must be multiples of 64: one 128-byte swizzle span of bf16, the K-slab of every
// GEMM, so no K loop has a partial tile and TMA row pitches are 16-byte aligned.
inline constexpr int64_t kHiddenMultiple = 64;
inline constexpr int64_t kIntermediateMultiple = 64;
// Upper bounds that keep every row index and offset in int32 and plan tables small.
inline constexpr int64_t kMaxExperts = 1024;
inline constexpr int64_t kMaxTopK = 32;
inline constexpr int64_t kMaxRanks = 64;
inline constexpr int64_t kMaxTokensPerRank = int64_t{1} << 20;
inline constexpr int64_t kMaxDim = int64_t{1} << 16;

enum class Precision { kBF16, kFP8 };
enum class GradPrecision { kFP32, kBF16 };  // dtype of weight gradients

const char* to_string(Precision p);
const char* to_string(GradPrecision p);

// Per-rank shape of an expert-parallel group of P ranks (DESIGN.md §2). Rank r owns experts
// [r·E/P, (r+1)·E/P). P = 1 is a single GPU.
struct Shape {
  int64_t T = 0;   // tokens per rank
  int64_t H = 0;   // hidden
  int64_t F = 0;   // expert intermediate
  int64_t E = 0;   // experts in total
  int64_t k = 0;   // top-k
  int64_t P = 1;   // EP size
  int64_t Fs = 0;  // shared-expert intermediate, 0 = none

  int64_t tokens_global() const { return T * P; }
  int64_t experts_per_rank() const { return E / P; }
  int64_t rows_global() const { return T * P * k; }  // routed (token, slot) pairs
  // FLOPs of one forward (DESIGN.md §7): 6·T·k·H·F per rank, plus 6·T·H·Fs for the shared expert.
  double forward_flops_per_rank() const;
  bool operator==(const Shape&) const = default;
  std::string to_string() const;
};

// Checks every field: positivity, bounds, alignment (naming the dimension and its required
// multiple), E divisible by P, k ≤ E.
Status validate(const Shape& shape);

}  // namespace detmoe
