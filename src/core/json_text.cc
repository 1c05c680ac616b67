#include "core/json_text.h"

#include <exception>
#include <set>
#include <vector>

namespace qemb {
namespace {

struct StopParse final : std::exception {};

}  // namespace

nlohmann::json parse_json_strict(std::string_view text, int max_depth, JsonProblem& problem) {
  using json = nlohmann::json;
  problem = JsonProblem{};
  std::vector<std::set<std::string>> keys;  // one set per open object
  json::parser_callback_t on_event = [&](int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        // `depth` counts the containers already open around this one.
        if (depth >= max_depth) {
          problem.kind = JsonProblem::Kind::kTooDeep;
          throw StopParse();
        }
        if (event == json::parse_event_t::object_start) keys.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!keys.empty()) keys.pop_back();
        break;
      case json::parse_event_t::key:
        if (!keys.empty() && parsed.is_string() && !keys.back().insert(parsed.get<std::string>()).second) {
          problem.kind = JsonProblem::Kind::kDuplicateKey;
          problem.detail = parsed.get<std::string>();
          problem.depth = depth;
          throw StopParse();
        }
        break;
      default:
        break;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), on_event, /*allow_exceptions=*/true);
  } catch (const StopParse&) {
  } catch (const json::exception& e) {
    problem.kind = JsonProblem::Kind::kSyntax;
    problem.detail = e.what();
  }
  return json(json::value_t::discarded);
}

std::string json_text(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

std::string json_brief(const nlohmann::json& j) {
  constexpr size_t kMax = 60;
  if (j.is_structured()) {
    for (const auto& e : j) {
      if (e.is_structured()) return j.is_array() ? "a nested array" : "a nested object";
    }
  }
  std::string s = json_text(j);
  if (s.size() > kMax) s = s.substr(0, kMax) + "...";
  return s;
}

}  // namespace qemb
