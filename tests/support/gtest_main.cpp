// GoogleTest main shared by every test binary. It gives rapidcheck a per-binary default run
// count (DETMOE_RC_DEFAULT, set by CTest) unless the caller already set RC_PARAMS.
#include <gtest/gtest.h>

#include <cstdlib>

int main(int argc, char** argv) {
  const char* user = std::getenv("RC_PARAMS");
  const char* fallback = std::getenv("DETMOE_RC_DEFAULT");
  if ((user == nullptr || *user == '\0') && fallback != nullptr) setenv("RC_PARAMS", fallback, 1);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
