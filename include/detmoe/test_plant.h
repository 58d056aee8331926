// Planted changes for testing the harness itself: the gate, golden and bisect must catch a
// change of bits, so a test needs a way to make one without editing code. A plant is switched
// on by naming it in the environment variable DETMOE_TEST_PLANT (comma-separated); nothing is
// planted when it is unset, and every plant is listed here.
//   combine-reversed   the combine sums the k slots in reverse order, in fp32 (oracle and
//                      GPU reference): a different summation order, as a kernel change would be
//   megakernel-slowdown the megakernel runs on 90 % of the SMs: same bits (D1), 6-9 % slower on the
//                      H200 (measured on the four DESIGN.md shapes),
//                      as a performance regression would be (the gate's speed check must fail)
//   fuzz-mismatch      `detmoe fuzz` flips a bit of a rerun's first output for problems of more
//                      than 37 tokens: a nondeterminism its campaign must find, shrink and replay
#pragma once

namespace detmoe {

bool test_plant_enabled(const char* name);

}  // namespace detmoe
