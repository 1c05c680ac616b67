// What the command line does with an artifact: load it (full verification)
// and serve lookups from it, on the fast kernels and on the reference
// interpreter. Inputs are decoded as in artifact_fuzz.cc, so most of them are
// well-formed containers with fuzzed graphs: a file whose checksums are right
// but whose graph is hostile must be refused or served safely, never crash.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include "artifact_container.h"
#include "fuzz_check.h"
#include "artifact/artifact_io.h"
#include "qemb/runtime.h"

namespace {

// Keeps a fuzzed table from asking for gigabytes of output.
constexpr int64_t kMaxOutputValues = 1 << 20;

void serve(const std::vector<uint8_t>& bytes) {
  auto buffer = std::make_shared<qemb::fuzz::AlignedBytes>(bytes);
  auto artifact = qemb::load_artifact_from_bytes(buffer, qemb::Verify::kFull);
  if (!artifact.ok()) return;
  std::unique_ptr<qemb::EmbeddingRuntime> runtimes[2];
  for (int reference = 0; reference < 2; ++reference) {
    auto copy = qemb::load_artifact_from_bytes(buffer, qemb::Verify::kFull);
    QEMB_FUZZ_CHECK(copy.ok(), "the second load of the same bytes failed");
    qemb::RuntimeOptions options;
    options.reference = reference == 1;
    auto rt = qemb::EmbeddingRuntime::from_artifact(std::move(copy).value(), options);
    if (!rt.ok()) {
      QEMB_FUZZ_CHECK(!rt.error().message.empty(), "an error without a message");
      return;
    }
    runtimes[reference] = std::move(rt).value();
  }
  const qemb::EmbeddingRuntime& fast = *runtimes[0];
  const qemb::EmbeddingRuntime& ref = *runtimes[1];
  QEMB_FUZZ_CHECK(fast.vocab_size() == ref.vocab_size() && fast.dim() == ref.dim());
  const int64_t vocab = fast.vocab_size(), dim = fast.dim();
  QEMB_FUZZ_CHECK(vocab > 0 && dim > 0);
  const std::vector<int64_t> ids = {0, vocab - 1, vocab / 2, 0};
  if (dim > kMaxOutputValues / static_cast<int64_t>(ids.size())) return;
  const size_t values = ids.size() * static_cast<size_t>(dim);
  std::vector<uint16_t> out_fast(values, 0xAAAA), out_ref(values, 0x5555);
  qemb::Status s_fast = fast.lookup(ids, out_fast.data());
  qemb::Status s_ref = ref.lookup(ids, out_ref.data());
  // Both ways of executing a graph the runtime accepted agree bit for bit.
  if (s_fast.ok() && s_ref.ok())
    QEMB_FUZZ_CHECK(out_fast == out_ref, "kernel '%s' and the reference interpreter disagree",
                    fast.kernel_name().c_str());
  std::vector<float> f(values);
  (void)fast.lookup_dequantized(ids, f.data());
  (void)ref.lookup_dequantized(ids, f.data());
  // Ids out of range are refused and write nothing.
  const std::vector<int64_t> bad = {0, vocab};
  std::vector<uint16_t> untouched(2 * static_cast<size_t>(dim), 0x1234);
  QEMB_FUZZ_CHECK(fast.lookup(bad, untouched.data()).code() == qemb::ErrorCode::kOutOfRange);
  QEMB_FUZZ_CHECK(ref.lookup(bad, untouched.data()).code() == qemb::ErrorCode::kOutOfRange);
  for (uint16_t v : untouched) QEMB_FUZZ_CHECK(v == 0x1234, "a refused lookup wrote output");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  const bool has_magic = size >= sizeof(qemb::kArtifactMagic) &&
                         std::memcmp(data, qemb::kArtifactMagic, sizeof(qemb::kArtifactMagic)) == 0;
  if (has_magic) {
    qemb::fuzz::fix_checksums(bytes);
    serve(bytes);
  } else {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    serve(qemb::fuzz::pack_sections(qemb::fuzz::split_sections(text)));
  }
  return 0;
}
