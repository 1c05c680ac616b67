// The command line end to end: each documented form, its output, and bad
// input giving a clear message, a non-zero exit code and no output file.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "qemb/half.h"
#include "qemb/npy.h"
#include "qemb/safetensors.h"
#include "support/test_util.h"

namespace qemb {
namespace {

using qemb::testing::run_command;
using qemb::testing::TempDir;

const std::string kQemb = QEMB_CLI_PATH;

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    ckpt_ = dir_.file("model.safetensors");
    auto table = qemb::testing::spread_table(40, 6, 9);
    std::vector<uint8_t> bytes(table.size() * 4);
    std::memcpy(bytes.data(), table.data(), bytes.size());
    std::vector<uint8_t> norm(6 * 4, 0);
    std::vector<uint8_t> three_d(2 * 2 * 2 * 4, 0);
    ASSERT_TRUE(write_safetensors(ckpt_, {},
                                  {{"model.embed_tokens.weight", "F32", {40, 6}, bytes},
                                   {"model.norm.weight", "F32", {6}, norm},
                                   {"model.cube", "F32", {2, 2, 2}, three_d}})
                    .ok());
  }
  std::string q(const std::string& args) const { return kQemb + " " + args; }
  TempDir dir_;
  std::string ckpt_;
};

TEST_F(Cli, CompilePrintsThePatternAndWhy) {
  auto r = run_command(q("compile " + ckpt_ + " --qnn-sdk-version 2.37 -o " + dir_.file("a.qemb")));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("pattern: legacy (target SDK 2.37"), std::string::npos) << r.out;
  r = run_command(q("compile " + ckpt_ + " --qnn-sdk-version 2.48 --scheme 16a8w -o " + dir_.file("b.qemb")));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("pattern: optimized (target SDK 2.48"), std::string::npos) << r.out;
}

// The progress bar is for a person at a terminal: `script` gives the command
// a pseudo-terminal; through a pipe, or with --quiet, stderr stays clean.
TEST_F(Cli, CompileShowsProgressOnlyOnATerminal) {
  const std::string compile = q("compile " + ckpt_ + " --qnn-sdk-version 2.48 --mode materialize -o ");
  auto piped = run_command(compile + dir_.file("a.qemb") + " 2>" + dir_.file("stderr.txt"));
  ASSERT_EQ(piped.exit_code, 0) << piped.out;
  EXPECT_EQ(qemb::testing::read_text(dir_.file("stderr.txt")), "");
  if (run_command("command -v script").exit_code != 0) GTEST_SKIP() << "no `script` (util-linux) for a terminal";
  auto tty = run_command("script -qec '" + compile + dir_.file("b.qemb") + "' /dev/null");
  ASSERT_EQ(tty.exit_code, 0) << tty.out;
  EXPECT_NE(tty.out.find("scan     ["), std::string::npos) << tty.out;
  EXPECT_NE(tty.out.find("40/40 rows"), std::string::npos) << tty.out;
  EXPECT_NE(tty.out.find("rows/s"), std::string::npos) << tty.out;
  EXPECT_NE(tty.out.find("s left"), std::string::npos) << tty.out;
  EXPECT_NE(tty.out.find("quantize ["), std::string::npos) << tty.out;
  auto quiet = run_command("script -qec '" + compile + dir_.file("c.qemb") + " --quiet' /dev/null");
  ASSERT_EQ(quiet.exit_code, 0) << quiet.out;
  EXPECT_EQ(quiet.out, "");
}

