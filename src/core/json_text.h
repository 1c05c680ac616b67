// JSON read from untrusted bytes, and JSON turned into text for people.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace qemb {

// Why parse_json_strict refused its input.
struct JsonProblem {
  enum class Kind { kNone, kSyntax, kTooDeep, kDuplicateKey };
  Kind kind = Kind::kNone;
  std::string detail;  // kSyntax: the parser's message; kDuplicateKey: the key
  int depth = 0;       // kDuplicateKey: 1 for a key of the outermost object
};

// Parses `text`, refusing what nlohmann would accept silently or die on: an
// object that repeats a key (nlohmann keeps the last one) and nesting deeper
// than `max_depth` containers (printing or comparing such a value recurses
// once per level and overflows the stack). On a problem, returns a discarded
// value and fills `problem`.
nlohmann::json parse_json_strict(std::string_view text, int max_depth, JsonProblem& problem);

// dump() that never throws: bytes that are not UTF-8 become U+FFFD.
std::string json_text(const nlohmann::json& j, int indent = -1);

// A value as it may appear in an error message: scalars and flat arrays or
// objects as JSON, cut at about 60 characters; anything nested by its type.
std::string json_brief(const nlohmann::json& j);

}  // namespace qemb
