#include "plan_kernels.h"

#include <cmath>

#include "detmoe/cuda_status.h"

namespace detmoe::ref {
namespace {

constexpr int kOffsetsThreads = 1024;  // ≥ kMaxExperts: the expert scan is one block

// One thread per token, mirroring validate_routing: the first slot whose id is out of range or
// repeats an earlier slot; if none, the first non-finite weight. The smallest key wins.
__global__ void validate_routing_kernel(const int32_t* idx, const float* w, int64_t tokens, int k, int E,
                                        unsigned long long* error_key) {
  const int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (g >= tokens) return;
  const int32_t* row = idx + g * k;
  int bad = -1;
  for (int j = 0; j < k && bad < 0; ++j) {
    const int32_t e = row[j];
    if (e < 0 || e >= E) {
      bad = j;
      break;
    }
    for (int jp = 0; jp < j; ++jp)
      if (row[jp] == e) {
        bad = j;
        break;
      }
  }
  if (bad < 0 && w != nullptr)
    for (int j = 0; j < k; ++j)
      if (!isfinite(w[g * k + j])) {
        bad = j;
        break;
      }
  if (bad >= 0) atomicMin(error_key, static_cast<unsigned long long>(g) * 64ull + static_cast<unsigned long long>(bad));
}

__global__ void count_chunks_kernel(const int32_t* idx, int64_t T, int k, int E, int64_t chunks_per_rank,
                                    int32_t* chunk_count) {
  extern __shared__ int hist[];
  const int64_t chunk = blockIdx.x;
  const int64_t s = chunk / chunks_per_rank, t0 = (chunk % chunks_per_rank) * kReferencePlanChunkTokens;
  for (int e = threadIdx.x; e < E; e += blockDim.x) hist[e] = 0;
  __syncthreads();
  const int64_t t = t0 + threadIdx.x;
  if (t < T) {
    const int32_t* row = idx + (s * T + t) * k;
    for (int j = 0; j < k; ++j) {
      const int32_t e = row[j];
      if (e >= 0 && e < E) atomicAdd(&hist[e], 1);
    }
  }
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x) chunk_count[chunk * E + e] = hist[e];
}

// One thread per expert walks the chunks in global token order: counts become bases within the
// expert's segment, and the per-source totals fall out.
__global__ void scan_chunks_kernel(int32_t* chunk_base, int64_t chunks_per_rank, int P, int E, int32_t* expert_count,
                                   int32_t* expert_src_count, int64_t* expert_src_offset) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= E) return;
  int64_t running = 0;
  for (int s = 0; s < P; ++s) {
    const int64_t start = running;
    expert_src_offset[e * P + s] = start;
    for (int64_t c = 0; c < chunks_per_rank; ++c) {
      int32_t* cell = chunk_base + (s * chunks_per_rank + c) * E + e;
      const int32_t n = *cell;
      *cell = static_cast<int32_t>(running);
      running += n;
    }
    expert_src_count[e * P + s] = static_cast<int32_t>(running - start);
  }
  expert_count[e] = static_cast<int32_t>(running);
}

__device__ int64_t offset_of(const int64_t* inclusive, int e) { return e == 0 ? 0 : inclusive[e - 1]; }