TEST_F(Cli, InspectJsonHasTheDocumentedKeys) {
  ASSERT_EQ(run_command(q("compile " + ckpt_ + " --qnn-sdk-version 2.48 -o " + dir_.file("a.qemb"))).exit_code, 0);
  auto r = run_command(q("inspect " + dir_.file("a.qemb") + " --json"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"scheme", "pattern", "pattern_reason", "sdk_version", "vocab_size", "dim", "act_scale",
                          "act_offset", "ops", "tensors", "kernel", "isa"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["scheme"], "16a4w");
  EXPECT_EQ(j["pattern"], "optimized");
  EXPECT_EQ(j["sdk_version"], "2.48");
  EXPECT_EQ(j["vocab_size"], 40);
  EXPECT_EQ(j["dim"], 6);
  ASSERT_EQ(j["ops"].size(), 1u);
  EXPECT_EQ(j["ops"][0]["type"], "Gather");
  EXPECT_EQ(j["ops"][0]["name"], "embedding");
  EXPECT_EQ(j["ops"][0]["inputs"], nlohmann::json({"embedding_convert", "embedding_indices"}));
  for (const auto& t : j["tensors"])
    for (const char* key : {"name", "kind", "dtype", "shape", "encoding"}) EXPECT_TRUE(t.contains(key)) << key;
}

// A fused compile stores its table row-interleaved (format 3); inspect says so.
TEST_F(Cli, InspectShowsTheRowInterleavedTableOfAFusedCompile) {
  const std::string art = dir_.file("f.qemb");
  ASSERT_EQ(run_command(q("compile " + ckpt_ + " --qnn-sdk-version 2.48 --quiet --mode fused -o " + art)).exit_code, 0);
  auto r = run_command(q("inspect " + art + " --json"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["format_version"], 3);
  ASSERT_EQ(j["tensors"][0]["name"], "embedding_weight");
  EXPECT_EQ(j["tensors"][0]["layout"], "row_interleaved");
  EXPECT_EQ(j["tensors"][0]["row_stride"], 8);  // 4-byte scale + 3 bytes of 6 nibbles, to a multiple of 4
  EXPECT_EQ(j["tensors"][0]["bytes"], 40 * 8);
  EXPECT_EQ(j["tensors"][0]["encoding"]["num_scales"], 40);
  EXPECT_EQ(j["tensors"][0]["encoding"]["scales"], "in rows");
  size_t rows_sections = 0;
  for (const auto& s : j["sections"]) rows_sections += s["kind"] == "ROWS";
  EXPECT_EQ(rows_sections, 1u);
  r = run_command(q("inspect " + art));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("storage:      'embedding_weight' row-interleaved, 8 bytes a row (scale, then values)\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("embedding_weight: STATIC SFIXED_POINT_8 [40, 6] {per-axis axis=0 bw=4 n=40 scales in rows} "
                       "row_stride=8 data=320B\n"),
            std::string::npos)
      << r.out;
}

// inspect names the export-onnx command for the artifact, and that command works
// (a materialized optimized artifact holds only the folded table: --folded).
TEST_F(Cli, InspectShowsTheCommandThatExportsTheArtifact) {
  for (const char* mode : {"fused", "materialize"}) {
    SCOPED_TRACE(mode);
    const std::string stem = dir_.file(std::string("a_") + mode);
    ASSERT_EQ(run_command(q("compile " + ckpt_ + " --qnn-sdk-version 2.48 --quiet --mode " + mode + " -o " + stem +
                            ".qemb"))
                  .exit_code,
              0);
    const std::string want = "qemb export-onnx " + stem + ".qemb" +
                             (std::string(mode) == "materialize" ? " --folded" : "") + " --encodings " + stem +
                             ".encodings.json -o " + stem + ".onnx";
    auto r = run_command(q("inspect " + stem + ".qemb"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("\nexport:       " + want + "\n"), std::string::npos) << r.out;
    r = run_command(q("inspect " + stem + ".qemb --json"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(nlohmann::json::parse(r.out)["export_onnx_command"], want);
#ifdef QEMB_HAVE_ONNX
    r = run_command(kQemb + want.substr(4));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_TRUE(std::filesystem::exists(stem + ".onnx"));
    EXPECT_TRUE(std::filesystem::exists(stem + ".encodings.json"));
#endif
  }
}

// compile --json is inspect --json of the new artifact, plus the output path
// and the timing; the reasons are inspect's pattern_reason and mode_reason.
TEST_F(Cli, CompileJsonIsInspectJsonWithTiming) {
  const std::string art = dir_.file("a.qemb");
  auto c = run_command("{ " + q("compile " + ckpt_ + " --qnn-sdk-version 2.37 --mode fused --json -o " + art) +
                       " 2>" + dir_.file("stderr.txt") + "; }");
  ASSERT_EQ(c.exit_code, 0) << c.out;
  // Standard output holds only the JSON; what the legacy pattern costs is
  // said on standard error, --json or not.
  EXPECT_EQ(qemb::testing::read_text(dir_.file("stderr.txt")).rfind(
                "qemb: warning: the legacy pattern collapses 28 of 40 rows (70.00%)", 0),
            0u);
  auto compiled = nlohmann::json::parse(c.out, nullptr, false);
  ASSERT_FALSE(compiled.is_discarded()) << c.out;
  auto i = run_command(q("inspect " + art + " --json"));
  ASSERT_EQ(i.exit_code, 0) << i.out;
  auto inspected = nlohmann::json::parse(i.out);
  ASSERT_TRUE(compiled.contains("timing"));
  EXPECT_TRUE(compiled["timing"]["seconds"].is_number());
  EXPECT_GT(compiled["timing"]["seconds"].get<double>(), 0.0);
  EXPECT_TRUE(compiled["timing"]["rows_per_s"].is_number());
  EXPECT_EQ(compiled["output"], art);
  compiled.erase("timing");
  compiled.erase("output");
  EXPECT_EQ(compiled, inspected);
  EXPECT_EQ(compiled["pattern"], "legacy");
  EXPECT_NE(compiled["pattern_reason"].get<std::string>().find("2.37"), std::string::npos);
  EXPECT_EQ(compiled["mode"], "fused");
  EXPECT_EQ(compiled["mode_reason"], "requested");
}

// A mistyped --tensor gets one explanation in every command: where the path
// leaves the checkpoint's tree and the closest names there, not a list of
// every tensor.
TEST_F(Cli, MistypedTensorGetsTheSameSuggestionEverywhere) {
  const std::string big = dir_.file("big.safetensors");
  std::vector<SafetensorsTensorData> tensors;
  auto table = qemb::testing::spread_table(40, 6, 9);
  std::vector<uint8_t> bytes(table.size() * 4);
  std::memcpy(bytes.data(), table.data(), bytes.size());
  tensors.push_back({"model.embed_tokens.weight", "F32", {40, 6}, bytes});
  for (int i = 0; i < 300; ++i)
    tensors.push_back({"model.layers." + std::to_string(i) + ".weight", "F32", {2, 2}, std::vector<uint8_t>(16, 0)});
  ASSERT_TRUE(write_safetensors(big, {}, tensors).ok());
  const std::string tail = "': 'model' has no member 'embed_tokns'; closest existing names: 'model.embed_tokens', "
                           "'model.layers'";
  for (const std::string& cmd :
       {"compile " + big + " --tensor model.embed_tokns.weight -o " + dir_.file("a.qemb"),
        "eval " + big + " --tensor model.embed_tokns.weight",
        "fakequant " + big + " --scheme 16a4w --tensor model.embed_tokns.weight -o " + dir_.file("f.safetensors")}) {
    SCOPED_TRACE(cmd);
    auto r = run_command(q(cmd));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.out, "qemb: error: not found: no tensor 'model.embed_tokns.weight' in '" + big + tail + "\n");
  }
}

TEST_F(Cli, RunWritesNpyOfTheRightShapeAndType) {
  const std::string art = dir_.file("a.qemb");
  ASSERT_EQ(run_command(q("compile " + ckpt_ + " --qnn-sdk-version 2.48 -o " + art)).exit_code, 0);
  auto r = run_command(q("run " + art + " --tokens 1,2,39 -o " + dir_.file("u.npy")));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto u = read_npy(dir_.file("u.npy"));
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->dtype, "<u2");
  EXPECT_EQ(u->shape, (std::vector<int64_t>{3, 6}));
  r = run_command(q("run " + art + " --tokens 1,2,39 --dequantize -o " + dir_.file("f.npy")));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto f = read_npy(dir_.file("f.npy"));
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->dtype, "<f4");
  EXPECT_EQ(f->shape, (std::vector<int64_t>{3, 6}));
  r = run_command(q("run " + art + " --tokens 3"));
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out.rfind("3:", 0), 0u) << r.out;
}

