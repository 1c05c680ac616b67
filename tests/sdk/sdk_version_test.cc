// SDK version parsing, ordering, and reading the target's version from
// QNN_SDK_ROOT (docs/numeric-contract.md, "SDK version gating").
#include "qemb/sdk_version.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace qemb {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr const char* kHowToFixRoot =
    "set QNN_SDK_ROOT to the unpacked QNN/QAIRT SDK folder (e.g. "
    "/opt/qcom/aistack/qairt/2.43.0.260128) or give the target SDK version "
    "explicitly";

SdkVersion V(const std::string& text) {
  Result<SdkVersion> parsed = SdkVersion::parse(text);
  EXPECT_TRUE(parsed.ok()) << text << ": " << parsed.error().message;
  return parsed.ok() ? parsed.value() : SdkVersion::from_parts({0, 0}).value();
}

// ---------------------------------------------------------------------------
// Valid versions against the optimized-pattern threshold (2.48; that the
// lowering gates on it is tested with the lowering).

enum class VsMin { kLess, kEqual, kGreater };

struct ValidCase {
  const char* text;
  std::vector<uint64_t> parts;
  const char* printed;
  VsMin vs_min;
};

class ValidVersionTest : public ::testing::TestWithParam<ValidCase> {};

TEST_P(ValidVersionTest, ParsesAndComparesWithOptimizedMinimum) {
  const ValidCase& c = GetParam();
  Result<SdkVersion> parsed = SdkVersion::parse(c.text);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed->parts(), c.parts);
  EXPECT_EQ(parsed->to_string(), c.printed);

  const SdkVersion min = SdkVersion::from_parts({2, 48}).value();
  const std::strong_ordering expected = c.vs_min == VsMin::kLess    ? std::strong_ordering::less
                                        : c.vs_min == VsMin::kEqual ? std::strong_ordering::equal
                                                                    : std::strong_ordering::greater;
  EXPECT_EQ(*parsed <=> min, expected);
  EXPECT_EQ(*parsed >= min, c.vs_min != VsMin::kLess) << "supports the optimized pattern";
  EXPECT_EQ(*parsed == min, c.vs_min == VsMin::kEqual);
}

INSTANTIATE_TEST_SUITE_P(
    Table, ValidVersionTest,
    ::testing::Values(ValidCase{"2.37", {2, 37}, "2.37", VsMin::kLess},
                      ValidCase{"2.47.9", {2, 47, 9}, "2.47.9", VsMin::kLess},
                      ValidCase{"2.48", {2, 48}, "2.48", VsMin::kEqual},
                      ValidCase{"2.48.0", {2, 48, 0}, "2.48.0", VsMin::kEqual},
                      ValidCase{"v2.48.0.260715", {2, 48, 0, 260715}, "2.48.0.260715",
                                VsMin::kGreater},
                      // The public helper compared minors within one major only; 3.0 < 2.48 there.
                      ValidCase{"3.0", {3, 0}, "3.0", VsMin::kGreater},
                      ValidCase{"v2.37.0.250724", {2, 37, 0, 250724}, "2.37.0.250724",
                                VsMin::kLess},
                      ValidCase{"V2.43.0.260128", {2, 43, 0, 260128}, "2.43.0.260128",
                                VsMin::kLess},
                      ValidCase{"2.049", {2, 49}, "2.49", VsMin::kGreater},
                      ValidCase{"0.0", {0, 0}, "0.0", VsMin::kLess},
                      ValidCase{"18446744073709551615.0", {18446744073709551615ull, 0},
                                "18446744073709551615.0", VsMin::kGreater}));

// ---------------------------------------------------------------------------
// Text that is not a version.

struct BadCase {
  const char* text;
  const char* message_part;
};

class BadVersionTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadVersionTest, IsVersionErrorQuotingTextAndExpectedForm) {
  const BadCase& c = GetParam();
  Result<SdkVersion> parsed = SdkVersion::parse(c.text);
  ASSERT_FALSE(parsed.ok()) << c.text << " parsed as " << parsed.value();
  EXPECT_EQ(parsed.error().code, ErrorCode::kVersionError);
  EXPECT_THAT(parsed.error().message, HasSubstr(c.message_part));
  EXPECT_THAT(parsed.error().message,
              HasSubstr("expected MAJOR.MINOR[.PATCH[.BUILD]] with decimal parts, e.g. 2.48 or "
                        "v2.37.0.250724"));
}

INSTANTIATE_TEST_SUITE_P(
    Table, BadVersionTest,
    ::testing::Values(
        BadCase{"", "invalid SDK version \"\": the text is empty"},
        BadCase{"2", "invalid SDK version \"2\": it has 1 part, not 2 to 4"},
        BadCase{"2.", "invalid SDK version \"2.\": part 2 is empty"},
        BadCase{"abc", "invalid SDK version \"abc\": it has 1 part, not 2 to 4"},
        BadCase{"2.x", "invalid SDK version \"2.x\": part 2 \"x\" is not a decimal number"},
        BadCase{"1.2.3.4.5", "invalid SDK version \"1.2.3.4.5\": it has 5 parts, not 2 to 4"},
        BadCase{"-1.2", "invalid SDK version \"-1.2\": part 1 \"-1\" is not a decimal number"},
        BadCase{"+1.2", "part 1 \"+1\" is not a decimal number"},
        BadCase{"2..3", "invalid SDK version \"2..3\": part 2 is empty"},
        BadCase{".2.3", "part 1 is empty"},
        BadCase{" 2.4", "invalid SDK version \" 2.4\": it has leading or trailing whitespace"},
        BadCase{"2.4\n", "invalid SDK version \"2.4\\n\": it has leading or trailing whitespace"},
        BadCase{"99999999999999999999999.1",
                "invalid SDK version \"99999999999999999999999.1\": part 1 "
                "\"99999999999999999999999\" does not fit in 64 bits"},
        BadCase{"2.18446744073709551616", "part 2 \"18446744073709551616\" does not fit in 64 bits"},
        BadCase{"v", "invalid SDK version \"v\": nothing follows the 'v'"},
        BadCase{"vv2.48", "part 1 \"v2\" is not a decimal number"},
        BadCase{"2.48-rc1", "part 2 \"48-rc1\" is not a decimal number"},
        BadCase{"2,48", "it has 1 part, not 2 to 4"},
        BadCase{"2.4 8", "part 2 \"4 8\" is not a decimal number"}));

TEST(SdkVersionTest, MessageEscapesControlBytesAndCutsLongText) {
  Result<SdkVersion> with_nul = SdkVersion::parse(std::string("2.\x01", 3));
  ASSERT_FALSE(with_nul.ok());
  EXPECT_THAT(with_nul.error().message, HasSubstr("part 2 \"\\x01\" is not a decimal number"));

  Result<SdkVersion> long_text = SdkVersion::parse("2." + std::string(500, 'a'));
  ASSERT_FALSE(long_text.ok());
  EXPECT_THAT(long_text.error().message,
              HasSubstr("invalid SDK version \"2." + std::string(98, 'a') + "...\""));
  EXPECT_LT(long_text.error().message.size(), 400u);
}

TEST(SdkVersionTest, FromPartsChecksCount) {
  Result<SdkVersion> ok = SdkVersion::from_parts({2, 48, 0, 260715});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->to_string(), "2.48.0.260715");

  for (const std::vector<uint64_t>& bad : {std::vector<uint64_t>{}, std::vector<uint64_t>{2},
                                           std::vector<uint64_t>{1, 2, 3, 4, 5}}) {
    Result<SdkVersion> r = SdkVersion::from_parts(bad);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::kVersionError);
    EXPECT_THAT(r.error().message,
                HasSubstr("an SDK version needs 2 to 4 parts, got " + std::to_string(bad.size())));
  }
}

// ---------------------------------------------------------------------------
// Ordering and equality over whole tuples, missing parts = 0.

struct OrderCase {
  const char* a;
  const char* b;
  int expected;  // sign of a <=> b
};

