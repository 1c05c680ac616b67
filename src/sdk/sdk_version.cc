#include "qemb/sdk_version.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <ostream>
#include <string_view>
#include <system_error>

namespace qemb {
namespace {

constexpr std::string_view kExpectedForm =
    "expected MAJOR.MINOR[.PATCH[.BUILD]] with decimal parts, e.g. 2.48 or v2.37.0.250724";

constexpr std::string_view kHowToFixRoot =
    "set QNN_SDK_ROOT to the unpacked QNN/QAIRT SDK folder (e.g. "
    "/opt/qcom/aistack/qairt/2.43.0.260128) or give the target SDK version "
    "explicitly";

Error version_error(std::string message) {
  return make_error(ErrorCode::kVersionError, std::move(message));
}

// Double-quotes text for a message; control bytes are escaped and long text
// (not paths, which must stay whole) is cut so a stray binary file cannot flood
// the terminal.
constexpr size_t kWholeText = std::string_view::npos;
std::string quote(std::string_view text, size_t max_shown = 100) {
  static const char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (size_t i = 0; i < text.size() && i < max_shown; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > max_shown) out += "...";
  out += '"';
  return out;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// "/opt/qairt/2.43.0.260128///" -> "/opt/qairt/2.43.0.260128"; "/" stays "/".
std::string strip_trailing_slashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

// Last path component of a path with no trailing slashes ("" for "/").
std::string last_component(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The value of a top-level `version:` line in sdk.yaml, as written.
struct YamlVersionLine {
  int line_number = 0;
  std::string line;   // the whole line, for messages
  std::string value;  // unquoted, comment and surrounding spaces removed
};

// Extracts a scalar value the way YAML reads the simple forms SDKs use:
// `2.43.0.260128`, `"2.43.0.260128"`, `'2.43.0.260128'`, each optionally
// followed by `# comment`. Anything odder is returned raw so that parsing it
// fails with the text shown.
std::string yaml_scalar(std::string_view raw) {
  std::string_view value = trim(raw);
  if (!value.empty() && (value.front() == '"' || value.front() == '\'')) {
    const char quote_char = value.front();
    const size_t close = value.find(quote_char, 1);
    if (close == std::string_view::npos) return std::string(value);  // unterminated
    const std::string_view rest = trim(value.substr(close + 1));
    if (!rest.empty() && rest.front() != '#') return std::string(value);
    return std::string(value.substr(1, close - 1));
  }
  // A plain scalar ends where a comment starts: '#' at the start or after a space.
  for (size_t i = 0; i < value.size(); ++i) {
    if (value[i] == '#' && (i == 0 || is_space(value[i - 1]))) {
      value = value.substr(0, i);
      break;
    }
  }
  return std::string(trim(value));
}

// Finds the first top-level (unindented) `version:` key; nested keys such as a
// dependency's version are not the SDK's.
std::optional<YamlVersionLine> find_yaml_version_line(std::istream& in) {
  std::string line;
  int line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::string_view view = line;
    if (line_number == 1 && view.substr(0, 3) == "\xEF\xBB\xBF") view.remove_prefix(3);  // UTF-8 BOM
    constexpr std::string_view kKey = "version";
    if (view.substr(0, kKey.size()) != kKey) continue;
    std::string_view after_key = view.substr(kKey.size());
    while (!after_key.empty() && (after_key.front() == ' ' || after_key.front() == '\t')) {
      after_key.remove_prefix(1);
    }
    if (after_key.empty() || after_key.front() != ':') continue;  // e.g. "version_name:"
    return YamlVersionLine{line_number, line, yaml_scalar(after_key.substr(1))};
  }
  return std::nullopt;
}

struct BuildId {
  SdkVersion version;
  std::string source;
};

Result<BuildId> read_build_id_with_source(const char* qnn_sdk_root) {
  if (qnn_sdk_root == nullptr) {
    return version_error("QNN_SDK_ROOT is not set, so the QNN SDK build id cannot be read; " +
                         std::string(kHowToFixRoot));
  }
  const std::string root_value = qnn_sdk_root;
  if (root_value.empty()) {
    return version_error("QNN_SDK_ROOT is set but empty, so the QNN SDK build id cannot be read; " +
                         std::string(kHowToFixRoot));
  }
  const std::string root = strip_trailing_slashes(root_value);
  const std::string root_shown = "QNN_SDK_ROOT is " + quote(root_value, kWholeText);

  std::error_code ec;
  const auto root_status = std::filesystem::status(root, ec);
  if (root_status.type() == std::filesystem::file_type::not_found) {
    return version_error(root_shown + ", which does not exist; " + std::string(kHowToFixRoot));
  }
  if (ec) {
    return version_error(root_shown + ", which cannot be accessed (" + ec.message() + "); " +
                         std::string(kHowToFixRoot));
  }
  if (root_status.type() != std::filesystem::file_type::directory) {
    return version_error(root_shown + ", which is not a directory; " + std::string(kHowToFixRoot));
  }

  // 1. The `version:` line of sdk.yaml.
  const std::string yaml_path = (root == "/" ? "" : root) + "/sdk.yaml";
  std::string yaml_finding;  // why sdk.yaml gave nothing, for the final message
  const auto yaml_status = std::filesystem::status(yaml_path, ec);
  if (yaml_status.type() == std::filesystem::file_type::not_found) {
    yaml_finding = yaml_path + " does not exist";
  } else if (ec || yaml_status.type() != std::filesystem::file_type::regular) {
    return version_error(root_shown + ", but " + yaml_path + " cannot be read (" +
                         (ec ? ec.message() : std::string("not a regular file")) +
                         "); fix or remove it, or give the target SDK version explicitly");
  } else {
    std::ifstream yaml(yaml_path, std::ios::binary);
    if (!yaml) {
      return version_error(root_shown + ", but " + yaml_path +
                           " cannot be opened; fix its permissions or give the target SDK version "
                           "explicitly");
    }
    std::optional<YamlVersionLine> found = find_yaml_version_line(yaml);
    if (found) {
      Result<SdkVersion> parsed = SdkVersion::parse(found->value);
      if (!parsed.ok()) {
        return version_error(root_shown + ", but line " + std::to_string(found->line_number) +
                             " of " + yaml_path + " (" + quote(found->line) +
                             ") does not hold a valid version: " + parsed.error().message +
                             "; fix that line or give the target SDK version explicitly");
      }
      return BuildId{std::move(parsed).value(), "QNN_SDK_ROOT sdk.yaml (" + yaml_path + ")"};
    }
    if (yaml.bad()) {
      return version_error(root_shown + ", but reading " + yaml_path +
                           " failed; fix the file or give the target SDK version "
                           "explicitly");
    }
    yaml_finding = yaml_path + " has no top-level \"version:\" line";
  }

  // 2. The folder's own name, as SDKs unpack into .../qairt/<version>.
  const std::string name = last_component(root);
  if (Result<SdkVersion> from_name = SdkVersion::parse(name); from_name.ok()) {
    return BuildId{std::move(from_name).value(), "QNN_SDK_ROOT folder name (" + root + ")"};
  }
  // A link such as .../qairt/latest (or ".") names its real folder only once resolved.
  const std::filesystem::path resolved = std::filesystem::canonical(root, ec);
  if (!ec) {
    const std::string resolved_root = strip_trailing_slashes(resolved.string());
    if (Result<SdkVersion> from_resolved = SdkVersion::parse(last_component(resolved_root));
        from_resolved.ok()) {
      return BuildId{std::move(from_resolved).value(),
                     "QNN_SDK_ROOT folder name (" + resolved_root + ")"};
    }
  }
  return version_error(root_shown + ", but no SDK build id was found there: " + yaml_finding +
                       " and the folder name " + quote(name, kWholeText) +
                       " is not a version like 2.43.0.260128; " + std::string(kHowToFixRoot));
}

}  // namespace

Result<SdkVersion> SdkVersion::parse(const std::string& text) {
  auto fail = [&text](std::string_view what) -> Error {
    return version_error("invalid SDK version " + quote(text) + ": " + std::string(what) + "; " +
                         std::string(kExpectedForm));
  };
  if (text.empty()) return fail("the text is empty");
  if (is_space(text.front()) || is_space(text.back())) {
    return fail("it has leading or trailing whitespace");
  }
  std::string_view body = text;
  if (body.front() == 'v' || body.front() == 'V') body.remove_prefix(1);
  if (body.empty()) return fail("nothing follows the 'v'");

  std::vector<std::string_view> fields;
  for (size_t start = 0;;) {
    const size_t dot = body.find('.', start);
    fields.push_back(body.substr(start, dot == std::string_view::npos ? body.npos : dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  if (fields.size() < 2 || fields.size() > 4) {
    return fail("it has " + std::to_string(fields.size()) +
                (fields.size() == 1 ? " part" : " parts") + ", not 2 to 4");
  }

  std::vector<uint64_t> parts;
  parts.reserve(fields.size());
  for (size_t i = 0; i < fields.size(); ++i) {
    const std::string_view field = fields[i];
    const std::string which = "part " + std::to_string(i + 1);
    if (field.empty()) return fail(which + " is empty");
    uint64_t value = 0;
    for (const char c : field) {
      if (c < '0' || c > '9') {
        return fail(which + " " + quote(field) + " is not a decimal number");
      }
      const uint64_t digit = static_cast<uint64_t>(c - '0');
      if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) {
        return fail(which + " " + quote(field) + " does not fit in 64 bits");
      }
      value = value * 10 + digit;
    }
    parts.push_back(value);
  }
  return SdkVersion(std::move(parts));
}

Result<SdkVersion> SdkVersion::from_parts(std::vector<uint64_t> parts) {
  if (parts.size() < 2 || parts.size() > 4) {
    return version_error("an SDK version needs 2 to 4 parts, got " + std::to_string(parts.size()) +
                         "; " + std::string(kExpectedForm));
  }
  return SdkVersion(std::move(parts));
}

std::string SdkVersion::to_string() const {
  std::string out;
  for (size_t i = 0; i < parts_.size(); ++i) {
    if (i > 0) out += '.';
    out += std::to_string(parts_[i]);
  }
  return out;
}

std::strong_ordering operator<=>(const SdkVersion& a, const SdkVersion& b) {
  const size_t n = std::max(a.parts_.size(), b.parts_.size());
  for (size_t i = 0; i < n; ++i) {
    const uint64_t x = i < a.parts_.size() ? a.parts_[i] : 0;
    const uint64_t y = i < b.parts_.size() ? b.parts_[i] : 0;
    if (x != y) return x <=> y;
  }
  return std::strong_ordering::equal;
}

std::ostream& operator<<(std::ostream& os, const SdkVersion& version) {
  return os << version.to_string();
}

Result<SdkVersion> read_sdk_build_id() { return read_sdk_build_id_from_root(std::getenv("QNN_SDK_ROOT")); }

Result<SdkVersion> read_sdk_build_id_from_root(const char* qnn_sdk_root) {
  QEMB_ASSIGN_OR_RETURN(BuildId id, read_build_id_with_source(qnn_sdk_root));
  return std::move(id.version);
}

Result<TargetVersion> discover_target_version(const std::string& explicit_version) {
  return discover_target_version_from(explicit_version, std::getenv("QNN_SDK_ROOT"));
}

Result<TargetVersion> discover_target_version_from(const std::string& explicit_version,
                                                   const char* qnn_sdk_root) {
  if (!explicit_version.empty()) {
    Result<SdkVersion> parsed = SdkVersion::parse(explicit_version);
    if (!parsed.ok()) {
      return version_error("target SDK version (qnn_sdk_version): " + parsed.error().message);
    }
    return TargetVersion{std::move(parsed).value(), "explicit", ""};
  }
  Result<BuildId> id = read_build_id_with_source(qnn_sdk_root);
  if (!id.ok()) return TargetVersion{std::nullopt, "unknown", id.error().message};
  BuildId found = std::move(id).value();
  return TargetVersion{std::move(found.version), std::move(found.source), ""};
}

}  // namespace qemb
