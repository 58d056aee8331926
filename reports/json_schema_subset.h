// A validator for the part of JSON Schema (2020-12) that the run-report schema uses:
// type, const, enum, required, properties, additionalProperties (true/false), items, minimum,
// $ref to "#/$defs/...", plus the annotations ($schema, $id, title, description, $comment).
// compile() rejects any other keyword, so the schema can never use one that would be silently
// ignored here and the checked-in schema means exactly what this code checks.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <vector>

#include "detmoe/report.h"
#include "detmoe/status.h"

namespace detmoe::report {

class JsonSchemaSubset {
 public:
  // Checks every keyword is supported and every $ref resolves; the Status names the schema path.
  static StatusOr<JsonSchemaSubset> compile(nlohmann::json schema);
  // Violations in document order, at most `limit`.
  std::vector<SchemaViolation> validate(const nlohmann::json& doc, std::size_t limit = 50) const;

 private:
  explicit JsonSchemaSubset(nlohmann::json schema) : root_(std::move(schema)) {}
  nlohmann::json root_;
};

// "$" + ".name" or "[3]"; names that are not identifiers are quoted: $["a b"].
std::string child_path(const std::string& parent, const std::string& property);
std::string index_path(const std::string& parent, std::size_t index);

}  // namespace detmoe::report
