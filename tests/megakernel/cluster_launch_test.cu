// Can the fused layer's persistent grid run as CTA pairs? Its kernels need every CTA resident at
// once (a cooperative launch), and pairs sharing a weight panel by TMA multicast need clusters of
// two. This launches one CTA per SM in clusters of two with the cooperative attribute and the
// layer's shared-memory size, and checks that every CTA reaches a grid-wide counter barrier (with
// a bounded wait: a non-resident CTA shows as a timeout, never a hang) and sees its cluster rank.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "megakernel/ptx/cluster.cuh"
#include "tests/support/gpu.h"

namespace detmoe::ptx {
namespace {

struct Probe {
  unsigned arrived;
  unsigned timed_out;
  unsigned bad_rank;
};

__global__ void grid_barrier_in_pairs(Probe* probe, unsigned long long spin_limit) {
  extern __shared__ uint8_t smem[];
  smem[threadIdx.x] = 1;
  if (threadIdx.x == 0) {
    if (cluster_ctarank() != blockIdx.x % 2) atomicAdd(&probe->bad_rank, 1u);
    atomicAdd(&probe->arrived, 1u);
    unsigned long long spins = 0;
    while (atomicAdd(&probe->arrived, 0u) < gridDim.x) {
      if (++spins == spin_limit) {
        atomicAdd(&probe->timed_out, 1u);
        break;
      }
    }
  }
  cluster_sync();
}

TEST(CooperativeClusterLaunch, EveryCtaOfOnePerSmPairsIsResident) {
  DETMOE_REQUIRE_GPU();
  int device = 0, sms = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), cudaSuccess);
  constexpr int kSmem = 220 * 1024;  // the fused layer's dynamic shared memory, about
  ASSERT_EQ(cudaFuncSetAttribute(grid_barrier_in_pairs, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem),
            cudaSuccess);
  cudaLaunchConfig_t config{};
  config.blockDim = dim3(384);
  config.dynamicSmemBytes = kSmem;
  cudaLaunchAttribute attrs[2]{};
  attrs[0].id = cudaLaunchAttributeClusterDimension;
  attrs[0].val.clusterDim.x = 2;
  attrs[0].val.clusterDim.y = 1;
  attrs[0].val.clusterDim.z = 1;
  attrs[1].id = cudaLaunchAttributeCooperative;
  attrs[1].val.cooperative = 1;
  config.attrs = attrs;
  config.numAttrs = 2;
  config.gridDim = dim3(2);
  int clusters = 0;
  ASSERT_EQ(cudaOccupancyMaxActiveClusters(&clusters, grid_barrier_in_pairs, &config), cudaSuccess);
  std::printf("[ info ] %d SMs, at most %d resident clusters of 2 CTAs with %d KB each\n", sms, clusters, kSmem / 1024);
  const int grid = 2 * std::min(clusters, sms / 2);
  ASSERT_GT(grid, 0);
  config.gridDim = dim3(static_cast<unsigned>(grid));
  Probe* probe = nullptr;
  ASSERT_EQ(cudaMalloc(&probe, sizeof(Probe)), cudaSuccess);
  ASSERT_EQ(cudaMemset(probe, 0, sizeof(Probe)), cudaSuccess);
  const cudaError_t launched = cudaLaunchKernelEx(&config, grid_barrier_in_pairs, probe, 1ull << 26);
  ASSERT_EQ(launched, cudaSuccess) << "cooperative launch of " << grid << " CTAs in clusters of 2: "
                                   << cudaGetErrorString(launched);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  Probe host{};
  ASSERT_EQ(cudaMemcpy(&host, probe, sizeof(Probe), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(probe);
  EXPECT_EQ(host.arrived, static_cast<unsigned>(grid));
  EXPECT_EQ(host.timed_out, 0u) << "CTAs not co-resident";
  EXPECT_EQ(host.bad_rank, 0u) << "cluster rank is not blockIdx.x % 2";
  std::printf("[ info ] cooperative launch of %d CTAs in clusters of 2: all resident\n", grid);
}

}  // namespace
}  // namespace detmoe::ptx
