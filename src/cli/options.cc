#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli/cli.h"

namespace qemb::cli {

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

}  // namespace qemb::cli
