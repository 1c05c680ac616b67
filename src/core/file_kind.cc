#include "core/file_kind.h"

#include <cstring>

namespace qemb {

FileKind file_kind_of(const uint8_t* d, size_t n) {
  auto starts = [&](const char* magic, size_t len) { return n >= len && std::memcmp(d, magic, len) == 0; };
  if (starts("QEMB\x89\r\n\x1a", 8)) return FileKind::kArtifact;
  if (starts("GGUF", 4)) return FileKind::kGguf;
  if (starts("PK\x03\x04", 4)) return FileKind::kZip;
  if (starts("\x93NUMPY", 6)) return FileKind::kNpy;
  // torch.save's legacy format: PROTO 2, then LONG1 of 10 bytes, the magic number.
  if (starts("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19", 14)) return FileKind::kTorchLegacy;
  if (n >= 9) {
    uint64_t len = 0;
    for (int i = 7; i >= 0; --i) len = (len << 8) | d[i];
    if (len >= 2 && len < (100ull << 20) && d[8] == '{') return FileKind::kSafetensors;
  }
  return FileKind::kUnknown;
}

std::string describe(FileKind kind) {
  switch (kind) {
    case FileKind::kArtifact: return "a qemb artifact";
    case FileKind::kSafetensors: return "a safetensors checkpoint";
    case FileKind::kGguf: return "a GGUF checkpoint";
    case FileKind::kZip: return "a PyTorch checkpoint or NumPy .npz (a zip archive)";
    case FileKind::kTorchLegacy: return "a PyTorch checkpoint (legacy torch.save)";
    case FileKind::kNpy: return "a NumPy .npy array";
    case FileKind::kUnknown: break;
  }
  return "";
}

std::string checkpoint_instead_hint(const std::string& path) {
  return "'" + path +
         "' is a qemb artifact, not a checkpoint: compile, eval and fakequant read the float checkpoint it was "
         "compiled from (qemb inspect '" + path + "' names it); qemb run '" + path +
         "' looks ids up in it and qemb export-onnx '" + path + "' exports it";
}

}  // namespace qemb
