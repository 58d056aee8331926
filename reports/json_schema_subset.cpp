#include "json_schema_subset.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

namespace detmoe::report {
namespace {

using nlohmann::json;

const std::set<std::string> kAnnotations = {"$schema", "$id", "title", "description", "$comment"};
const std::set<std::string> kTypeNames = {"null", "boolean", "object", "array", "number", "string", "integer"};

// A value as it appears in a message: short, one line.
std::string show(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

std::string json_type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "boolean";
    case json::value_t::object: return "object";
    case json::value_t::array: return "array";
    case json::value_t::string: return "string";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "integer";
    case json::value_t::number_float: return "number";
    default: return "unsupported value";
  }
}

bool has_type(const json& v, const std::string& type) {
  if (type == "null") return v.is_null();
  if (type == "boolean") return v.is_boolean();
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "number") return v.is_number();
  if (type == "integer") {
    if (v.is_number_integer()) return true;  // includes unsigned
    // JSON Schema counts 2.0 as an integer.
    if (v.is_number_float()) {
      const double d = v.get<double>();
      return std::isfinite(d) && std::floor(d) == d;
    }
  }
  return false;
}

Status schema_error(const std::string& where, const std::string& what) {
  return invalid_argument(fmt::format("run-report schema at {}: {}", where, what));
}

Status compile_node(const json& root, const json& node, const std::string& where);

Status compile_schema_map(const json& root, const json& map, const std::string& where) {
  if (!map.is_object()) return schema_error(where, "must be an object of schemas");
  for (const auto& [name, sub] : map.items()) DETMOE_RETURN_IF_ERROR(compile_node(root, sub, where + "/" + name));
  return Status::Ok();
}

Status compile_node(const json& root, const json& node, const std::string& where) {
  if (!node.is_object()) return schema_error(where, "a schema must be an object (boolean schemas are not supported)");
  for (const auto& [key, value] : node.items()) {
    const std::string at = where + "/" + key;
    if (kAnnotations.count(key)) continue;
    if (key == "type") {
      const json names = value.is_array() ? value : json::array({value});
      for (const json& n : names)
        if (!n.is_string() || !kTypeNames.count(n.get<std::string>()))
          return schema_error(at, fmt::format("{} is not a JSON Schema type name", show(n)));
    } else if (key == "const") {
    } else if (key == "enum") {
      if (!value.is_array() || value.empty()) return schema_error(at, "must be a non-empty array");
    } else if (key == "required") {
      if (!value.is_array()) return schema_error(at, "must be an array of property names");
      for (const json& n : value)
        if (!n.is_string()) return schema_error(at, fmt::format("{} is not a property name", show(n)));
    } else if (key == "properties" || key == "$defs") {
      DETMOE_RETURN_IF_ERROR(compile_schema_map(root, value, at));
    } else if (key == "additionalProperties") {
      if (!value.is_boolean()) return schema_error(at, "only true or false is supported");
    } else if (key == "items") {
      DETMOE_RETURN_IF_ERROR(compile_node(root, value, at));
    } else if (key == "minimum") {
      if (!value.is_number()) return schema_error(at, "must be a number");
    } else if (key == "$ref") {
      if (!value.is_string() || value.get<std::string>().rfind("#/", 0) != 0)
        return schema_error(at, "only local references \"#/...\" are supported");
      // Follow the chain of references: a cycle that never reaches a keyword with a value to
      // check would make validation loop forever.
      std::set<std::string> seen;
      for (std::string ref = value.get<std::string>();;) {
        const json::json_pointer ptr(ref.substr(1));
        if (!root.contains(ptr)) return schema_error(at, fmt::format("\"{}\" does not resolve", ref));
        if (!seen.insert(ref).second) return schema_error(at, fmt::format("\"{}\" is part of a reference cycle", ref));
        const json& target = root.at(ptr);
        if (!target.is_object() || !target.contains("$ref") || !target["$ref"].is_string()) break;
        ref = target["$ref"].get<std::string>();
        if (ref.rfind("#/", 0) != 0) break;  // reported when that node is compiled
      }
    } else {
      return schema_error(at, fmt::format("keyword \"{}\" is not implemented by the built-in validator", key));
    }
  }
  return Status::Ok();
}

