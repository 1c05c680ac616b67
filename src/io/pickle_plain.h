// The legacy torch.save format's small pickles (magic number, protocol
// version, system info, storage keys), run by the same restricted unpickler.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "qemb/status.h"

namespace qemb {

struct PlainPickle {
  bool is_int = false;
  int64_t int_value = 0;
  bool is_string_list = false;
  std::vector<std::string> strings;
  size_t end = 0;  // offset just past STOP
};
Result<PlainPickle> unpickle_plain(const uint8_t* data, size_t size, const std::string& name);

}  // namespace qemb
