// Several tables from the command line (issue 36, section 2): compile
// --tensor TENSOR=NAME names a table that run/bench/export-onnx --table reach,
// tables keep the checkpoint's order, a command given no table on an artifact
// of several lists them, and `run --bags --json` prints a summary.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "qemb/npy.h"
#include "qemb/runtime.h"
#include "qemb/safetensors.h"
#include "support/checkpoints.h"
#include "support/test_util.h"

namespace qemb {
namespace {

using qemb::testing::run_command;
using qemb::testing::TempDir;

const std::string kQemb = QEMB_CLI_PATH;

class TablesCli : public ::testing::Test {
 protected:
  void SetUp() override {
    ckpt_ = dir_.file("rec.safetensors");
    using qemb::testing::encode_floats;
    using qemb::testing::spread_table;
    ASSERT_TRUE(write_safetensors(
                    ckpt_, {},
                    {{"emb.user.weight", "F32", {12, 4}, encode_floats(spread_table(12, 4, 1), "F32")},
                     {"emb.item.weight", "F32", {20, 6}, encode_floats(spread_table(20, 6, 2), "F32")},
                     {"emb.ctx.weight", "F32", {8, 3}, encode_floats(spread_table(8, 3, 3), "F32")}})
                    .ok());
    art_ = dir_.file("rec.qemb");
    const auto r = run_command(kQemb + " compile " + ckpt_ + " --tensor emb.user.weight=user --tensor 'emb.i*=item' " +
                               "--tensor emb.ctx.weight --scheme user=16a8w --qnn-sdk-version 2.48 -o " + art_);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    ASSERT_NE(r.out.find("table:   user\ntensor:  emb.user.weight [12 x 4] F32\nscheme:  16a8w\n"), std::string::npos)
        << r.out;
  }
  TempDir dir_;
  std::string ckpt_, art_;
};

TEST_F(TablesCli, NamedTablesInTheOrderGiven) {
  auto rt = EmbeddingRuntime::load(art_);
  ASSERT_TRUE(rt.ok());
  EXPECT_EQ((*rt)->table_names(), (std::vector<std::string>{"user", "item", "emb.ctx.weight"}));
  // A glob's matches come in the checkpoint's order, not alphabetical.
  const std::string all = dir_.file("all.qemb");
  auto r = run_command(kQemb + " compile " + ckpt_ + " --tensor 'emb.*' --qnn-sdk-version 2.48 --quiet -o " + all);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto every = EmbeddingRuntime::load(all);
  ASSERT_TRUE(every.ok());
  EXPECT_EQ((*every)->table_names(),
            (std::vector<std::string>{"emb.user.weight", "emb.item.weight", "emb.ctx.weight"}));
  // One named table: its name, not "embedding".
  const std::string one = dir_.file("one.qemb");
  r = run_command(kQemb + " compile " + ckpt_ + " --tensor emb.item.weight=item --qnn-sdk-version 2.48 --quiet -o " +
                  one);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto single = EmbeddingRuntime::load(one);
  ASSERT_TRUE(single.ok());
  EXPECT_EQ((*single)->table_names(), std::vector<std::string>{"item"});
}

TEST_F(TablesCli, RunAndBenchReachATableByName) {
  auto r = run_command(kQemb + " run " + art_ + " --table user --tokens 1,2");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto rt = EmbeddingRuntime::load(art_);
  ASSERT_TRUE(rt.ok());
  std::vector<uint16_t> rows(2 * 4);
  ASSERT_TRUE((*rt)->find_table("user").value()->lookup(std::vector<int64_t>{1, 2}, rows.data()).ok());
  std::string want;
  for (int i = 0; i < 2; ++i) {
    want += std::to_string(i + 1) + ":";
    for (int j = 0; j < 4; ++j) want += " " + std::to_string(rows[i * 4 + j]);
    want += "\n";
  }
  EXPECT_EQ(r.out, want);
  r = run_command(kQemb + " run " + art_ + " --table user --tokens 12");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "qemb: error: out of range: table 'user': token id 12 at position 0 is past the last row; ids must be in "
                   "[0, 12)\n");
  r = run_command(kQemb + " bench " + art_ + " --table item --seconds 0.01 --batch 8 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["table"], "item");
  r = run_command(kQemb + " bench " + art_ + " --seconds 0.01 --batch 8");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out,
            "qemb: error: invalid argument: the artifact holds 3 tables (user, item, emb.ctx.weight); choose one with "
            "--table NAME\n");
}

TEST_F(TablesCli, BagsJsonSummary) {
  std::vector<int64_t> offsets = {0, 1, 3};
  ASSERT_TRUE(write_npy(dir_.file("off.npy"), "<i8", {3}, offsets.data(), offsets.size() * 8).ok());
  auto r = run_command(kQemb + " run " + art_ + " --table user --tokens 1,2,3 --bags " + dir_.file("off.npy") +
                       " --table emb.ctx.weight --tokens 0,7,7 --bags " + dir_.file("off.npy") + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["bags"], 2);
  EXPECT_EQ(j["width"], 7);
  EXPECT_EQ(j["dtype"], "f32");
  EXPECT_EQ(j["pool"], "sum");
  EXPECT_TRUE(j["output"].is_null());
  ASSERT_EQ(j["tables"].size(), 2u);
  EXPECT_EQ(j["tables"][0]["name"], "user");
  EXPECT_EQ(j["tables"][0]["columns"], nlohmann::json::array({0, 4}));
  EXPECT_EQ(j["tables"][1]["name"], "emb.ctx.weight");
  EXPECT_EQ(j["tables"][1]["columns"], nlohmann::json::array({4, 7}));
  EXPECT_EQ(j["tables"][1]["ids"], 3);
  ASSERT_EQ(j["rows"].size(), 2u);
  ASSERT_EQ(j["rows"][1].size(), 7u);
  auto rt = EmbeddingRuntime::load(art_);
  ASSERT_TRUE(rt.ok());
  std::vector<float> row(3);
  ASSERT_TRUE((*rt)->table(2).lookup_dequantized(std::vector<int64_t>{0}, row.data()).ok());
  for (int k = 0; k < 3; ++k) EXPECT_EQ(j["rows"][0][4 + k].get<float>(), row[k]);
  // With -o the rows go to the file and the summary names it.
  const std::string out = dir_.file("pooled.npy");
  r = run_command(kQemb + " run " + art_ + " --table item --tokens 1,2,3 --bags " + dir_.file("off.npy") +
                  " --json -o " + out);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json k = nlohmann::json::parse(r.out);
  EXPECT_EQ(k["output"], out);
  EXPECT_FALSE(k.contains("rows"));
  auto npy = read_npy(out);
  ASSERT_TRUE(npy.ok());
  EXPECT_EQ(npy->shape, (std::vector<int64_t>{2, 6}));
  // A one-table id error names the table given with --table, not the file.
  r = run_command(kQemb + " run " + art_ + " --table item --tokens 1,2,30 --bags " + dir_.file("off.npy"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out,
            "qemb: error: out of range: table 0 ('item'): id 30 at position 2 (bag 1) is past the last row; ids must "
            "be in [0, 20)\n");
}

#ifdef QEMB_HAVE_ONNX
TEST_F(TablesCli, ExportOneTableOrAll) {
  const std::string onnx = dir_.file("t.onnx");
  auto r = run_command(kQemb + " export-onnx " + art_ + " -o " + onnx);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out,
            "qemb: error: unsupported: the artifact holds 3 tables (user, item, emb.ctx.weight); export one with "
            "--table NAME, or all as one model with --all-tables\n");
  r = run_command(kQemb + " export-onnx " + art_ + " --table item --folded -o " + onnx);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out.substr(0, 24), "table:    item\nartifact:") << r.out;
  r = run_command(kQemb + " export-onnx " + art_ + " --all-tables --folded --encodings " +
                  dir_.file("t.encodings.json") + " -o " + onnx);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("table item: 16a4w [20 x 6], optimized pattern (folded), input item_indices, output "
                       "item_embedding\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("artifact: 3 tables as one model, opset 21\n"), std::string::npos) << r.out;
  const nlohmann::json enc = nlohmann::json::parse(qemb::testing::read_text(dir_.file("t.encodings.json")));
  for (const char* out : {"user_embedding", "item_embedding", "emb.ctx.weight_embedding"})
    EXPECT_TRUE(enc["activation_encodings"].contains(out)) << out;
  r = run_command(kQemb + " export-onnx " + art_ + " --table nope --folded -o " + onnx);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out,
            "qemb: error: not found: the artifact has no table 'nope'; its tables: user, item, emb.ctx.weight\n");
}
#endif

}  // namespace
}  // namespace qemb