// One block: the expert offsets (scan), rank ranges and the rank-pair tables.
__global__ void plan_offsets_kernel(int E, int P, const int32_t* expert_count, const int32_t* expert_src_count,
                                    const int64_t* expert_src_offset, int64_t* expert_offset, int64_t* rank_row_begin,
                                    int64_t* pair_rows, int64_t* send_offset, int64_t* recv_offset,
                                    int64_t* max_recv_rows) {
  __shared__ int64_t scan[kOffsetsThreads];
  const int tid = threadIdx.x;
  scan[tid] = tid < E ? expert_count[tid] : 0;
  __syncthreads();
  for (int step = 1; step < kOffsetsThreads; step <<= 1) {
    const int64_t add = tid >= step ? scan[tid - step] : 0;
    __syncthreads();
    scan[tid] += add;
    __syncthreads();
  }
  for (int e = tid; e <= E; e += blockDim.x) expert_offset[e] = offset_of(scan, e);
  const int epr = E / P;
  for (int r = tid; r <= P; r += blockDim.x) rank_row_begin[r] = offset_of(scan, r * epr);
  for (int i = tid; i < P * P; i += blockDim.x) {
    const int s = i / P, d = i % P;
    const int64_t begin = offset_of(scan, d * epr);
    int64_t rows = 0, first = offset_of(scan, (d + 1) * epr) - begin;
    bool found = false;
    for (int e = d * epr; e < (d + 1) * epr; ++e) {
      const int32_t n = expert_src_count[e * P + s];
      rows += n;
      if (n > 0 && !found) {
        first = offset_of(scan, e) - begin + expert_src_offset[e * P + s];
        found = true;
      }
    }
    pair_rows[s * P + d] = rows;
    recv_offset[s * P + d] = first;
  }
  __syncthreads();  // pair_rows (global) written by other threads of this block
  for (int s = tid; s < P; s += blockDim.x) {
    int64_t offset = 0;
    for (int d = 0; d < P; ++d) {
      send_offset[s * P + d] = offset;
      offset += pair_rows[s * P + d];
    }
  }
  if (tid == 0) {
    int64_t most = 0;
    for (int r = 0; r < P; ++r) {
      const int64_t rows = offset_of(scan, (r + 1) * epr) - offset_of(scan, r * epr);
      most = rows > most ? rows : most;
    }
    *max_recv_rows = most;
  }
}

// One thread per token of the chunk; the chunk's ids sit in shared memory. A pair's rank inside
// the chunk counts the earlier pairs (token, then slot) with the same expert.
__global__ void place_rows_kernel(const int32_t* idx, int64_t T, int k, int E, int64_t chunks_per_rank,
                                  const int32_t* chunk_base, const int64_t* expert_offset, int32_t* row_token,
                                  int32_t* row_slot, int64_t* slot_row) {
  extern __shared__ int32_t chunk_idx[];
  const int64_t chunk = blockIdx.x;
  const int64_t s = chunk / chunks_per_rank, t0 = (chunk % chunks_per_rank) * kReferencePlanChunkTokens;
  const int n = static_cast<int>(T - t0 < kReferencePlanChunkTokens ? T - t0 : kReferencePlanChunkTokens);
  const int32_t* src = idx + (s * T + t0) * k;
  for (int i = threadIdx.x; i < n * k; i += blockDim.x) chunk_idx[i] = src[i];
  __syncthreads();
  const int tl = threadIdx.x;
  if (tl >= n) return;
  const int64_t g = s * T + t0 + tl;
  for (int j = 0; j < k; ++j) {
    const int32_t e = chunk_idx[tl * k + j];
    if (e < 0 || e >= E) continue;
    int32_t rank = 0;
    for (int i = 0; i < tl * k + j; ++i) rank += chunk_idx[i] == e;
    const int64_t row = expert_offset[e] + chunk_base[chunk * E + e] + rank;
    row_token[row] = static_cast<int32_t>(g);
    row_slot[row] = j;
    slot_row[g * k + j] = row;
  }
}

__global__ void send_base_kernel(const int32_t* expert_src_count, const int64_t* send_offset, int E, int P, int s,
                                 int64_t* send_base) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= E) return;
  const int epr = E / P, d = e / epr;
  int64_t v = send_offset[s * P + d];
  for (int ep = d * epr; ep < e; ++ep) v += expert_src_count[ep * P + s];
  send_base[e] = v;
}

__global__ void send_positions_kernel(const int32_t* idx, const int64_t* slot_row, const int64_t* expert_offset,
                                      const int64_t* expert_src_offset, const int64_t* send_base, int64_t T, int k,
                                      int E, int P, int s, int32_t* send_pos) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= T * k) return;
  const int64_t gi = s * T * k + i;  // global (token, slot) index
  const int32_t e = idx[gi];
  if (e < 0 || e >= E) return;  // bad input: the step is refused after the plan's sync
  send_pos[i] = static_cast<int32_t>(send_base[e] + (slot_row[gi] - expert_offset[e] - expert_src_offset[e * P + s]));
}

