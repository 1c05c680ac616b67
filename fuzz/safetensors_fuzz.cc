// The safetensors header parser and the float readers behind it, on
// arbitrary bytes used in place (no copy: an overread hits the sanitizer).
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "qemb/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = qemb::SafetensorsFile::from_memory(data, size, nullptr, "fuzz.safetensors");
  if (!file.ok()) {
    QEMB_FUZZ_CHECK(!file.error().message.empty(), "an error without a message");
    return 0;
  }
  const qemb::SafetensorsFile& f = *file;
  QEMB_FUZZ_CHECK(f.data_offset() <= size);
  uint64_t previous_end = f.data_offset();
  for (const qemb::SafetensorsTensor& t : f.tensors()) {
    // Sorted, inside the data region, not overlapping, size matching the shape.
    QEMB_FUZZ_CHECK(t.begin >= previous_end && t.begin <= t.end && t.end <= size, "tensor '%s'", t.name.c_str());
    previous_end = t.end;
    QEMB_FUZZ_CHECK(f.find(t.name) == &t, "tensor '%s' not found by name", t.name.c_str());
    if (!qemb::is_float_convertible_dtype(t.dtype)) {
      QEMB_FUZZ_CHECK(!f.read_float(t.name).ok(), "read_float accepted dtype %s", t.dtype.c_str());
      continue;
    }
    const int64_t elements = t.num_elements();
    auto all = f.read_float(t.name);
    QEMB_FUZZ_CHECK(all.ok() && static_cast<int64_t>(all->size()) == elements, "read_float of '%s'",
                    t.name.c_str());
    if (t.shape.size() == 2 && t.shape[1] > 0) {
      const int64_t rows = t.shape[0], cols = t.shape[1];
      std::vector<float> part(static_cast<size_t>(elements));
      const int64_t begin = rows / 3, end = rows - rows / 4;
      QEMB_FUZZ_CHECK(f.read_rows_float(t.name, begin, end, part.data()).ok(), "read_rows_float of '%s'",
                      t.name.c_str());
      for (int64_t i = 0; i < (end - begin) * cols; ++i) {
        const float a = part[static_cast<size_t>(i)], b = (*all)[static_cast<size_t>(begin * cols + i)];
        QEMB_FUZZ_CHECK(a == b || (a != a && b != b), "rows disagree with the whole tensor");
      }
      QEMB_FUZZ_CHECK(!f.read_rows_float(t.name, 0, rows + 1, part.data()).ok(), "row past the end accepted");
    }
  }
  // Auto-detection and explicit names, found or not.
  (void)qemb::find_embedding_tensor(f, "");
  if (!f.tensors().empty()) (void)qemb::find_embedding_tensor(f, f.tensors().front().name);
  (void)qemb::find_embedding_tensor(f, "model.embed_tokens.weight");
  return 0;
}
