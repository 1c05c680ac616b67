// The .qemb loader with full verification, on raw bytes, on the same bytes
// with their checksums repaired, and on fuzzed sections packed into a valid
// container (see artifact_container.h).
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include "artifact_container.h"
#include "fuzz_check.h"
#include "artifact/artifact_io.h"

namespace {

void load_and_check(const std::vector<uint8_t>& bytes) {
  auto loaded = qemb::load_artifact_from_bytes(std::make_shared<qemb::fuzz::AlignedBytes>(bytes), qemb::Verify::kFull);
  if (!loaded.ok()) {
    QEMB_FUZZ_CHECK(!loaded.error().message.empty(), "an error without a message");
    return;
  }
  const qemb::LoadedArtifact& a = *loaded;
  QEMB_FUZZ_CHECK(a.file_size == bytes.size());
  for (const qemb::SectionInfo& s : a.sections)
    QEMB_FUZZ_CHECK(s.verified && s.offset + s.size <= a.file_size, "section %u", s.index);
  QEMB_FUZZ_CHECK(a.graph->check().ok(), "loaded graph fails its own check");
  for (const qemb::Tensor& t : a.graph->tensors) {
    if (t.kind != qemb::TensorKind::kStatic) continue;
    QEMB_FUZZ_CHECK(t.data && t.data->size() == qemb::storage_bytes(t), "tensor '%s'", t.name.c_str());
    QEMB_FUZZ_CHECK(t.data->data() >= a.bytes && t.data->data() + t.data->size() <= a.bytes + a.file_size);
    QEMB_FUZZ_CHECK(reinterpret_cast<uintptr_t>(t.data->data()) % qemb::kArtifactDataAlignment == 0);
  }
  (void)qemb::describe_sections(a);
  (void)a.graph->dump();
  (void)a.metadata.dump();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  const bool has_magic = size >= sizeof(qemb::kArtifactMagic) &&
                         std::memcmp(data, qemb::kArtifactMagic, sizeof(qemb::kArtifactMagic)) == 0;
  load_and_check(bytes);
  if (has_magic) {
    qemb::fuzz::fix_checksums(bytes);
    load_and_check(bytes);
  } else {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    load_and_check(qemb::fuzz::pack_sections(qemb::fuzz::split_sections(text)));
  }
  return 0;
}