// --out-dtype f16 | bf16: the float32 output, rounded to nearest even, as
// qemb/half.h converts it; the text forms print the half's exact value.
TEST_F(Cli, RunWritesHalfPrecisionOutputs) {
  const std::string art = dir_.file("a.qemb");
  ASSERT_EQ(run_command(q("compile " + ckpt_ + " --qnn-sdk-version 2.48 -o " + art)).exit_code, 0);
  const std::string ids = " --tokens 0,1,2,39 --dequantize";
  ASSERT_EQ(run_command(q("run " + art + ids + " -o " + dir_.file("f.npy"))).exit_code, 0);
  auto f = read_npy(dir_.file("f.npy"));
  ASSERT_TRUE(f.ok());
  std::vector<float> y(f->data.size() / 4);
  std::memcpy(y.data(), f->data.data(), f->data.size());
  for (const char* dtype : {"f16", "bf16"}) {
    SCOPED_TRACE(dtype);
    const bool bf16 = std::string(dtype) == "bf16";
    const std::string path = dir_.file(std::string(dtype) + ".npy");
    auto r = run_command(q("run " + art + ids + " --out-dtype " + dtype + " -o " + path));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    auto h = read_npy(path);
    ASSERT_TRUE(h.ok());
    EXPECT_EQ(h->dtype, bf16 ? "<u2" : "<f2");
    EXPECT_EQ(h->shape, (std::vector<int64_t>{4, 6}));
    ASSERT_EQ(h->data.size(), y.size() * 2);
    std::string text;
    for (size_t i = 0; i < y.size(); ++i) {
      uint16_t got;
      std::memcpy(&got, h->data.data() + 2 * i, 2);
      const uint16_t want = bf16 ? qemb::float_to_bf16(y[i]) : qemb::float_to_f16(y[i]);
      ASSERT_EQ(got, want) << "element " << i << " y=" << y[i];
      char buf[32];
      std::snprintf(buf, sizeof(buf), " %.9g", static_cast<double>(bf16 ? qemb::bf16_to_float(want) : qemb::f16_to_float(want)));
      if (i % 6 == 0) text += (i ? "\n" : "") + std::string(i == 0 ? "0:" : i == 6 ? "1:" : i == 12 ? "2:" : "39:");
      text += buf;
    }
    r = run_command(q("run " + art + ids + " --out-dtype " + dtype));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(r.out, text + "\n");
  }
}

