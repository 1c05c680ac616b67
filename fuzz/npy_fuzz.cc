// The .npy reader, token ids from it, and the writer's round trip.
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "qemb/npy.h"
#include "qemb/tokens.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto array = qemb::parse_npy(data, size, "fuzz.npy");
  if (!array.ok()) {
    QEMB_FUZZ_CHECK(!array.error().message.empty(), "an error without a message");
    return 0;
  }
  const qemb::NpyArray& a = *array;
  QEMB_FUZZ_CHECK(a.num_elements() >= 0 && a.item_size() > 0);
  QEMB_FUZZ_CHECK(a.data.size() == static_cast<size_t>(a.num_elements()) * static_cast<size_t>(a.item_size()),
                  "%zu data bytes for %lld elements of %d bytes", a.data.size(),
                  static_cast<long long>(a.num_elements()), a.item_size());
  const std::vector<uint8_t> c_order = qemb::npy_c_order_data(a);
  QEMB_FUZZ_CHECK(c_order.size() == a.data.size());
  auto ids = qemb::tokens_from_npy(a, "fuzz.npy");
  if (ids.ok()) QEMB_FUZZ_CHECK(static_cast<int64_t>(ids->size()) == a.num_elements());

  // What we read, written in C order and read back, is the same array.
  auto encoded = qemb::encode_npy(a.dtype, a.shape, c_order.data(), c_order.size());
  if (encoded.ok()) {
    auto again = qemb::parse_npy(encoded->data(), encoded->size(), "round-trip.npy");
    QEMB_FUZZ_CHECK(again.ok(), "re-encoded array does not parse: %s",
                    again.ok() ? "" : again.error().message.c_str());
    QEMB_FUZZ_CHECK(again->dtype == a.dtype && again->shape == a.shape && !again->fortran_order &&
                    again->data == c_order, "round trip changed the array");
  }
  return 0;
}
