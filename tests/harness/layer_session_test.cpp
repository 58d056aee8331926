// The seam's contract that needs no GPU: an unknown implementation is named with the known ones,
// the megakernel refuses an exchange that is not loopback (saying which), a null exchange is an
// error. (Running sessions is covered by every GPU test that goes through the registry.)
#include "detmoe/layer_session.h"

#include <gtest/gtest.h>

namespace detmoe {
namespace {

// An exchange that is not loopback: the megakernel must refuse it before touching a device.
class FakeNcclExchange final : public RowExchange {
 public:
  const char* backend() const override { return "nccl"; }
  int world_size() const override { return 2; }
  int local_count() const override { return 1; }
  int local_rank(int) const override { return 0; }
  int device(int) const override { return 0; }
  cudaStream_t stream(int) const override { return nullptr; }
  bool single_stream() const override { return false; }
  Status exchange(std::span<const RowSegment>, std::span<const void* const>, std::span<void* const>, int64_t) override {
    return Status::Ok();
  }
  Status synchronize() override { return Status::Ok(); }
};

Shape small_shape() {
  Shape s;
  s.T = 64, s.H = 128, s.F = 64, s.E = 4, s.k = 2, s.P = 2;
  return s;
}

TEST(LayerSession, KnowsTheTwoImplementations) {
  EXPECT_EQ(layer_session_impls(), (std::vector<std::string>{"reference", "megakernel"}));
}

TEST(LayerSession, SaysWhichHaveABackward) {
  EXPECT_TRUE(layer_session_has_backward("megakernel"));
  EXPECT_TRUE(layer_session_has_backward("reference"));
  EXPECT_FALSE(layer_session_has_backward("fused-v2"));
}

TEST(LayerSession, AnUnknownImplementationIsNamedWithTheKnownOnes) {
  auto s = make_layer_session("fused-v2", small_shape(), {}, std::make_shared<FakeNcclExchange>());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("'fused-v2'"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("reference, megakernel"), std::string::npos) << s.status().message();
}

TEST(LayerSession, TheMegakernelRefusesAnExchangeThatIsNotLoopback) {
  auto s = make_layer_session("megakernel", small_shape(), {}, std::make_shared<FakeNcclExchange>());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), ErrorCode::kNotImplemented);
  EXPECT_NE(s.status().message().find("nccl"), std::string::npos) << s.status().message();
}

TEST(LayerSession, ANullExchangeIsAnError) {
  auto s = make_layer_session("reference", small_shape(), {}, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace detmoe
