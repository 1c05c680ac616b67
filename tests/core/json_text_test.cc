// JSON from untrusted bytes (duplicate keys, nesting depth) and text made safe
// for messages and terminals.
#include <gtest/gtest.h>

#include <string>

#include "core/json_text.h"
#include "core/strings.h"

namespace qemb {
namespace {

using nlohmann::json;

JsonProblem parse(const std::string& text, int depth = 8) {
  JsonProblem p;
  (void)parse_json_strict(text, depth, p);
  return p;
}

TEST(ParseJsonStrict, AcceptsOrdinaryJson) {
  JsonProblem p;
  json j = parse_json_strict(R"({"a":[1,{"b":"c"}],"d":{"a":2}})", 8, p);
  EXPECT_EQ(p.kind, JsonProblem::Kind::kNone);
  EXPECT_EQ(j["a"][1]["b"], "c");
  EXPECT_EQ(j["d"]["a"], 2);  // the same key in different objects is fine
}

TEST(ParseJsonStrict, RefusesARepeatedKeyAndSaysWhere) {
  JsonProblem p = parse(R"({"a":1,"b":{"x":1,"x":2}})");
  EXPECT_EQ(p.kind, JsonProblem::Kind::kDuplicateKey);
  EXPECT_EQ(p.detail, "x");
  EXPECT_EQ(p.depth, 2);
  p = parse(R"({"t":1,"t":1})");
  EXPECT_EQ(p.kind, JsonProblem::Kind::kDuplicateKey);
  EXPECT_EQ(p.depth, 1);
  // Keys of objects inside arrays are tracked per object.
  EXPECT_EQ(parse(R"([{"k":1},{"k":2}])").kind, JsonProblem::Kind::kNone);
  EXPECT_EQ(parse(R"([{"k":1,"k":2}])").kind, JsonProblem::Kind::kDuplicateKey);
}

TEST(ParseJsonStrict, RefusesNestingPastTheLimitWithoutRecursing) {
  EXPECT_EQ(parse("[[[[[[[[1]]]]]]]]", 8).kind, JsonProblem::Kind::kNone);
  EXPECT_EQ(parse("[[[[[[[[[1]]]]]]]]]", 8).kind, JsonProblem::Kind::kTooDeep);
  // 100k levels: a recursive dump or destructor of this overflowed the stack.
  const std::string deep = "{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_EQ(parse(deep, 16).kind, JsonProblem::Kind::kTooDeep);
}

TEST(ParseJsonStrict, ReportsSyntaxErrors) {
  JsonProblem p = parse("{\"a\":");
  EXPECT_EQ(p.kind, JsonProblem::Kind::kSyntax);
  EXPECT_NE(p.detail.find("parse error"), std::string::npos) << p.detail;
  EXPECT_EQ(parse("{\"a\xff\":1}").kind, JsonProblem::Kind::kSyntax);
}

TEST(JsonText, NeverThrowsOnBytesThatAreNotUtf8) {
  json j = {{"name", "a\xff" "b"}};
  EXPECT_EQ(json_text(j), "{\"name\":\"a\xef\xbf\xbd" "b\"}");
}

TEST(JsonBrief, ShowsFlatValuesAndNamesNestedOnes) {
  EXPECT_EQ(json_brief(json(-40)), "-40");
  EXPECT_EQ(json_brief(json::parse("[1,2,3]")), "[1,2,3]");
  EXPECT_EQ(json_brief(json::parse("[1,[2]]")), "a nested array");
  EXPECT_EQ(json_brief(json::parse("{\"a\":{}}")), "a nested object");
  EXPECT_EQ(json_brief(json(std::string(100, 'x'))), "\"" + std::string(59, 'x') + "...");
}

TEST(EscapeHtml, EscapesWhatEndsAnElementOrAQuotedAttribute) {
  EXPECT_EQ(escape_html("a<b>&\"c'd \xc3\xbc"), "a&lt;b&gt;&amp;&quot;c&#39;d \xc3\xbc");
  EXPECT_EQ(escape_html(""), "");
}

TEST(EscapeControl, EscapesWhatCouldDriveATerminal) {
  EXPECT_EQ(escape_control("plain ok \xc3\xbc"), "plain ok \xc3\xbc");
  EXPECT_EQ(escape_control("a\x1b[2Jb\rc\nd\te\x7f"), "a\\x1b[2Jb\\rc\\nd\\te\\x7f");
  EXPECT_EQ(escape_control(std::string("nul\0x", 5)), "nul\\x00x");
  EXPECT_EQ(escape_control("csi\xc2\x9b" "1m"), "csi\\xc2\\x9b1m");  // C1 CSI in UTF-8
  EXPECT_EQ(escape_control("nbsp\xc2\xa0"), "nbsp\xc2\xa0");
}

}  // namespace
}  // namespace qemb
