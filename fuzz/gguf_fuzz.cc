// The GGUF reader on arbitrary bytes used in place (no copy: an overread hits
// the sanitizer), then every readable 2-D tensor read whole and by rows.
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "qemb/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = qemb::GgufFile::from_memory(data, size, nullptr, "fuzz.gguf");
  if (!file.ok()) {
    QEMB_FUZZ_CHECK(!file.error().message.empty(), "an error without a message");
    return 0;
  }
  const qemb::GgufFile& f = *file;
  QEMB_FUZZ_CHECK(f.version() == 2 || f.version() == 3);
  QEMB_FUZZ_CHECK(f.alignment() > 0 && (f.alignment() & (f.alignment() - 1)) == 0);
  for (const qemb::GgufTensor& t : f.tensors()) {
    QEMB_FUZZ_CHECK(t.begin >= f.data_offset() && t.begin <= t.end && t.end <= size, "tensor '%s'", t.name.c_str());
    QEMB_FUZZ_CHECK((t.begin - f.data_offset()) % f.alignment() == 0, "tensor '%s' misaligned", t.name.c_str());
    QEMB_FUZZ_CHECK(f.find(t.name) == &t, "tensor '%s' not found by name", t.name.c_str());
    if (t.shape.size() != 2 || !qemb::is_gguf_float_readable(t.type)) {
      std::vector<float> none(1);
      QEMB_FUZZ_CHECK(!f.read_rows_float(t, 0, 0, none.data()).ok(), "read accepted %s", t.type.c_str());
      continue;
    }
    const int64_t rows = t.shape[0], cols = t.shape[1];
    if (rows * cols > (1 << 22)) continue;  // a lying 2-D shape over few bytes is refused at parse; big ones are slow
    std::vector<float> all(static_cast<size_t>(rows * cols) + 1);
    QEMB_FUZZ_CHECK(f.read_rows_float(t, 0, rows, all.data()).ok(), "read of '%s'", t.name.c_str());
    const int64_t begin = rows / 3, end = rows - rows / 4;
    std::vector<float> part(static_cast<size_t>((end - begin) * cols) + 1);
    QEMB_FUZZ_CHECK(f.read_rows_float(t, begin, end, part.data()).ok(), "row read of '%s'", t.name.c_str());
    for (int64_t i = 0; i < (end - begin) * cols; ++i) {
      const float a = part[static_cast<size_t>(i)], b = all[static_cast<size_t>(begin * cols + i)];
      QEMB_FUZZ_CHECK(a == b || (a != a && b != b), "rows disagree with the whole tensor");
    }
    QEMB_FUZZ_CHECK(!f.read_rows_float(t, 0, rows + 1, all.data()).ok(), "row past the end accepted");
  }
  return 0;
}
