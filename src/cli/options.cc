#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli/cli.h"
#include "core/file.h"
#include "qemb/export.h"
#include "qemb/sdk_version.h"

namespace qemb::cli {

Status check_outputs_are_not_inputs(const std::vector<PathFlag>& outputs, const std::vector<PathFlag>& inputs) {
  for (const PathFlag& out : outputs) {
    if (out.path.empty() || out.path == kStdioPath) continue;
    for (const PathFlag& in : inputs) {
      if (in.path.empty() || in.path == kStdioPath) continue;
      if (same_file(out.path, in.path))
        return make_error(ErrorCode::kInvalidArgument,
                          "the output '" + out.path + "' (" + out.flag + ") is the same file as the input '" +
                              in.path + "' (" + in.flag +
                              "); writing it would replace that input: choose another output path");
    }
  }
  return Status::Ok();
}

CLI::Validator count_rule(uint64_t lo, uint64_t hi) {
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        // Digits only: CLI11's own conversion (strtoull) would wrap "-1".
        const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
        if (!digits) return "'" + text + "' is not a whole number in " + range;
        uint64_t value = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (ec == std::errc::result_out_of_range || value > hi)
          return "'" + text + "' is too large; the most is " + std::to_string(hi);
        if (ec != std::errc() || end != text.data() + text.size())
          return "'" + text + "' is not a whole number in " + range;
        if (value < lo) return "'" + text + "' is too small; the least is " + std::to_string(lo);
        return std::string();
      },
      "INT in " + range);
}

CLI::Validator size_rule(uint64_t hi) {
  const CLI::Validator plain = count_rule(0, hi);
  return CLI::Validator(
      [plain, hi](std::string& text) -> std::string {
        // A byte count, or one with a unit: KiB MiB GiB TiB (and K M G T) are
        // powers of 1024, kB KB MB GB TB powers of 1000. Rewritten to digits.
        static const struct { const char* unit; uint64_t bytes; } kUnits[] = {
            {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30}, {"TiB", 1ull << 40},
            {"K", 1ull << 10},   {"M", 1ull << 20},   {"G", 1ull << 30},   {"T", 1ull << 40},
            {"kB", 1000ull},     {"KB", 1000ull},     {"MB", 1000000ull},  {"GB", 1000000000ull},
            {"TB", 1000000000000ull}};
        const size_t digits = text.find_first_not_of("0123456789");
        if (digits == std::string::npos || digits == 0) {
          std::string copy = text;
          return plain(copy);
        }
        const std::string number = text.substr(0, digits), unit = text.substr(digits);
        for (const auto& u : kUnits) {
          if (unit != u.unit) continue;
          uint64_t value = 0;
          const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
          if (ec != std::errc() || end != number.data() + number.size() || value > hi / u.bytes)
            return "'" + text + "' is too large; the most is " + std::to_string(hi) + " bytes";
          text = std::to_string(value * u.bytes);
          return std::string();
        }
        return "'" + text + "' is not a size: give bytes (268435456) or a whole number with a unit (256MiB; "
               "KiB MiB GiB TiB or K M G T are powers of 1024, kB MB GB TB powers of 1000)";
      },
      "BYTES (256MiB, 1GiB, ...)");
}

CLI::Validator seconds_rule(double hi) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", hi);
  const std::string most = buf;
  return CLI::Validator(
      [hi, most](std::string& text) -> std::string {
        errno = 0;
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(value))
          return "'" + text + "' is not a finite number of seconds";
        if (!(value > 0) || value > hi) return "'" + text + "' is outside (0, " + most + "] seconds";
        return std::string();
      },
      "SECONDS in (0, " + most + "]");
}

CLI::Validator integer_rule() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        int64_t value = 0;
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data(), end, value);
        if (ec == std::errc::result_out_of_range) return "'" + text + "' is outside the range of a 64-bit integer";
        if (text.empty() || ec != std::errc() || ptr != end) return "'" + text + "' is not an integer";
        return std::string();
      },
      "INT");
}

CLI::Validator opset_rule() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const std::string whole = count_rule(0, kMaxCount)(text);
        if (!whole.empty()) return "'" + text + "' is not an opset number";
        const uint64_t v = std::strtoull(text.c_str(), nullptr, 10);
        const std::string use = "; use --opset " + std::to_string(kOnnxDefaultOpset);
        if (v < 1) return "unknown opset " + text + ": ai.onnx opsets are numbered from 1";
        if (v < kOnnxMinOpset)
          return "opset " + text + " has no uint16 QuantizeLinear/DequantizeLinear, which ONNX added in opset " +
                 std::to_string(kOnnxMinOpset) + use;
        if (v > kOnnxMaxOpset)
          return "unknown opset " + text + ": this exporter knows opsets " + std::to_string(kOnnxMinOpset) + " to " +
                 std::to_string(kOnnxMaxOpset) + use;
        return std::string();
      },
      "OPSET in [" + std::to_string(kOnnxMinOpset) + ", " + std::to_string(kOnnxMaxOpset) + "]");
}

CLI::Validator sdk_version_rule() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (text.empty()) return std::string();
        Result<SdkVersion> v = SdkVersion::parse(text);
        return v.ok() ? std::string() : v.error().message;
      },
      "");
}

}  // namespace qemb::cli
