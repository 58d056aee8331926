// Input checks of run_oracle: shape, options, every buffer's size, finiteness, routing. Each
// message names the offending field and value.
#pragma once

#include "detmoe/oracle.h"
#include "detmoe/status.h"

namespace detmoe::oracle_detail {

Status validate_oracle_inputs(const OracleInputs& in, const OracleOptions& options);

}  // namespace detmoe::oracle_detail
