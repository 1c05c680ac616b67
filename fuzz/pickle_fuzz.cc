// The restricted unpickler on arbitrary bytes: whatever it builds, a refused
// input has a message, and every tensor it returns is consistent with its
// storage (rank, strides, and an extent inside the storage's element count).
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "qemb/pytorch.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto tensors = qemb::unpickle_state_dict(data, size, "fuzz.pkl");
  if (!tensors.ok()) {
    QEMB_FUZZ_CHECK(!tensors.error().message.empty(), "an error without a message");
    return 0;
  }
  for (const qemb::PickledTensor& t : *tensors) {
    QEMB_FUZZ_CHECK(t.shape.size() == t.strides.size(), "tensor '%s'", t.name.c_str());
    QEMB_FUZZ_CHECK(t.shape.size() <= static_cast<size_t>(qemb::kMaxTensorRank));
    QEMB_FUZZ_CHECK(t.item_size > 0 && t.storage_offset >= 0 && t.storage_numel >= 0);
    bool empty = false;
    __int128 last = t.storage_offset;
    for (size_t d = 0; d < t.shape.size(); ++d) {
      QEMB_FUZZ_CHECK(t.shape[d] >= 0 && t.strides[d] >= 0, "tensor '%s'", t.name.c_str());
      empty = empty || t.shape[d] == 0;
      last += static_cast<__int128>(t.shape[d] - 1) * t.strides[d];
    }
    QEMB_FUZZ_CHECK(empty || last < t.storage_numel, "tensor '%s' reads past its storage", t.name.c_str());
  }
  // With an end pointer (the legacy format's object pickle) the same input
  // gives the same answer up to its STOP.
  size_t end = 0;
  auto again = qemb::unpickle_state_dict(data, size, "fuzz.pkl", &end);
  QEMB_FUZZ_CHECK(again.ok() && again->size() == tensors->size() && end == size);
  return 0;
}