class OrderingTest : public ::testing::TestWithParam<OrderCase> {};

TEST_P(OrderingTest, ComparesWholeTuple) {
  const OrderCase& c = GetParam();
  const SdkVersion a = V(c.a);
  const SdkVersion b = V(c.b);
  const std::strong_ordering forward = a <=> b;
  const std::strong_ordering backward = b <=> a;
  EXPECT_EQ(forward < 0, c.expected < 0) << c.a << " vs " << c.b;
  EXPECT_EQ(forward == 0, c.expected == 0) << c.a << " vs " << c.b;
  EXPECT_EQ(forward > 0, c.expected > 0) << c.a << " vs " << c.b;
  EXPECT_EQ(backward > 0, c.expected < 0) << "antisymmetric";
  EXPECT_EQ(a == b, c.expected == 0);
  EXPECT_EQ(a != b, c.expected != 0);
}

INSTANTIATE_TEST_SUITE_P(Table, OrderingTest,
                         ::testing::Values(OrderCase{"3.0", "2.48", 1},
                                           OrderCase{"2.48", "2.48.0", 0},
                                           OrderCase{"2.48", "v2.48.0.0", 0},
                                           OrderCase{"2.47.9", "2.48", -1},
                                           OrderCase{"2.48.0.260715", "2.48", 1},
                                           OrderCase{"2.9", "2.10", -1},  // numeric, not text
                                           OrderCase{"2.37.0.250724", "2.37.1", -1},
                                           OrderCase{"2.43.0.260128", "2.43.0.250724", 1},
                                           OrderCase{"10.0", "9.99.99.99", 1},
                                           OrderCase{"V3.1", "v3.1", 0}));

// ---------------------------------------------------------------------------
// Reading the build id from a QNN_SDK_ROOT folder.

class SdkRootTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    // Parameterized names contain '/'; keep one flat, unique folder per test.
    std::string unique = std::string(info->test_suite_name()) + "_" + info->name();
    for (char& c : unique) {
      if (c == '/') c = '_';
    }
    base_ = fs::path(::testing::TempDir()) /
            ("qemb_sdk_version_" + std::to_string(::getpid()) + "_" + unique);
    std::error_code ec;
    fs::remove_all(base_, ec);
    ASSERT_TRUE(fs::create_directories(base_, ec)) << base_ << ": " << ec.message();
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(base_, ec);
  }

  // Creates base_/relative (and its parents) and returns its path.
  std::string MakeDir(const std::string& relative) {
    const fs::path dir = base_ / relative;
    std::error_code ec;
    fs::create_directories(dir, ec);
    EXPECT_FALSE(ec) << dir << ": " << ec.message();
    return dir.string();
  }
  static void WriteFile(const std::string& path, const std::string& contents) {
    std::ofstream out(path, std::ios::binary);
    out << contents;
    ASSERT_TRUE(out.good()) << path;
  }
  // A folder that is not a version by name, holding sdk.yaml with `contents`.
  std::string MakeSdkWithYaml(const std::string& contents) {
    const std::string root = MakeDir("sdk");
    WriteFile(root + "/sdk.yaml", contents);
    return root;
  }

  fs::path base_;
};

TEST_F(SdkRootTest, UnsetIsErrorSayingWhatToDo) {
  Result<SdkVersion> r = read_sdk_build_id_from_root(nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kVersionError);
  EXPECT_EQ(r.error().message,
            std::string("QNN_SDK_ROOT is not set, so the QNN SDK build id cannot be read; ") +
                kHowToFixRoot);
}

TEST_F(SdkRootTest, EmptyIsError) {
  Result<SdkVersion> r = read_sdk_build_id_from_root("");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kVersionError);
  EXPECT_EQ(r.error().message,
            std::string("QNN_SDK_ROOT is set but empty, so the QNN SDK build id cannot be read; ") +
                kHowToFixRoot);
}

