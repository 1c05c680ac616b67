// The token-list parser ("1, 2, 3", newlines, '#' comments).
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "qemb/tokens.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto ids = qemb::parse_token_list(text);
  if (!ids.ok()) {
    QEMB_FUZZ_CHECK(ids.error().code == qemb::ErrorCode::kParseError, "unexpected error code");
    QEMB_FUZZ_CHECK(!ids.error().message.empty(), "an error without a message");
    return 0;
  }
  // The ids printed back as a comma list parse to the same ids.
  std::string printed;
  for (size_t i = 0; i < ids->size(); ++i) printed += (i ? "," : "") + std::to_string((*ids)[i]);
  auto again = qemb::parse_token_list(printed);
  QEMB_FUZZ_CHECK(again.ok() && *again == *ids, "'%s' does not parse back", printed.c_str());
  return 0;
}
