// A program that uses the fused layer and links detmoe_layer alone: the layer_link_closure test
// reads its dynamic libraries (ldd) and fails if cuBLAS or NCCL are among them — the layer must
// not need the reference path's libraries (issue: one seam for every implementation).
#include <cstdio>

#include "detmoe/layer.h"

int main() {
  detmoe::Shape shape;
  shape.T = 1, shape.H = 64, shape.F = 64, shape.E = 1, shape.k = 1;
  // No GPU needed for the answer that matters here (the link); on a GPU this makes a layer.
  auto layer = detmoe::Layer::create(shape, detmoe::LayerConfig{});
  std::printf("Layer::create: %s\n", layer.ok() ? "ok" : layer.status().to_string().c_str());
  return 0;
}
