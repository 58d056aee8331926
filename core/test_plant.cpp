#include "detmoe/test_plant.h"

#include <cstdlib>
#include <string>

namespace detmoe {

bool test_plant_enabled(const char* name) {
  const char* env = std::getenv("DETMOE_TEST_PLANT");
  if (env == nullptr) return false;
  const std::string list = std::string(",") + env + ",";
  return list.find(std::string(",") + name + ",") != std::string::npos;
}

}  // namespace detmoe
