// PyTorch checkpoints (zip and legacy), .npy and .npz files on arbitrary
// bytes used in place (no copy: an overread hits the sanitizer): the zip
// central directory reader, the unpickler, the storage checks, and every
// readable 2-D float tensor read whole and by rows (views and strides
// included). A zip is tried both as torch.save and as .npz.
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "qemb/pytorch.h"

namespace {

void check(const uint8_t* data, size_t size, qemb::TensorFileKind kind) {
  auto file = qemb::TensorFile::from_memory(data, size, nullptr, kind, "fuzz.pt");
  if (!file.ok()) {
    QEMB_FUZZ_CHECK(!file.error().message.empty(), "an error without a message");
    return;
  }
  for (const qemb::FileTensor& t : file->tensors()) {
    QEMB_FUZZ_CHECK(file->find(t.name) == &t, "tensor '%s' not found by name", t.name.c_str());
    QEMB_FUZZ_CHECK(t.base != nullptr && t.base >= data && t.base <= data + size, "tensor '%s'", t.name.c_str());
    const bool float_dtype = t.dtype == "F32" || t.dtype == "F16" || t.dtype == "BF16";
    if (t.shape.size() != 2 || !float_dtype) {
      std::vector<float> none(1);
      QEMB_FUZZ_CHECK(!file->read_rows_float(t, 0, 0, none.data()).ok(), "read accepted %s", t.dtype.c_str());
      continue;
    }
    const int64_t rows = t.shape[0], cols = t.shape[1];
    if (rows * cols > (1 << 22)) continue;
    std::vector<float> all(static_cast<size_t>(rows * cols) + 1);
    QEMB_FUZZ_CHECK(file->read_rows_float(t, 0, rows, all.data()).ok(), "read of '%s'", t.name.c_str());
    const int64_t begin = rows / 3, end = rows - rows / 4;
    std::vector<float> part(static_cast<size_t>((end - begin) * cols) + 1);
    QEMB_FUZZ_CHECK(file->read_rows_float(t, begin, end, part.data()).ok(), "row read of '%s'", t.name.c_str());
    for (int64_t i = 0; i < (end - begin) * cols; ++i) {
      const float a = part[static_cast<size_t>(i)], b = all[static_cast<size_t>(begin * cols + i)];
      QEMB_FUZZ_CHECK(a == b || (a != a && b != b), "rows disagree with the whole tensor");
    }
    QEMB_FUZZ_CHECK(!file->read_rows_float(t, 0, rows + 1, all.data()).ok(), "row past the end accepted");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  qemb::TensorFileKind kind;
  if (!qemb::sniff_tensor_file(data, size, "fuzz", &kind)) {
    // Not a known magic: still exercise each reader's refusal.
    check(data, size, qemb::TensorFileKind::kPytorchZip);
    check(data, size, qemb::TensorFileKind::kPytorchLegacy);
    return 0;
  }
  check(data, size, kind);
  if (kind == qemb::TensorFileKind::kPytorchZip) check(data, size, qemb::TensorFileKind::kNpz);
  return 0;
}