TEST_F(SdkRootTest, MissingFolderIsErrorNamingPath) {
  const std::string missing = (base_ / "no" / "such" / "2.43.0.260128").string();
  Result<SdkVersion> r = read_sdk_build_id_from_root(missing.c_str());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kVersionError);
  EXPECT_EQ(r.error().message,
            "QNN_SDK_ROOT is \"" + missing + "\", which does not exist; " + kHowToFixRoot);
}

TEST_F(SdkRootTest, FileInsteadOfFolderIsError) {
  const std::string file = (base_ / "2.43.0.260128").string();
  WriteFile(file, "not a folder");
  Result<SdkVersion> r = read_sdk_build_id_from_root(file.c_str());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kVersionError);
  EXPECT_EQ(r.error().message,
            "QNN_SDK_ROOT is \"" + file + "\", which is not a directory; " + kHowToFixRoot);
}

TEST_F(SdkRootTest, SdkYamlVersionLine) {
  const std::string root = MakeSdkWithYaml("version: 2.43.0.260128\n");
  Result<SdkVersion> r = read_sdk_build_id_from_root(root.c_str());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->to_string(), "2.43.0.260128");
}

struct YamlCase {
  const char* name;
  const char* yaml;
  const char* version;
};

class SdkYamlFormsTest : public SdkRootTest, public ::testing::WithParamInterface<YamlCase> {};

TEST_P(SdkYamlFormsTest, ReadsVersionLine) {
  const std::string root = MakeSdkWithYaml(GetParam().yaml);
  Result<TargetVersion> target = discover_target_version_from("", root.c_str());
  ASSERT_TRUE(target.ok()) << target.error().message;
  ASSERT_TRUE(target->version.has_value()) << target->unknown_reason;
  EXPECT_EQ(target->version->to_string(), GetParam().version);
  EXPECT_EQ(target->source, "QNN_SDK_ROOT sdk.yaml (" + root + "/sdk.yaml)");
  EXPECT_EQ(target->unknown_reason, "");
}

INSTANTIATE_TEST_SUITE_P(
    Forms, SdkYamlFormsTest,
    ::testing::Values(
        YamlCase{"Plain", "version: 2.43.0.260128\n", "2.43.0.260128"},
        YamlCase{"DoubleQuoted", "version: \"2.43.0.260128\"\n", "2.43.0.260128"},
        YamlCase{"SingleQuoted", "version: '2.43.0.260128'\n", "2.43.0.260128"},
        YamlCase{"QuotedWithComment", "version: \"v2.43.0.260128\"   # release\n",
                 "2.43.0.260128"},
        YamlCase{"TrailingComment", "version: 2.43.0.260128 # QAIRT release\n", "2.43.0.260128"},
        YamlCase{"ExtraSpaces", "version   :    2.43.0.260128   \n", "2.43.0.260128"},
        YamlCase{"Tabs", "version:\t2.43.0.260128\t\n", "2.43.0.260128"},
        YamlCase{"CrLfAndNoFinalNewline", "name: qairt\r\nversion: 2.43.0.260128", "2.43.0.260128"},
        YamlCase{"Bom", "\xEF\xBB\xBFversion: 2.43.0.260128\n", "2.43.0.260128"},
        YamlCase{"OtherKeysFirst",
                 "# QAIRT SDK\n---\nname: \"Qualcomm AI Runtime SDK\"\nversion_name: 9.9\n"
                 "dependencies:\n  version: 1.0\n  tool:\n    version: 7.7\n"
                 "version: 2.43.0.260128\nrelease_date: 2026-01-28\n",
                 "2.43.0.260128"},
        YamlCase{"FirstTopLevelWins", "version: 2.44.0.1\nversion: 2.43.0.260128\n", "2.44.0.1"}),
    [](const ::testing::TestParamInfo<YamlCase>& info) { return std::string(info.param.name); });

TEST_F(SdkRootTest, SdkYamlWinsOverFolderName) {
  const std::string root = MakeDir("qairt/2.37.0.250724");
  WriteFile(root + "/sdk.yaml", "version: 2.43.0.260128\n");
  Result<SdkVersion> r = read_sdk_build_id_from_root(root.c_str());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->to_string(), "2.43.0.260128");
}