TEST_F(Cli, OutOfRangeIdFailsAndLeavesNoFile) {
  const std::string art = dir_.file("a.qemb");
  ASSERT_EQ(run_command(q("compile " + ckpt_ + " --qnn-sdk-version 2.48 -o " + art)).exit_code, 0);
  auto r = run_command(q("run " + art + " --tokens 0,40 -o " + dir_.file("o.npy")));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("token id 40 at position 1"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir_.file("o.npy")));
  r = run_command(q("run " + art + " --tokens -3 -o " + dir_.file("o.npy")));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("token id -3 at position 0 is negative"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir_.file("o.npy")));
}

TEST_F(Cli, FailedRunNeverClobbersAnExistingOutput) {
  const std::string art = dir_.file("a.qemb");
  ASSERT_EQ(run_command(q("compile " + ckpt_ + " --qnn-sdk-version 2.48 -o " + art)).exit_code, 0);
  const std::string out = dir_.file("keep.npy");
  { std::ofstream(out) << "precious"; }
  auto r = run_command(q("run " + art + " --tokens 99 -o " + out));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(qemb::testing::read_text(out), "precious");
}

TEST_F(Cli, ForcedOptimizedOnOldSdkIsRejected) {
  auto r = run_command(q("compile " + ckpt_ + " --pattern optimized --qnn-sdk-version 2.37 -o " + dir_.file("a.qemb")));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("embedding_convert"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("needs QNN SDK >= 2.48, but the target is 2.37"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir_.file("a.qemb")));
}

TEST_F(Cli, BadCheckpointInputsGiveClearErrors) {
  struct Bad {
    std::string args, message;
  } cases[] = {
      {"--tensor nope", "the checkpoint has no top-level 'nope'; closest existing names: 'model'"},
      {"--tensor model.cube", "[2, 2, 2]"},
      {"--scheme 16a3w", "unknown scheme '16a3w'"},
      {"--pattern fastest", "unknown pattern 'fastest'"},
      {"--qnn-sdk-version 2.x", "2.x"},
  };
  for (const auto& c : cases) {
    auto r = run_command(q("compile " + ckpt_ + " " + c.args + " -o " + dir_.file("x.qemb")));
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << c.args << ": " << r.out;
    EXPECT_FALSE(std::filesystem::exists(dir_.file("x.qemb"))) << c.args;
  }
  { std::ofstream(dir_.file("junk.safetensors")) << "\x10\0\0\0\0\0\0\0{not json!!!!!!}"; }
  auto r = run_command(q("compile " + dir_.file("junk.safetensors") + " -o " + dir_.file("x.qemb")));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("qemb: error: parse error"), std::string::npos) << r.out;
  std::vector<uint8_t> i8(40 * 6, 1);
  ASSERT_TRUE(write_safetensors(dir_.file("i8.safetensors"), {}, {{"wte.weight", "I8", {40, 6}, i8}}).ok());
  r = run_command(q("compile " + dir_.file("i8.safetensors") + " -o " + dir_.file("x.qemb")));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("I8"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir_.file("x.qemb")));
}

TEST_F(Cli, CorruptArtifactIsRefused) {
  const std::string art = dir_.file("a.qemb");
  ASSERT_EQ(run_command(q("compile " + ckpt_ + " --qnn-sdk-version 2.48 -o " + art)).exit_code, 0);
  std::filesystem::resize_file(art, std::filesystem::file_size(art) - 10);
  auto r = run_command(q("run " + art + " --tokens 1"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("qemb: error: corrupt"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace qemb
