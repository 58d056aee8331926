// GPU test helpers: skip with a visible reason when there is no usable CUDA device.
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace detmoe::testing {

// Empty string when a CUDA device is usable; otherwise why not.
std::string gpu_unavailable_reason();

}  // namespace detmoe::testing

#define DETMOE_REQUIRE_GPU()                                                          \
  do {                                                                                \
    const std::string detmoe_why_ = ::detmoe::testing::gpu_unavailable_reason();      \
    if (!detmoe_why_.empty()) GTEST_SKIP() << "GPU test skipped: " << detmoe_why_;    \
  } while (0)