TEST_F(SdkRootTest, FolderNameWhenNoSdkYaml) {
  const std::string root = MakeDir("qairt/2.43.0.260128");
  Result<TargetVersion> target = discover_target_version_from("", root.c_str());
  ASSERT_TRUE(target.ok());
  ASSERT_TRUE(target->version.has_value()) << target->unknown_reason;
  EXPECT_EQ(target->version->to_string(), "2.43.0.260128");
  EXPECT_EQ(target->source, "QNN_SDK_ROOT folder name (" + root + ")");
}

TEST_F(SdkRootTest, FolderNameWithTrailingSlashes) {
  const std::string root = MakeDir("qairt/v2.43.0.260128");
  const std::string with_slashes = root + "//";
  Result<TargetVersion> target = discover_target_version_from("", with_slashes.c_str());
  ASSERT_TRUE(target.ok());
  ASSERT_TRUE(target->version.has_value()) << target->unknown_reason;
  EXPECT_EQ(target->version->to_string(), "2.43.0.260128");
  EXPECT_EQ(target->source, "QNN_SDK_ROOT folder name (" + root + ")");
}

TEST_F(SdkRootTest, FolderNameWhenSdkYamlHasNoVersionLine) {
  const std::string root = MakeDir("qairt/2.43.0.260128");
  WriteFile(root + "/sdk.yaml", "name: qairt\n  version: 1.0\n");
  Result<SdkVersion> r = read_sdk_build_id_from_root(root.c_str());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->to_string(), "2.43.0.260128");
}

TEST_F(SdkRootTest, SymlinkFollowedToVersionedFolder) {
  const std::string real = MakeDir("qairt/2.43.0.260128");
  const fs::path link = base_ / "qairt" / "latest";
  std::error_code ec;
  fs::create_directory_symlink(real, link, ec);
  ASSERT_FALSE(ec) << ec.message();
  Result<TargetVersion> target = discover_target_version_from("", link.c_str());
  ASSERT_TRUE(target.ok());
  ASSERT_TRUE(target->version.has_value()) << target->unknown_reason;
  EXPECT_EQ(target->version->to_string(), "2.43.0.260128");
  EXPECT_EQ(target->source,
            "QNN_SDK_ROOT folder name (" + fs::canonical(real).string() + ")");
}

TEST_F(SdkRootTest, NeitherSdkYamlNorVersionedNameIsError) {
  const std::string root = MakeDir("qairt/latest-sdk");
  Result<SdkVersion> r = read_sdk_build_id_from_root(root.c_str());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kVersionError);
  EXPECT_EQ(r.error().message,
            "QNN_SDK_ROOT is \"" + root + "\", but no SDK build id was found there: " + root +
                "/sdk.yaml does not exist and the folder name \"latest-sdk\" is not a version "
                "like 2.43.0.260128; " + kHowToFixRoot);
}

TEST_F(SdkRootTest, SdkYamlWithoutVersionAndUnversionedNameIsError) {
  const std::string root = MakeSdkWithYaml("name: qairt\nversions:\n  - 2.43\n");
  Result<SdkVersion> r = read_sdk_build_id_from_root(root.c_str());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kVersionError);
  EXPECT_EQ(r.error().message,
            "QNN_SDK_ROOT is \"" + root + "\", but no SDK build id was found there: " + root +
                "/sdk.yaml has no top-level \"version:\" line and the folder name \"sdk\" is not "
                "a version like 2.43.0.260128; " + kHowToFixRoot);
}

TEST_F(SdkRootTest, GarbageSdkYamlVersionIsErrorEvenWithVersionedName) {
  // The file is the more specific source; a broken one is reported, not skipped.
  const std::string root = MakeDir("qairt/2.43.0.260128");
  WriteFile(root + "/sdk.yaml", "name: qairt\nversion: two.forty # bad\n");
  Result<SdkVersion> r = read_sdk_build_id_from_root(root.c_str());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kVersionError);
  EXPECT_EQ(r.error().message,
            "QNN_SDK_ROOT is \"" + root + "\", but line 2 of " + root +
                "/sdk.yaml (\"version: two.forty # bad\") does not hold a valid version: invalid "
                "SDK version \"two.forty\": part 1 \"two\" is not a decimal number; expected "
                "MAJOR.MINOR[.PATCH[.BUILD]] with decimal parts, e.g. 2.48 or v2.37.0.250724; "
                "fix that line or give the target SDK version explicitly");
}