class Walker {
 public:
  Walker(const json& root, std::size_t limit) : root_(root), limit_(limit) {}
  std::vector<SchemaViolation> out;

  void check(const json& schema, const json& v, const std::string& path) {
    if (full()) return;
    if (auto it = schema.find("$ref"); it != schema.end())
      check(root_.at(json::json_pointer(it->get<std::string>().substr(1))), v, path);
    if (auto it = schema.find("type"); it != schema.end()) {
      const json names = it->is_array() ? *it : json::array({*it});
      const bool ok = std::any_of(names.begin(), names.end(), [&](const json& n) { return has_type(v, n.get<std::string>()); });
      if (!ok) {
        std::vector<std::string> wanted;
        for (const json& n : names) wanted.push_back(n.get<std::string>());
        // Nothing below a wrong type is worth reporting: it would only repeat this.
        return add(path, fmt::format("expected {}, got {} {}", fmt::join(wanted, " or "), json_type_name(v), show(v)));
      }
    }
    if (auto it = schema.find("const"); it != schema.end() && v != *it)
      add(path, fmt::format("expected {}, got {}", show(*it), show(v)));
    if (auto it = schema.find("enum"); it != schema.end() && std::find(it->begin(), it->end(), v) == it->end()) {
      std::vector<std::string> allowed;
      for (const json& e : *it) allowed.push_back(show(e));
      add(path, fmt::format("{} is not one of {}", show(v), fmt::join(allowed, ", ")));
    }
    if (auto it = schema.find("minimum"); it != schema.end() && v.is_number() && v.get<double>() < it->get<double>())
      add(path, fmt::format("{} is below the minimum {}", show(v), show(*it)));
    if (v.is_object()) check_object(schema, v, path);
    if (auto it = schema.find("items"); it != schema.end() && v.is_array())
      for (std::size_t i = 0; i < v.size(); ++i) check(*it, v[i], index_path(path, i));
  }

 private:
  void check_object(const json& schema, const json& v, const std::string& path) {
    if (auto it = schema.find("required"); it != schema.end())
      for (const json& name : *it)
        if (!v.contains(name.get<std::string>())) add(child_path(path, name.get<std::string>()), "required property is missing");
    const auto props = schema.find("properties");
    for (const auto& [key, value] : v.items()) {
      if (props != schema.end() && props->contains(key)) {
        check(props->at(key), value, child_path(path, key));
      } else if (auto ap = schema.find("additionalProperties"); ap != schema.end() && *ap == false) {
        add(child_path(path, key), "property is not in the schema (misspelt, or written for a newer schema version)");
      }
    }
  }
  void add(const std::string& path, std::string message) {
    if (!full()) out.push_back({path, std::move(message)});
  }
  bool full() const { return out.size() >= limit_; }

  const json& root_;
  std::size_t limit_;
};

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

}  // namespace

std::string child_path(const std::string& parent, const std::string& property) {
  if (is_identifier(property)) return parent + "." + property;
  return parent + "[" + json(property).dump(-1, ' ', false, json::error_handler_t::replace) + "]";
}

std::string index_path(const std::string& parent, std::size_t index) { return fmt::format("{}[{}]", parent, index); }

StatusOr<JsonSchemaSubset> JsonSchemaSubset::compile(json schema) {
  try {
    DETMOE_RETURN_IF_ERROR(compile_node(schema, schema, "#"));
  } catch (const json::exception& e) {  // a malformed JSON pointer in a $ref
    return schema_error("#", e.what());
  }
  return JsonSchemaSubset(std::move(schema));
}

std::vector<SchemaViolation> JsonSchemaSubset::validate(const json& doc, std::size_t limit) const {
  Walker w(root_, limit);
  w.check(root_, doc, "$");
  return std::move(w.out);
}

}  // namespace detmoe::report
