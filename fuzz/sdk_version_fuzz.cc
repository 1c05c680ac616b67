// The SDK version parser and the ordering built on it.
#include <compare>
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "qemb/pattern.h"
#include "qemb/sdk_version.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto version = qemb::SdkVersion::parse(text);
  if (!version.ok()) {
    QEMB_FUZZ_CHECK(version.error().code == qemb::ErrorCode::kVersionError, "unexpected error code");
    QEMB_FUZZ_CHECK(!version.error().message.empty(), "an error without a message");
    return 0;
  }
  const qemb::SdkVersion& v = *version;
  QEMB_FUZZ_CHECK(v.parts().size() >= 2 && v.parts().size() <= 4);
  // to_string() parses back to an equal version, and equal parts print the same.
  auto again = qemb::SdkVersion::parse(v.to_string());
  QEMB_FUZZ_CHECK(again.ok() && *again == v && again->to_string() == v.to_string(), "'%s' does not round-trip",
                  v.to_string().c_str());
  auto built = qemb::SdkVersion::from_parts(v.parts());
  QEMB_FUZZ_CHECK(built.ok() && *built == v);
  // The ordering is antisymmetric against the gating version.
  const qemb::SdkVersion gate = qemb::optimized_pattern_min_version();
  QEMB_FUZZ_CHECK((v <=> gate) == 0 ? (gate <=> v) == 0 : ((v <=> gate) < 0) == ((gate <=> v) > 0));
  return 0;
}
