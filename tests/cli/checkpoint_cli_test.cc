// The command line over every checkpoint form: a sharded folder for compile
// and fakequant (--link), GGUF for eval, and an artifact of several tables
// for compile --tensor, inspect and run --table. GGUF in every ggml block
// type qemb reads (ggml's own files, tests/data/gguf) compiles and evaluates
// as its float values do.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "qemb/artifact.h"
#include "qemb/gguf.h"
#include "qemb/npy.h"
#include "qemb/safetensors.h"
#include "support/checkpoints.h"
#include "support/torch_files.h"
#include "support/temp_dir.h"

namespace qemb {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using namespace qemb::testing;

const std::string kQemb = QEMB_CLI_PATH;

CommandResult qemb(const std::string& args) { return run_command(kQemb + " " + args); }
// stdout only (the JSON), stderr dropped.
CommandResult qemb_stdout(const std::string& args) { return run_command("(" + kQemb + " " + args + " 2>/dev/null)"); }

const std::string kGgufData = QEMB_SOURCE_DIR "/tests/data/gguf/";
// ggml's file names for the types in tests/data/gguf, and qemb's names.
const std::vector<std::pair<std::string, std::string>> kGgufFixtures = {
    {"f32", "F32"},   {"f16", "F16"},   {"bf16", "BF16"}, {"q8_0", "Q8_0"}, {"q4_0", "Q4_0"},
    {"q4_1", "Q4_1"}, {"q5_0", "Q5_0"}, {"q5_1", "Q5_1"}, {"q2_K", "Q2_K"}, {"q3_K", "Q3_K"},
    {"q4_K", "Q4_K"}, {"q5_K", "Q5_K"}, {"q6_K", "Q6_K"}, {"iq4_nl", "IQ4_NL"}, {"iq4_xs", "IQ4_XS"}};

TEST(CheckpointCli, ShardedFolderCompilesAndFakequantsIntoAFolder) {
  TempDir dir;
  ShardedCheckpoint c = write_sharded_checkpoint(dir.file("ckpt"));
  write_text_file(c.folder + "/config.json", "{\"vocab_size\": 96}\n");
  auto r = qemb("compile " + c.folder + " --qnn-sdk-version 2.48 -o " + dir.file("a.qemb"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("tensor:  model.embed_tokens.weight [96 x 40] BF16"));
  r = qemb("fakequant " + c.folder + " --scheme 16a4w --qnn-sdk-version 2.48 --link -o " + dir.file("fq"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("wrote folder " + dir.file("fq") + " (every other tensor and file unchanged, 2 shards "
                               "hard-linked)"));
  EXPECT_EQ(read_bytes(dir.file("fq/config.json")), read_bytes(c.folder + "/config.json"));
  EXPECT_EQ(read_bytes(dir.file("fq/model.safetensors.index.json")), read_bytes(c.index));
}

TEST(CheckpointCli, ExportOnnxReadsShardedFoldersAndGguf) {
  TempDir dir;
  ShardedCheckpoint c = write_sharded_checkpoint(dir.file("ckpt"));
  auto r = qemb("export-onnx " + c.folder + " --qnn-sdk-version 2.48 -o " + dir.file("s.onnx"));
  if (r.out.find("built without ONNX export") != std::string::npos) GTEST_SKIP() << r.out;
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("checkpoint: 16a4w [96 x 40], optimized pattern"));
  // The model records where its table came from.
  const std::vector<uint8_t> model = read_bytes(dir.file("s.onnx"));
  const std::string text(model.begin(), model.end());
  EXPECT_THAT(text, HasSubstr("\"file\":\"" + c.folder + "\""));
  EXPECT_THAT(text, HasSubstr("\"tensor\":\"model.embed_tokens.weight\""));

  const auto table = spread_table(40, 64, 8);
  ASSERT_TRUE(write_gguf(dir.file("m.gguf"), {{"general.architecture", "llama"}},
                         {{"token_embd.weight", 8, {40, 64}, gguf_quantize_q8_0(table.data(), table.size())}})
                  .ok());
  r = qemb("export-onnx " + dir.file("m.gguf") + " --qnn-sdk-version 2.48 -o " + dir.file("g.onnx"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("checkpoint: 16a4w [40 x 64], optimized pattern"));
}

TEST(CheckpointCli, EvalOfAQuantizedGgufSaysSo) {
  TempDir dir;
  const auto table = spread_table(40, 64, 8);
  ASSERT_TRUE(write_gguf(dir.file("m.gguf"), {{"general.architecture", "llama"}},
                         {{"token_embd.weight", 8, {40, 64}, gguf_quantize_q8_0(table.data(), table.size())}})
                  .ok());
  auto r = qemb("eval " + dir.file("m.gguf") + " --qnn-sdk-version 2.48");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("tensor      token_embd.weight Q8_0 [40 x 64]"));
  EXPECT_THAT(r.out, HasSubstr("source      already quantized (Q8_0)"));
}

// A GGUF table and a safetensors file holding its dequantized values (ggml's
// own dequantization) compile to the same artifact: every section byte for
// byte, and the same metadata but for the source dtype. Both are compiled
// from the same path (the format is told by the magic), so even the
// provenance's file name agrees.
TEST(CheckpointCli, EveryGgufTypeCompilesToTheArtifactOfItsFloats) {
  TempDir dir;
  const std::string model = dir.file("model");  // no extension: GGUF or safetensors by its first bytes
  for (const auto& [stem, type] : kGgufFixtures) {
    SCOPED_TRACE(type);
    for (const std::string& f : {model, dir.file("g.qemb"), dir.file("s.qemb")}) fs::remove(f);
    fs::copy_file(kGgufData + stem + ".gguf", model);
    auto r = qemb("compile " + model + " --qnn-sdk-version 2.48 -o " + dir.file("g.qemb"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_THAT(r.out, HasSubstr("tensor:  token_embd.weight [64 x 512] " + type + "\n"));
    fs::remove(model);
    ASSERT_TRUE(write_safetensors(model, {}, {{"token_embd.weight", "F32", {64, 512}, read_bytes(kGgufData + stem + ".f32")}})
                    .ok());
    r = qemb("compile " + model + " --qnn-sdk-version 2.48 -o " + dir.file("s.qemb"));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_THAT(r.out, HasSubstr("tensor:  token_embd.weight [64 x 512] F32\n"));

    auto g = load_artifact(dir.file("g.qemb")), s = load_artifact(dir.file("s.qemb"));
    ASSERT_TRUE(g.ok()) << g.error().to_string();
    ASSERT_TRUE(s.ok()) << s.error().to_string();
    EXPECT_EQ(g->metadata["source"]["dtype"], type);
    EXPECT_EQ(s->metadata["source"]["dtype"], "F32");
    nlohmann::json gm = g->metadata, sm = s->metadata;
    EXPECT_EQ(g->metadata["source"]["format"], "gguf");
    EXPECT_EQ(s->metadata["source"]["format"], "safetensors");
    for (const char* key : {"dtype", "format"}) {
      gm["source"].erase(key);
      sm["source"].erase(key);
    }
    EXPECT_EQ(gm, sm);
    EXPECT_EQ(g->format_version, s->format_version);
    ASSERT_EQ(g->sections.size(), s->sections.size());
    int data_sections = 0;
    for (size_t i = 0; i < g->sections.size(); ++i) {
      const SectionInfo &a = g->sections[i], &b = s->sections[i];
      EXPECT_EQ(a.kind, b.kind) << i;
      EXPECT_EQ(a.name, b.name) << i;
      if (a.kind == SectionKind::kMeta) continue;  // the metadata, compared above
      ASSERT_EQ(a.size, b.size) << a.name;
      EXPECT_EQ(a.checksum, b.checksum) << a.name;
      EXPECT_EQ(std::memcmp(g->bytes + a.offset, s->bytes + b.offset, a.size), 0) << a.name;
      data_sections += a.kind == SectionKind::kData || a.kind == SectionKind::kRows;
    }
    EXPECT_GE(data_sections, 1);  // the quantized table itself was compared
  }
  // inspect names the source's type.
  fs::remove(model);
  fs::copy_file(kGgufData + "q4_K.gguf", model);
  fs::remove(dir.file("g.qemb"));
  ASSERT_EQ(qemb("compile " + model + " --qnn-sdk-version 2.48 -o " + dir.file("g.qemb")).exit_code, 0);
  auto r = qemb("inspect " + dir.file("g.qemb"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("source:       " + model + " : token_embd.weight (Q4_K, gguf)\n"));
  r = qemb_stdout("inspect " + dir.file("g.qemb") + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["source"]["dtype"], "Q4_K");
  EXPECT_EQ(j["source"]["tensor"], "token_embd.weight");
}

// eval of a block-quantized GGUF says which type it was and measures error
// against the float values ggml's dequantization gives: its metrics are those
// of a safetensors file holding those values.
TEST(CheckpointCli, EvalOfEveryGgufTypeNamesItAndMeasuresAgainstItsFloats) {
  TempDir dir;
  for (const auto& [stem, type] : kGgufFixtures) {
    SCOPED_TRACE(type);
    const std::string gguf = kGgufData + stem + ".gguf", st = dir.file(stem + ".safetensors");
    ASSERT_TRUE(write_safetensors(st, {}, {{"token_embd.weight", "F32", {64, 512}, read_bytes(kGgufData + stem + ".f32")}})
                    .ok());
    const bool quantized = type != "F32" && type != "F16" && type != "BF16";
    auto text = qemb("eval " + gguf + " --qnn-sdk-version 2.48");
    ASSERT_EQ(text.exit_code, 0) << text.out;
    EXPECT_THAT(text.out, HasSubstr("tensor      token_embd.weight " + type + " [64 x 512] from " + gguf + "\n"));
    if (quantized)
      EXPECT_THAT(text.out, HasSubstr("\nsource      already quantized (" + type +
                                      "): the float table is its exact dequantization, so the figures below measure "
                                      "re-quantization only\n"));
    else
      EXPECT_THAT(text.out, ::testing::Not(HasSubstr("already quantized")));

    auto g = qemb_stdout("eval " + gguf + " --json --scheme all --qnn-sdk-version 2.48");
    auto s = qemb_stdout("eval " + st + " --json --scheme all --qnn-sdk-version 2.48");
    ASSERT_EQ(g.exit_code, 0) << g.out;
    ASSERT_EQ(s.exit_code, 0) << s.out;
    auto gj = nlohmann::json::parse(g.out, nullptr, false), sj = nlohmann::json::parse(s.out, nullptr, false);
    ASSERT_FALSE(gj.is_discarded()) << g.out;
    ASSERT_FALSE(sj.is_discarded()) << s.out;
    EXPECT_EQ(gj["dtype"], type);
    EXPECT_EQ(gj["source_quantized"], quantized);
    EXPECT_EQ(gj["file"], gguf);
    EXPECT_EQ(sj["dtype"], "F32");
    EXPECT_EQ(sj["source_quantized"], false);
    for (const char* key : {"dtype", "source_quantized", "file"}) {
      gj.erase(key);
      sj.erase(key);
    }
    EXPECT_EQ(gj, sj);
  }
}

TEST(CheckpointCli, SeveralTablesInOneArtifact) {
  TempDir dir;
  ShardedCheckpoint c = write_sharded_checkpoint(dir.file("ckpt"));
  const std::string art = dir.file("t.qemb");
  auto r = qemb("compile " + c.index + " --tensor model.embed_tokens.weight --tensor 'model.layers.1.w*'" +
                " --scheme 16a8w --scheme model.layers.1.w2.weight=16a4w --mode model.layers.1.w0.weight=fused" +
                " --qnn-sdk-version 2.48 -o " + art);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  r = qemb("inspect " + art + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["tables"].size(), 5u);
  EXPECT_EQ(j["tables"][0]["name"], "model.embed_tokens.weight");
  EXPECT_EQ(j["tables"][1]["name"], "model.layers.1.w0.weight");
  EXPECT_EQ(j["tables"][1]["mode"], "fused");
  EXPECT_EQ(j["tables"][3]["scheme"], "16a4w");
  EXPECT_EQ(j["tables"][4]["scheme"], "16a8w");
  r = qemb("inspect " + art);
  EXPECT_THAT(r.out, HasSubstr("tables:       5"));
  EXPECT_THAT(r.out, HasSubstr("  model.layers.1.w2.weight: 16a4w optimized"));

  // --table picks one; its rows are what a one-table compile of it gives.
  ASSERT_EQ(qemb("compile " + c.index + " --tensor model.layers.1.w2.weight --scheme 16a4w --qnn-sdk-version 2.48 -o " +
                 dir.file("one.qemb"))
                .exit_code,
            0);
  auto picked = qemb("run " + art + " --table model.layers.1.w2.weight --tokens 2,0,1");
  auto alone = qemb("run " + dir.file("one.qemb") + " --tokens 2,0,1");
  ASSERT_EQ(picked.exit_code, 0) << picked.out;
  EXPECT_EQ(picked.out, alone.out);
  auto none = qemb("run " + art + " --tokens 1");
  EXPECT_NE(none.exit_code, 0);
  EXPECT_THAT(none.out, HasSubstr("the artifact holds 5 tables (model.embed_tokens.weight, model.layers.1.w0.weight"));
  EXPECT_THAT(none.out, HasSubstr("choose one with --table NAME"));
  // --name is for one table only.
  auto named = qemb("compile " + c.index + " --tensor 'model.layers.1.w*' --name x -o " + dir.file("n.qemb"));
  EXPECT_NE(named.exit_code, 0);
  EXPECT_THAT(named.out, HasSubstr("--name names a one-table artifact"));
  EXPECT_FALSE(fs::exists(dir.file("n.qemb")));
}

TEST(CheckpointCli, PytorchAndNumpyInputsCompileAndInspectNamesTheirForm) {
  TempDir dir;
  const auto table = spread_table(40, 16, 12);
  std::ofstream(dir.file("m.pt"), std::ios::binary)
      << torch_zip(state_dict_pickle({{"model.embed_tokens.weight", "FloatStorage", "0", 640, 0, {40, 16}, {16, 1}}}),
                   {{"0", float_bytes(table)}});
  auto r = qemb("compile " + dir.file("m.pt") + " --qnn-sdk-version 2.48 -o " + dir.file("p.qemb"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("tensor:  model.embed_tokens.weight [40 x 16] F32"));
  r = qemb("inspect " + dir.file("p.qemb"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("source:       " + dir.file("m.pt") + " : model.embed_tokens.weight (F32, pytorch)\n"));
  r = qemb("inspect " + dir.file("p.qemb") + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["source"]["format"], "pytorch");

  const std::vector<uint8_t> halves = encode_floats(table, "F16");
  std::ofstream(dir.file("two.npz"), std::ios::binary) << stored_zip(
      {{"emb.npy", [&] {
          auto n = encode_npy("<f2", {40, 16}, halves.data(), halves.size());
          return std::string(n->begin(), n->end());
        }()},
       {"ids.npy", [&] {
          const std::vector<uint8_t> z(8, 0);
          auto n = encode_npy("<i8", {1}, z.data(), z.size());
          return std::string(n->begin(), n->end());
        }()}});
  r = qemb("compile " + dir.file("two.npz") + " --tensor emb --qnn-sdk-version 2.48 -o " + dir.file("z.qemb"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("tensor:  emb [40 x 16] F16"));
  r = qemb("inspect " + dir.file("z.qemb"));
  EXPECT_THAT(r.out, HasSubstr(" : emb (F16, npz)\n"));
  r = qemb("eval " + dir.file("two.npz") + " --tensor emb --qnn-sdk-version 2.48");
  ASSERT_EQ(r.exit_code, 0) << r.out;
}

TEST(CheckpointCli, TorchWrittenFolderCompiles) {
  if (!python_has("torch")) GTEST_SKIP() << "python3 cannot import torch (Debian's python3-torch writes the file)";
  TempDir dir;
  std::filesystem::create_directories(dir.file("ckpt"));
  std::ofstream(dir.file("w.py")) << "import sys, torch\n"
                                     "torch.manual_seed(0)\n"
                                     "m = torch.nn.Module()\n"
                                     "m.embed_tokens = torch.nn.Embedding(50, 24)\n"
                                     "m.proj = torch.nn.Linear(24, 8)\n"
                                     "torch.save(m.state_dict(), sys.argv[1] + '/pytorch_model.bin')\n";
  auto r = run_command(kTestPython + " " + dir.file("w.py") + " " + dir.file("ckpt"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  r = qemb("compile " + dir.file("ckpt") + " --qnn-sdk-version 2.48 -o " + dir.file("a.qemb"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("tensor:  embed_tokens.weight [50 x 24] F32"));
  r = qemb("inspect " + dir.file("a.qemb"));
  EXPECT_THAT(r.out, HasSubstr(" : embed_tokens.weight (F32, pytorch)\n"));
}

}  // namespace
}  // namespace qemb
