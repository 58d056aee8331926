// Shared between the JSON layer and the file writer (not public API).
#pragma once

#include "detmoe/report.h"

namespace detmoe::report {

// Cross-field rules, then the schema, on the in-memory report; the Status lists the paths.
Status validate_before_write(const RunReport& report);

}  // namespace detmoe::report