TEST_F(SdkRootTest, EmptyOrUnterminatedSdkYamlVersionIsError) {
  for (const char* yaml : {"version:\n", "version: # none\n", "version: \"2.43.0.260128\n",
                           "version: \"2.43\" trailing\n"}) {
    const std::string root = MakeSdkWithYaml(yaml);
    Result<SdkVersion> r = read_sdk_build_id_from_root(root.c_str());
    ASSERT_FALSE(r.ok()) << yaml;
    EXPECT_EQ(r.error().code, ErrorCode::kVersionError);
    EXPECT_THAT(r.error().message, HasSubstr("but line 1 of " + root + "/sdk.yaml")) << yaml;
    EXPECT_THAT(r.error().message, HasSubstr("does not hold a valid version")) << yaml;
  }
}

TEST_F(SdkRootTest, SdkYamlThatIsAFolderIsError) {
  const std::string root = MakeDir("qairt/2.43.0.260128");
  MakeDir("qairt/2.43.0.260128/sdk.yaml");
  Result<SdkVersion> r = read_sdk_build_id_from_root(root.c_str());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kVersionError);
  EXPECT_EQ(r.error().message, "QNN_SDK_ROOT is \"" + root + "\", but " + root +
                                   "/sdk.yaml cannot be read (not a regular file); fix or remove "
                                   "it, or give the target SDK version explicitly");
}

// ---------------------------------------------------------------------------
// Target discovery: explicit wins; a broken QNN_SDK_ROOT means "unknown", not failure.

TEST_F(SdkRootTest, ExplicitVersionWinsOverSdkRoot) {
  const std::string root = MakeDir("qairt/2.37.0.250724");
  Result<TargetVersion> target = discover_target_version_from("v2.48.0.260715", root.c_str());
  ASSERT_TRUE(target.ok());
  ASSERT_TRUE(target->version.has_value());
  EXPECT_EQ(target->version->to_string(), "2.48.0.260715");
  EXPECT_EQ(target->source, "explicit");
  EXPECT_EQ(target->unknown_reason, "");
}

TEST_F(SdkRootTest, BadExplicitVersionIsErrorEvenWithGoodSdkRoot) {
  const std::string root = MakeDir("qairt/2.43.0.260128");
  Result<TargetVersion> target = discover_target_version_from("2.x", root.c_str());
  ASSERT_FALSE(target.ok());
  EXPECT_EQ(target.error().code, ErrorCode::kVersionError);
  EXPECT_EQ(target.error().message,
            "target SDK version (qnn_sdk_version): invalid SDK version \"2.x\": part 2 \"x\" is "
            "not a decimal number; expected MAJOR.MINOR[.PATCH[.BUILD]] with decimal parts, e.g. "
            "2.48 or v2.37.0.250724");
}

TEST_F(SdkRootTest, UnreadableSdkRootMeansUnknownWithReason) {
  const std::string missing = (base_ / "gone").string();
  struct Case {
    const char* root;
    std::string reason_part;
  };
  for (const Case& c :
       {Case{nullptr, "QNN_SDK_ROOT is not set"}, Case{"", "QNN_SDK_ROOT is set but empty"},
        Case{missing.c_str(), "QNN_SDK_ROOT is \"" + missing + "\", which does not exist"}}) {
    Result<TargetVersion> target = discover_target_version_from("", c.root);
    ASSERT_TRUE(target.ok()) << target.error().message;
    EXPECT_FALSE(target->version.has_value());
    EXPECT_EQ(target->source, "unknown");
    EXPECT_THAT(target->unknown_reason, HasSubstr(c.reason_part));
    EXPECT_THAT(target->unknown_reason, HasSubstr("give the target SDK version explicitly"));
  }
}