unsigned blocks_for(int64_t n, int threads) { return static_cast<unsigned>((n + threads - 1) / threads); }

}  // namespace

int64_t plan_chunks_per_rank(const Shape& shape) { return (shape.T + kReferencePlanChunkTokens - 1) / kReferencePlanChunkTokens; }

Status launch_plan_kernels(const Shape& shape, const int32_t* topk_idx, const float* topk_w, const PlanTables& t,
                           cudaStream_t stream) {
  const int64_t tokens = shape.tokens_global(), T = shape.T;
  const int k = static_cast<int>(shape.k), E = static_cast<int>(shape.E), P = static_cast<int>(shape.P);
  const int64_t cpr = plan_chunks_per_rank(shape), chunks = cpr * P;
  static_assert(kMaxExperts <= kOffsetsThreads, "the expert scan is one block");
  static_assert(kMaxTopK <= 64, "error_key packs the slot into 6 bits");

  DETMOE_CUDA_RETURN(cudaMemsetAsync(t.error_key, 0xff, sizeof(unsigned long long), stream));
  validate_routing_kernel<<<blocks_for(tokens, 256), 256, 0, stream>>>(topk_idx, topk_w, tokens, k, E, t.error_key);
  DETMOE_LAUNCH_RETURN("validate_routing_kernel");
  count_chunks_kernel<<<static_cast<unsigned>(chunks), kReferencePlanChunkTokens, E * sizeof(int), stream>>>(topk_idx, T, k, E, cpr,
                                                                                                    t.chunk_base);
  DETMOE_LAUNCH_RETURN("count_chunks_kernel");
  scan_chunks_kernel<<<blocks_for(E, 128), 128, 0, stream>>>(t.chunk_base, cpr, P, E, t.expert_count, t.expert_src_count,
                                                             t.expert_src_offset);
  DETMOE_LAUNCH_RETURN("scan_chunks_kernel");
  plan_offsets_kernel<<<1, kOffsetsThreads, 0, stream>>>(E, P, t.expert_count, t.expert_src_count, t.expert_src_offset,
                                                         t.expert_offset, t.rank_row_begin, t.pair_rows, t.send_offset,
                                                         t.recv_offset, t.max_recv_rows);
  DETMOE_LAUNCH_RETURN("plan_offsets_kernel");
  place_rows_kernel<<<static_cast<unsigned>(chunks), kReferencePlanChunkTokens, kReferencePlanChunkTokens * k * sizeof(int32_t), stream>>>(
      topk_idx, T, k, E, cpr, t.chunk_base, t.expert_offset, t.row_token, t.row_slot, t.slot_row);
  DETMOE_LAUNCH_RETURN("place_rows_kernel");
  return Status::Ok();
}

Status launch_send_positions(const Shape& shape, int rank, const int32_t* topk_idx, const PlanTables& t,
                             int64_t* send_base, int32_t* send_pos, cudaStream_t stream) {
  const int E = static_cast<int>(shape.E), P = static_cast<int>(shape.P), k = static_cast<int>(shape.k);
  send_base_kernel<<<blocks_for(E, 128), 128, 0, stream>>>(t.expert_src_count, t.send_offset, E, P, rank, send_base);
  DETMOE_LAUNCH_RETURN("send_base_kernel");
  send_positions_kernel<<<blocks_for(shape.T * k, 256), 256, 0, stream>>>(
      topk_idx, t.slot_row, t.expert_offset, t.expert_src_offset, send_base, shape.T, k, E, P, rank, send_pos);
  DETMOE_LAUNCH_RETURN("send_positions_kernel");
  return Status::Ok();
}

}  // namespace detmoe::ref
