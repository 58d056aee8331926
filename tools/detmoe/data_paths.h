// Where the CLI finds its data and helper programs, wherever the build or install lives.
//
// Nothing is compiled in as an absolute path of the build machine: a build folder copied to
// another machine, or installed with `cmake --install`, finds its data by looking
//   1. at $DETMOE_DATA_DIR, when set;
//   2. upwards from the folder of the running executable (a build folder inside a checkout);
//   3. at <exe>/../share/detmoe (the install layout);
//   4. upwards from the working directory (a moved build run from a checkout).
// The first folder holding golden/cases.json wins. Messages name the default and how it was
// found, so "cannot open" says which file was meant.
#pragma once

#include <string>

namespace detmoe::cli {

// The data root (a checkout, or share/detmoe of an install); empty when none was found.
const std::string& data_root();
// One line for messages: "<root> (from $DETMOE_DATA_DIR)" or "none found (…how to fix…)".
std::string data_root_description();
// data_root()/relative; when no root was found, `relative` itself (so a later "cannot open" names
// it), after one note on stderr saying where DetMoE looked and that DETMOE_DATA_DIR fixes it.
std::string data_path(const std::string& relative);
// The folder of the running executable.
std::string executable_dir();
// A helper program named relative to the build folder (e.g. "perf/detmoe_perf_layer"): beside
// the executable as built, or in an install's bin/ or libexec/detmoe/.
std::string helper_program(const std::string& relative);

}  // namespace detmoe::cli
