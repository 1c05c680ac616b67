// export-onnx of an artifact of several tables (issue 36, section 2): one
// table by name, or every table; never "the metadata names no scheme".
#include <gtest/gtest.h>

#include <vector>

#include "qemb/checkpoint.h"
#include "qemb/compiler.h"
#include "qemb/export.h"
#include "support/checkpoints.h"
#include "support/expect_error.h"
#include "support/named_tables.h"
#include "support/temp_dir.h"

namespace qemb {
namespace {

using namespace qemb::testing;

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