TEST_F(SdkRootTest, GarbageSdkYamlMeansUnknownWithReason) {
  const std::string root = MakeSdkWithYaml("version: latest\n");
  Result<TargetVersion> target = discover_target_version_from("", root.c_str());
  ASSERT_TRUE(target.ok());
  EXPECT_FALSE(target->version.has_value());
  EXPECT_EQ(target->source, "unknown");
  EXPECT_THAT(target->unknown_reason,
              HasSubstr("but line 1 of " + root + "/sdk.yaml (\"version: latest\")"));
}

// ---------------------------------------------------------------------------
// The entry points that read the real environment variable.

class SdkRootEnvTest : public SdkRootTest {
 protected:
  void SetUp() override {
    SdkRootTest::SetUp();
    if (const char* old = std::getenv("QNN_SDK_ROOT")) saved_ = old;
  }
  void TearDown() override {
    if (saved_) {
      ::setenv("QNN_SDK_ROOT", saved_->c_str(), 1);
    } else {
      ::unsetenv("QNN_SDK_ROOT");
    }
    SdkRootTest::TearDown();
  }
  std::optional<std::string> saved_;
};

TEST_F(SdkRootEnvTest, ReadsVariable) {
  const std::string root = MakeDir("qairt/2.43.0.260128");
  ASSERT_EQ(::setenv("QNN_SDK_ROOT", root.c_str(), 1), 0);
  Result<SdkVersion> id = read_sdk_build_id();
  ASSERT_TRUE(id.ok()) << id.error().message;
  EXPECT_EQ(id->to_string(), "2.43.0.260128");

  Result<TargetVersion> target = discover_target_version("");
  ASSERT_TRUE(target.ok());
  ASSERT_TRUE(target->version.has_value());
  EXPECT_EQ(*target->version, V("2.43.0.260128"));
  EXPECT_EQ(target->source, "QNN_SDK_ROOT folder name (" + root + ")");

  Result<TargetVersion> explicit_target = discover_target_version("3.0");
  ASSERT_TRUE(explicit_target.ok());
  EXPECT_EQ(*explicit_target->version, V("3.0"));
  EXPECT_EQ(explicit_target->source, "explicit");
}

TEST_F(SdkRootEnvTest, UnsetVariable) {
  ASSERT_EQ(::unsetenv("QNN_SDK_ROOT"), 0);
  Result<SdkVersion> id = read_sdk_build_id();
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.error().code, ErrorCode::kVersionError);
  EXPECT_EQ(id.error().message,
            std::string("QNN_SDK_ROOT is not set, so the QNN SDK build id cannot be read; ") +
                kHowToFixRoot);

  Result<TargetVersion> target = discover_target_version("");
  ASSERT_TRUE(target.ok());
  EXPECT_FALSE(target->version.has_value());
  EXPECT_EQ(target->source, "unknown");
  EXPECT_EQ(target->unknown_reason, id.error().message);
}

TEST_F(SdkRootEnvTest, EmptyVariable) {
  ASSERT_EQ(::setenv("QNN_SDK_ROOT", "", 1), 0);
  Result<SdkVersion> id = read_sdk_build_id();
  ASSERT_FALSE(id.ok());
  EXPECT_THAT(id.error().message, HasSubstr("QNN_SDK_ROOT is set but empty"));
}

TEST_F(SdkRootEnvTest, VariableNamingMissingFolder) {
  const std::string missing = (base_ / "qairt" / "2.43.0.260128").string();
  ASSERT_EQ(::setenv("QNN_SDK_ROOT", missing.c_str(), 1), 0);
  Result<SdkVersion> id = read_sdk_build_id();
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.error().code, ErrorCode::kVersionError);
  EXPECT_EQ(id.error().message,
            "QNN_SDK_ROOT is \"" + missing + "\", which does not exist; " + kHowToFixRoot);
}

}  // namespace
}  // namespace qemb
