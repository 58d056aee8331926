// The checked-in JSON Schema, the subset validator that interprets it, and the C++ model agree.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <set>
#include <sstream>

#include "detmoe/report.h"
#include "json_schema_subset.h"
#include "sample_report.h"

namespace detmoe::report {
namespace {

using nlohmann::json;

std::string read_source_file(const std::string& relative) {
  std::ifstream f(std::string(DETMOE_SOURCE_DIR) + "/" + relative, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(ReportSchema, CompiledInSchemaIsTheCheckedInFile) {
  const std::string file = read_source_file("reports/schema/run-v1.schema.json");
  ASSERT_FALSE(file.empty());
  EXPECT_EQ(run_schema_text(), file);
}

TEST(ReportSchema, CompilesAndNamesItsVersion) {
  const json schema = json::parse(run_schema_text());
  EXPECT_EQ(schema["properties"]["schema"]["const"], std::string(kRunSchemaId));
  EXPECT_TRUE(JsonSchemaSubset::compile(schema).ok());
}

// A keyword the validator does not implement must fail loudly, not be ignored.
TEST(ReportSchema, UnsupportedKeywordIsRejected) {
  const StatusOr<JsonSchemaSubset> s =
      JsonSchemaSubset::compile(json::parse(R"({"properties": {"sha": {"type": "string", "pattern": "^[0-9a-f]+$"}}})"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("#/properties/sha/pattern"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("\"pattern\" is not implemented"), std::string::npos) << s.status().message();
}

TEST(ReportSchema, BadReferencesAreRejected) {
  EXPECT_FALSE(JsonSchemaSubset::compile(json::parse(R"({"$ref": "#/$defs/nowhere"})")).ok());
  EXPECT_FALSE(JsonSchemaSubset::compile(json::parse(R"({"$ref": "http://example.com/x.json"})")).ok());
  const StatusOr<JsonSchemaSubset> cycle =
      JsonSchemaSubset::compile(json::parse(R"({"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}})"));
  ASSERT_FALSE(cycle.ok());
  EXPECT_NE(cycle.status().message().find("cycle"), std::string::npos) << cycle.status().message();
  EXPECT_FALSE(JsonSchemaSubset::compile(json::parse(R"({"additionalProperties": {"type": "string"}})")).ok());
  EXPECT_FALSE(JsonSchemaSubset::compile(json::parse(R"({"type": "float"})")).ok());
}

// The keywords behave as JSON Schema 2020-12 says, on a small schema of their own.
TEST(ReportSchema, SubsetSemantics) {
  const JsonSchemaSubset s = JsonSchemaSubset::compile(json::parse(R"({
      "type": "object", "required": ["n"],
      "properties": {"n": {"type": "integer", "minimum": 1}, "x": {"type": ["number", "null"]},
                     "c": {"const": "v1"}, "e": {"enum": [1, "one"]},
                     "a": {"type": "array", "items": {"$ref": "#/$defs/pos"}}},
      "$defs": {"pos": {"type": "number", "minimum": 0}}})"))
                                 .value();
  auto ok = [&](const char* doc) { return s.validate(json::parse(doc)).empty(); };
  EXPECT_TRUE(ok(R"({"n": 2})"));
  EXPECT_TRUE(ok(R"({"n": 2.0})")) << "2.0 is an integer in JSON Schema";
  EXPECT_FALSE(ok(R"({"n": 2.5})"));
  EXPECT_FALSE(ok(R"({"n": 0})"));
  EXPECT_FALSE(ok(R"({})"));
  EXPECT_TRUE(ok(R"({"n": 1, "x": null})"));
  EXPECT_TRUE(ok(R"({"n": 1, "x": 0.5})"));
  EXPECT_FALSE(ok(R"({"n": 1, "x": "0.5"})"));
  EXPECT_TRUE(ok(R"({"n": 1, "c": "v1"})"));
  EXPECT_FALSE(ok(R"({"n": 1, "c": "v2"})"));
  EXPECT_TRUE(ok(R"({"n": 1, "e": "one"})"));
  EXPECT_FALSE(ok(R"({"n": 1, "e": 2})"));
  EXPECT_TRUE(ok(R"({"n": 1, "a": [0, 1.5]})"));
  EXPECT_FALSE(ok(R"({"n": 1, "a": [0, -1]})"));
  EXPECT_TRUE(ok(R"({"n": 1, "other": true})")) << "additionalProperties defaults to allowed";
  const auto v = s.validate(json::parse(R"({"n": 1, "a": [0, -1]})"));
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].path, "$.a[1]");
}

// Walks the schema beside a document and records which declared properties the document used.
void collect_used(const json& root, const json& schema, const json& doc, const std::string& at, std::set<std::string>& declared,
                  std::set<std::string>& used) {
  const json& s = schema.contains("$ref") ? root.at(json::json_pointer(schema["$ref"].get<std::string>().substr(1))) : schema;
  const std::string where = schema.contains("$ref") ? schema["$ref"].get<std::string>() : at;
  if (s.contains("properties")) {
    for (const auto& [name, sub] : s["properties"].items()) {
      declared.insert(where + "/" + name);
      if (doc.is_object() && doc.contains(name)) {
        used.insert(where + "/" + name);
        collect_used(root, sub, doc[name], where + "/" + name, declared, used);
      }
    }
  }
  if (s.contains("items") && doc.is_array())
    for (const json& e : doc) collect_used(root, s["items"], e, where + "/items", declared, used);
}

// Every field the schema declares is written by the model (for the samples that fill it), so the
// schema has no field the C++ side forgot and the samples exercise all of them.
TEST(ReportSchema, ModelWritesEveryDeclaredField) {
  const json root = json::parse(run_schema_text());
  std::set<std::string> declared, used;
  collect_used(root, root, to_json(testing::full_sample()), "#", declared, used);
  collect_used(root, root, to_json(testing::empty_sample()), "#", declared, used);
  for (const std::string& d : declared) EXPECT_TRUE(used.count(d)) << d << " is declared in the schema but never written";
  EXPECT_GT(declared.size(), 50u);
}

TEST(ReportSchema, CheckedInExampleIsValid) {
  const StatusOr<RunReport> r = parse_run_report(read_source_file("reports/examples/sample-run.json"));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_FALSE(r->checks.empty());
  EXPECT_FALSE(r->benchmarks.empty());
  EXPECT_TRUE(r->bandwidth.has_value());
}

}  // namespace
}  // namespace detmoe::report
