// compile and eval of PyTorch checkpoints and NumPy arrays give the table the
// same result as the equivalent safetensors file: the same looked-up floats,
// bit for bit, for F32, F16 and BF16 (the artifacts differ only in the
// provenance that names the file, its form and its dtype).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "qemb/checkpoint.h"
#include "qemb/eval.h"
#include "qemb/half.h"
#include "qemb/npy.h"
#include "qemb/runtime.h"
#include "support/checkpoints.h"
#include "support/runtime_rows.h"
#include "support/torch_files.h"

namespace qemb {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using namespace qemb::testing;

std::string bytes_of(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }

void write(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

constexpr int64_t kRows = 70, kDim = 48;
const char* const kName = "model.embed_tokens.weight";

// The same table as a torch.save zip (a view at an offset into a larger
// storage, tied to lm_head.weight), a legacy-layout-free .npy and an .npz.
struct Forms {
  std::string st, pt, npy, npz;
};

Forms write_forms(const TempDir& dir, const std::vector<float>& table, const std::string& dtype) {
  Forms f;
  f.st = write_lone_embedding(dir.file("m-" + dtype + ".safetensors"), table, kRows, kDim, dtype);
  const std::vector<uint8_t> encoded = encode_floats(table, dtype);
  const std::string storage = std::string(dtype == "F32" ? 4 * 5 : 2 * 5, '\0') + bytes_of(encoded);
  const std::string type = dtype == "F32" ? "FloatStorage" : dtype == "F16" ? "HalfStorage" : "BFloat16Storage";
  const int64_t numel = kRows * kDim + 5;
  f.pt = dir.file("m-" + dtype + ".pt");
  write(f.pt, torch_zip(state_dict_pickle({{kName, type, "0", numel, 5, {kRows, kDim}, {kDim, 1}},
                                           {"lm_head.weight", type, "0", numel, 5, {kRows, kDim}, {kDim, 1}}}),
                        {{"0", storage}}));
  if (dtype != "BF16") {  // NumPy has no bfloat16
    const std::string descr = dtype == "F32" ? "<f4" : "<f2";
    auto npy = encode_npy(descr, {kRows, kDim}, encoded.data(), encoded.size());
    EXPECT_TRUE(npy.ok());
    f.npy = dir.file("m-" + dtype + ".npy");
    write(f.npy, bytes_of(*npy));
    f.npz = dir.file("m-" + dtype + ".npz");
    write(f.npz, stored_zip({{"emb.npy", bytes_of(*npy)}}));
  }
  return f;
}

TEST(TorchForms, CompileGivesTheSameTableAsSafetensors) {
  TempDir dir;
  const auto table = spread_table(kRows, kDim, 91);
  for (const std::string dtype : {"F32", "F16", "BF16"}) {
    SCOPED_TRACE(dtype);
    const Forms f = write_forms(dir, table, dtype);
    for (const Scheme scheme : {Scheme::k16a4w, Scheme::k16a8w}) {
      CompileOptions o;
      o.scheme = scheme;
      o.qnn_sdk_version = scheme == Scheme::k16a4w ? "2.48" : "2.37";
      const std::string ref = dir.file("ref.qemb");
      fs::remove(ref);
      auto st = compile_checkpoint(f.st, o, ref);
      ASSERT_TRUE(st.ok()) << st.error().to_string();
      EXPECT_EQ(st->metadata["source"]["format"], "safetensors");
      const std::vector<float> expected = lookup_all(ref);
      ASSERT_EQ(expected.size(), static_cast<size_t>(kRows * kDim));
      struct Input {
        std::string path, format, tensor;
      };
      std::vector<Input> inputs = {{f.pt, "pytorch", kName}};
      if (!f.npy.empty()) {
        inputs.push_back({f.npy, "npy", "m-" + dtype});
        inputs.push_back({f.npz, "npz", "emb"});
      }
      for (const Input& in : inputs) {
        SCOPED_TRACE(in.path);
        const std::string out = dir.file("other.qemb");
        fs::remove(out);
        auto c = compile_checkpoint(in.path, o, out);
        ASSERT_TRUE(c.ok()) << c.error().to_string();
        EXPECT_EQ(c->metadata["source"]["tensor"], in.tensor);
        EXPECT_EQ(c->metadata["source"]["dtype"], dtype);
        EXPECT_EQ(c->metadata["source"]["format"], in.format);
        const std::vector<float> got = lookup_all(out);
        ASSERT_EQ(got.size(), expected.size());
        EXPECT_EQ(0, std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)));
      }
    }
  }
}

TEST(TorchForms, EvalReadsThemAndFakequantRefuses) {
  TempDir dir;
  const auto table = spread_table(kRows, kDim, 92);
  const Forms f = write_forms(dir, table, "F16");
  EvalOptions eo;
  eo.qnn_sdk_version = "2.48";
  auto ref = evaluate_checkpoint(f.st, eo);
  ASSERT_TRUE(ref.ok()) << ref.error().to_string();
  for (const std::string& path : {f.pt, f.npy, f.npz}) {
    SCOPED_TRACE(path);
    auto report = evaluate_checkpoint(path, eo);
    ASSERT_TRUE(report.ok()) << report.error().to_string();
    EXPECT_EQ(eval_report_json(*report)["results"], eval_report_json(*ref)["results"]);
    EXPECT_EQ(eval_report_json(*report)["activation"], eval_report_json(*ref)["activation"]);
    EXPECT_FALSE(report->source_quantized);
  }
  auto fq = fakequant_checkpoint(f.pt, FakeQuantOptions{}, dir.file("o.safetensors"));
  ASSERT_FALSE(fq.ok());
  EXPECT_EQ(fq.error().code, ErrorCode::kUnsupported);
  EXPECT_EQ(fq.error().message, "fakequant writes safetensors checkpoints; '" + f.pt +
                                    "' is a pytorch checkpoint (compile and eval read it)");
}

}  // namespace
}  // namespace qemb
