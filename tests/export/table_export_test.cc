// export-onnx of an artifact of several tables (issue 36, section 2): one
// table by name, or every table; never "the metadata names no scheme".
#include <gtest/gtest.h>

#include <vector>

#include "qemb/checkpoint.h"
#include "qemb/compiler.h"
#include "qemb/export.h"
#include "support/checkpoints.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace qemb {
namespace {

using namespace qemb::testing;

// Written in this order (not alphabetical): user, item, ctx.
std::string write_tables(const TempDir& dir) {
  const std::string path = dir.file("rec.safetensors");
  Status s = write_safetensors(path, {},
                               {{"emb.user.weight", "F32", {12, 4}, encode_floats(spread_table(12, 4, 1), "F32")},
                                {"emb.item.weight", "F32", {20, 6}, encode_floats(spread_table(20, 6, 2), "F32")},
                                {"emb.ctx.weight", "F32", {8, 3}, encode_floats(spread_table(8, 3, 3), "F32")}});
  EXPECT_TRUE(s.ok()) << s.message();
  return path;
}

std::string compile_named(const TempDir& dir, const std::string& ckpt) {
  auto opened = Checkpoint::open(ckpt);
  EXPECT_TRUE(opened.ok());
  auto selected = opened->select_named_tables({"emb.*", "emb.item.weight=unused"});
  EXPECT_FALSE(selected.ok());  // selected twice
  selected = opened->select_named_tables({"emb.user.weight=user", "emb.i*=item", "emb.ctx.weight"});
  EXPECT_TRUE(selected.ok()) << selected.error().message;
  std::vector<CompileOptions> tables;
  for (const NamedTable& t : *selected) {
    CompileOptions o;
    o.tensor = t.tensor;
    o.node_name = t.name;
    o.qnn_sdk_version = "2.48";
    tables.push_back(o);
  }
  const std::string out = dir.file("rec.qemb");
  auto compiled = compile_checkpoint_tables(ckpt, tables, out);
  EXPECT_TRUE(compiled.ok()) << compiled.error().message;
  return out;
}

TEST(TableExport, ExportOneTableOrAll) {
  TempDir dir;
  const std::string art = compile_named(dir, write_tables(dir));
  auto a = load_artifact(art);
  ASSERT_TRUE(a.ok());
  expect_error(quantized_embedding(*a).status(), ErrorCode::kUnsupported,
               "the artifact holds 3 tables (user, item, emb.ctx.weight); export one with OnnxExportRequest.table = "
               "NAME, or all as one model with OnnxExportRequest.all_tables");
  auto item = quantized_embeddings(*a, "item");
  ASSERT_TRUE(item.ok()) << item.error().message;
  ASSERT_EQ(item->size(), 1u);
  EXPECT_EQ((*item)[0].node, "item");
  EXPECT_EQ((*item)[0].rows, 20);
  EXPECT_EQ((*item)[0].dim, 6);
  auto all = quantized_embeddings(*a);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[2].node, "emb.ctx.weight");
  expect_error(quantized_embeddings(*a, "nope").status(), ErrorCode::kNotFound,
               "the artifact has no table 'nope'; its tables: user, item, emb.ctx.weight");
}

}  // namespace
}  // namespace qemb
