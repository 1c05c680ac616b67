// Backend SDK versions and where the target's version comes from (docs/numeric-contract.md, "SDK version gating"):
// parsing and comparing versions, and discovering the target's from
// QNN_SDK_ROOT. What each version allows is the lowering's (qemb/pattern.h).
// Nothing here aborts or throws: bad text and broken SDK folders come
// back as ErrorCode::kVersionError with a message naming the text, variable or
// file and what to do.
#pragma once

#include <compare>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "qemb/status.h"

namespace qemb {

class SdkVersion {
 public:
  // Accepts "MAJOR.MINOR[.PATCH[.BUILD]]" with an optional leading 'v' or 'V':
  // 2 to 4 parts, each one or more decimal digits that fit in uint64 (build ids
  // such as 250724). No surrounding whitespace, signs or empty parts.
  // Every failure is ErrorCode::kVersionError; the message quotes the text,
  // says what is wrong and shows the expected form.
  static Result<SdkVersion> parse(const std::string& text);
  // Same rules as parse() for the count (2 to 4 parts); for versions built in code.
  static Result<SdkVersion> from_parts(std::vector<uint64_t> parts);

  const std::vector<uint64_t>& parts() const { return parts_; }

  // The parts as parsed, without the 'v' and with leading zeros dropped:
  // parse("v2.37.0.250724")->to_string() == "2.37.0.250724".
  std::string to_string() const;

  // Whole-tuple comparison; a missing part counts as 0, so 2.48 == 2.48.0,
  // 3.0 > 2.48 and 2.48.0.260715 > 2.48.
  friend std::strong_ordering operator<=>(const SdkVersion& a, const SdkVersion& b);
  friend bool operator==(const SdkVersion& a, const SdkVersion& b) {
    return (a <=> b) == std::strong_ordering::equal;
  }

 private:
  explicit SdkVersion(std::vector<uint64_t> parts) : parts_(std::move(parts)) {}
  std::vector<uint64_t> parts_;  // always 2 to 4 entries
};

// Prints to_string(); lets test frameworks show versions readably.
std::ostream& operator<<(std::ostream& os, const SdkVersion& version);

// Reads the backend SDK build id from the SDK folder named by QNN_SDK_ROOT:
// the top-level `version:` line of $QNN_SDK_ROOT/sdk.yaml (value may be quoted
// and followed by a # comment; other keys are ignored), else the folder's own
// name if it parses as a version (SDKs unpack as .../qairt/2.43.0.260128;
// trailing slashes are ignored, and a symlink such as .../qairt/latest is
// followed to its target's name). Fails with ErrorCode::kVersionError when the
// variable is unset or empty, the folder is missing or not a directory,
// sdk.yaml is unreadable or its version line does not parse, or neither source
// has a version.
Result<SdkVersion> read_sdk_build_id();  // reads getenv("QNN_SDK_ROOT")
// `qnn_sdk_root` stands for the variable's value; nullptr means unset.
Result<SdkVersion> read_sdk_build_id_from_root(const char* qnn_sdk_root);

// The SDK version the lowering targets and how it was found.
struct TargetVersion {
  std::optional<SdkVersion> version;  // nullopt = unknown
  // "explicit (--qnn-sdk-version)", "QNN_SDK_ROOT sdk.yaml (<path>)",
  // "QNN_SDK_ROOT folder name (<path>)" or "unknown".
  std::string source;
  std::string unknown_reason;  // when unknown: why the build id could not be read
};

// An explicit version (API field or --qnn-sdk-version; empty = none) wins and
// must parse, otherwise this fails with ErrorCode::kVersionError. Without one,
// the version comes from QNN_SDK_ROOT; if that cannot be read the result is
// still ok, with version == nullopt and unknown_reason set, so the caller can
// fall back to the legacy pattern and say why.
Result<TargetVersion> discover_target_version(const std::string& explicit_version);
Result<TargetVersion> discover_target_version_from(const std::string& explicit_version,
                                                   const char* qnn_sdk_root);

}  // namespace qemb
