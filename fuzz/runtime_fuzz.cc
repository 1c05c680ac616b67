// What the command line does with an artifact: load it (full verification)
// and serve lookups from it, on the fast kernels and on the reference
// interpreter. Inputs are decoded as in artifact_fuzz.cc, so most of them are
// well-formed containers with fuzzed graphs: a file whose checksums are right
// but whose graph is hostile must be refused or served safely, never crash.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>
#include <type_traits>
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
  QEMB_FUZZ_CHECK(fast.activation_bits() == ref.activation_bits());
  // The table's own output form (uint16 or uint8 activations, or a
  // weight-only table's floats): both ways of executing a graph the runtime
  // accepted agree bit for bit, and ids out of range are refused and write
  // nothing.
  auto check = [&](auto marker) {
    using T = decltype(marker);
    auto run = [&](const qemb::EmbeddingRuntime& rt, const std::vector<int64_t>& which, T* out) {
      if constexpr (std::is_same_v<T, float>) return rt.lookup_dequantized(which, out);
      else return rt.lookup(which, out);
    };
    std::vector<T> out_fast(values), out_ref(values);
    std::memset(out_fast.data(), 0xAA, values * sizeof(T));
    std::memset(out_ref.data(), 0x55, values * sizeof(T));
    const qemb::Status s_fast = run(fast, ids, out_fast.data());
    const qemb::Status s_ref = run(ref, ids, out_ref.data());
    if (s_fast.ok() && s_ref.ok())
      QEMB_FUZZ_CHECK(std::memcmp(out_fast.data(), out_ref.data(), values * sizeof(T)) == 0,
                      "kernel '%s' and the reference interpreter disagree", fast.kernel_name().c_str());
    const std::vector<int64_t> bad = {0, vocab};
    std::vector<T> untouched(2 * static_cast<size_t>(dim));
    std::memset(untouched.data(), 0x12, untouched.size() * sizeof(T));
    const std::vector<T> before = untouched;
    QEMB_FUZZ_CHECK(run(fast, bad, untouched.data()).code() == qemb::ErrorCode::kOutOfRange);
    QEMB_FUZZ_CHECK(run(ref, bad, untouched.data()).code() == qemb::ErrorCode::kOutOfRange);
    QEMB_FUZZ_CHECK(std::memcmp(untouched.data(), before.data(), untouched.size() * sizeof(T)) == 0,
                    "a refused lookup wrote output");
  };
  switch (fast.activation_bits()) {
    case 16: check(uint16_t{}); break;
    case 8: check(uint8_t{}); break;
    default: check(float{}); break;
  }
  std::vector<float> f(values);
  (void)fast.lookup_dequantized(ids, f.data());
  (void)ref.lookup_dequantized(ids, f.data());
  // The other activation forms are refused, and write nothing either.
  std::vector<uint16_t> wrong16(values, 0x1234);
  std::vector<uint8_t> wrong8(values, 0x12);
  if (fast.activation_bits() != 16) QEMB_FUZZ_CHECK(!fast.lookup(ids, wrong16.data()).ok());
  if (fast.activation_bits() != 8) QEMB_FUZZ_CHECK(!fast.lookup(ids, wrong8.data()).ok());
  for (uint16_t v : wrong16) QEMB_FUZZ_CHECK(v == 0x1234 || fast.activation_bits() == 16, "a refused lookup wrote output");
  for (uint8_t v : wrong8) QEMB_FUZZ_CHECK(v == 0x12 || fast.activation_bits() == 8, "a refused lookup wrote output");
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
