// A second implementation of the oracle contract, token by token with plain loops and no
// blocking or threads. The oracle's GEMMs promise the same left-to-right fp64 sums, so both
// must agree bit for bit; a blocking or indexing bug in the fast path shows up as a mismatch.
#pragma once

#include "detmoe/oracle.h"

namespace detmoe::testing {

// Same inputs and outputs as run_oracle (inputs assumed valid).
OracleOutputs naive_oracle(const OracleInputs& in, OracleMode mode, GradPrecision grad_precision);

}  // namespace detmoe::testing
