// Several tables, one way everywhere (issue 36, section 2): tables keep the
// checkpoint's order and can be named (TENSOR=NAME), a lookup without a table
// on an artifact of several is an error listing them, and the flat
// table-batched pooled call (TBE / KeyedJaggedTensor) pools exactly what
// embedding_bags does over the same features.
#include <gtest/gtest.h>

#include <vector>

#include "qemb/bench.h"
#include "qemb/checkpoint.h"
#include "qemb/compiler.h"
#include "qemb/embedding_bag.h"
#include "qemb/runtime.h"
#include "support/checkpoints.h"
#include "support/expect_error.h"
#include "support/named_tables.h"
#include "support/temp_dir.h"

namespace qemb {
namespace {

using namespace qemb::testing;

TEST(TableNames, GlobsKeepTheCheckpointsOrderAndSpecsNameTables) {
  TempDir dir;
  auto ckpt = Checkpoint::open(write_tables(dir));
  ASSERT_TRUE(ckpt.ok());
  EXPECT_EQ(*ckpt->select_tables({"emb.*"}),
            (std::vector<std::string>{"emb.user.weight", "emb.item.weight", "emb.ctx.weight"}));
  auto named = ckpt->select_named_tables({"emb.ctx.weight=ctx", "emb.*"});
  ASSERT_TRUE(named.ok()) << named.error().message;
  EXPECT_EQ(*named, (std::vector<NamedTable>{{"emb.ctx.weight", "ctx"},
                                             {"emb.user.weight", "emb.user.weight"},
                                             {"emb.item.weight", "emb.item.weight"}}));
}

TEST(TableNames, BadSpecsSayWhatToWrite) {
  TempDir dir;
  auto ckpt = Checkpoint::open(write_tables(dir));
  ASSERT_TRUE(ckpt.ok());
  expect_error(ckpt->select_named_tables({"emb.*=all"}).status(), ErrorCode::kInvalidArgument,
               "table spec 'emb.*=all' gives the name 'all' to 3 tensors (emb.user.weight, emb.item.weight, "
               "emb.ctx.weight); a name is for one table: give each tensor its own TENSOR=NAME");
  expect_error(ckpt->select_named_tables({"emb.user.weight="}).status(), ErrorCode::kInvalidArgument,
               "table spec 'emb.user.weight=' gives an empty name after '='; write TENSOR=NAME");
  expect_error(ckpt->select_named_tables({"=user"}).status(), ErrorCode::kInvalidArgument,
               "table spec '=user' names no tensor before '='; write TENSOR=NAME");
  expect_error(ckpt->select_named_tables({"emb.user.weight=t", "emb.item.weight=t"}).status(),
               ErrorCode::kInvalidArgument,
               "two tables are both named 't' (tensors 'emb.user.weight' and 'emb.item.weight'); table names must "
               "be unique");
  expect_error(ckpt->select_named_tables({"emb.*", "emb.item.weight=item"}).status(), ErrorCode::kInvalidArgument,
               "tensor 'emb.item.weight' is selected twice, the second time as 'item'; select each tensor once");
}

TEST(TableNames, NoSilentFirstTable) {
  TempDir dir;
  const std::string art = compile_named(dir, write_tables(dir));
  auto rt = EmbeddingRuntime::load(art);
  ASSERT_TRUE(rt.ok()) << rt.error().message;
  EXPECT_EQ((*rt)->table_names(), (std::vector<std::string>{"user", "item", "emb.ctx.weight"}));
  std::vector<uint16_t> out(4 * 6);
  const std::vector<int64_t> ids = {1, 2};
  const std::string listed = "the artifact holds 3 tables (user, item, emb.ctx.weight); ";
  expect_error((*rt)->lookup(ids, out.data()), ErrorCode::kInvalidArgument,
               listed + "look one up through EmbeddingRuntime::find_table(NAME) or table(INDEX)");
  std::vector<float> f(4 * 6);
  expect_error((*rt)->lookup_dequantized(ids, f.data()), ErrorCode::kInvalidArgument, listed);
  // A table's errors name it.
  const EmbeddingTable& item = *(*rt)->find_table("item").value();
  expect_error(item.lookup(std::vector<int64_t>{3, 20}, out.data()), ErrorCode::kOutOfRange,
               "table 'item': token id 20 at position 1 is past the last row; ids must be in [0, 20)");
  ASSERT_TRUE(item.lookup(ids, out.data()).ok());
  // Pooling a runtime of several tables without naming one.
  TableBags bags;
  bags.table = rt->get();
  const std::vector<int64_t> offsets = {0, 2};
  bags.indices = std::span<const int64_t>(ids);
  bags.boundaries = std::span<const int64_t>(offsets);
  expect_error(embedding_bag(bags, f.data()), ErrorCode::kInvalidArgument,
               "table 0: " + listed + "choose one with TableBags.embedding_table (EmbeddingRuntime::find_table(NAME))");
  // bench: the table is named, or the error lists them.
  BenchOptions bo;
  bo.min_seconds = 0.001;
  bo.batch = 4;
  expect_error(run_bench(**rt, bo).status(), ErrorCode::kInvalidArgument, listed + "choose one with BenchOptions.table");
  bo.table = "item";
  auto r = run_bench(**rt, bo);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->table, "item");
  bo.table = "nope";
  expect_error(run_bench(**rt, bo).status(), ErrorCode::kNotFound,
               "the artifact has no table 'nope'; its tables: user, item, emb.ctx.weight");
}

TEST(TableNames, FlatBagsPoolWhatEmbeddingBagsPools) {
  TempDir dir;
  const std::string art = compile_named(dir, write_tables(dir));
  auto loaded = EmbeddingRuntime::load(art);
  ASSERT_TRUE(loaded.ok());
  const EmbeddingRuntime& rt = **loaded;
  // Features: item, user, item again (a shared table); B = 2 bags each.
  const std::vector<int32_t> features = {1, 0, 1};
  const std::vector<int64_t> indices = {0, 19, 3, /**/ 11, /**/ 5, 6, 7, 2};
  const std::vector<int64_t> offsets = {0, 2, 3, 3, 4, 7, 8};
  FlatBags flat;
  flat.runtime = &rt;
  flat.feature_tables = features;
  flat.indices = std::span<const int64_t>(indices);
  flat.offsets = std::span<const int64_t>(offsets);
  auto shape = flat_bags_shape(flat);
  ASSERT_TRUE(shape.ok());
  EXPECT_EQ(shape->bags, 2u);
  EXPECT_EQ(shape->width, 16u);
  std::vector<float> got(2 * 16, -1.0f), want(2 * 16, -2.0f);
  ASSERT_TRUE(embedding_bags_flat(flat, got.data()).ok());
  // The same features as TableBags, one per feature.
  const std::vector<int64_t> ids0 = {0, 19, 3}, off0 = {0, 2, 3}, ids1 = {11}, off1 = {0, 0, 1},
                             ids2 = {5, 6, 7, 2}, off2 = {0, 3, 4};
  std::vector<TableBags> tables(3);
  const std::vector<int64_t>* ids[3] = {&ids0, &ids1, &ids2};
  const std::vector<int64_t>* offs[3] = {&off0, &off1, &off2};
  for (int f = 0; f < 3; ++f) {
    tables[f].table = &rt;
    tables[f].embedding_table = &rt.table(static_cast<size_t>(features[f]));
    tables[f].indices = std::span<const int64_t>(*ids[f]);
    tables[f].boundaries = std::span<const int64_t>(*offs[f]);
  }
  ASSERT_TRUE(embedding_bags(tables, want.data()).ok());
  EXPECT_EQ(got, want);
  // Without feature_tables: one feature per table, in the artifact's order.
  FlatBags every;
  every.runtime = &rt;
  const std::vector<int32_t> ids32 = {1, 11, 2, 0};
  const std::vector<int32_t> offsets32 = {0, 1, 2, 3, 3, 4, 4};
  every.indices = std::span<const int32_t>(ids32);
  every.offsets = std::span<const int32_t>(offsets32);
  std::vector<float> pooled(2 * 13);
  ASSERT_TRUE(embedding_bags_flat(every, pooled.data()).ok());
  std::vector<float> row(6);
  ASSERT_TRUE(rt.table(1).lookup_dequantized(std::vector<int64_t>{2}, row.data()).ok());
  for (int j = 0; j < 6; ++j) EXPECT_EQ(pooled[4 + j], row[j]);  // bag 0, item's columns
  // Bad input: nothing written, the message says what and where.
  std::vector<float> untouched(2 * 16, 7.0f);
  const std::vector<int64_t> bad_ids = {0, 19, 3, 12, 5, 6, 7, 2};
  flat.indices = std::span<const int64_t>(bad_ids);
  expect_error(embedding_bags_flat(flat, untouched.data()), ErrorCode::kOutOfRange,
               "feature 1 (table 'user'): id 12 at position 3 of indices (bag 1) is past the last row; ids must be "
               "in [0, 12)");
  EXPECT_EQ(untouched, std::vector<float>(2 * 16, 7.0f));
  flat.indices = std::span<const int64_t>(indices);
  const std::vector<int64_t> short_offsets = {0, 2, 3, 4, 8};
  flat.offsets = std::span<const int64_t>(short_offsets);
  expect_error(embedding_bags_flat(flat, untouched.data()), ErrorCode::kInvalidArgument,
               "offsets holds 5 values; 3 features of B bags each need 3 * B + 1 (feature-major: feature f's bag b "
               "starts at offsets[f * B + b], the last equal to the number of indices)");
  const std::vector<int64_t> falling = {0, 2, 1, 3, 4, 7, 8};
  flat.offsets = std::span<const int64_t>(falling);
  expect_error(embedding_bags_flat(flat, untouched.data()), ErrorCode::kInvalidArgument,
               "offsets[2] = 1 is less than offsets[1] = 2; offsets must not decrease");
  const std::vector<int32_t> bad_feature = {1, 3, 0};
  flat.offsets = std::span<const int64_t>(offsets);
  flat.feature_tables = bad_feature;
  expect_error(embedding_bags_flat(flat, untouched.data()), ErrorCode::kInvalidArgument,
               "feature_tables[1] = 3 is not a table of the artifact; its tables: 0 'user', 1 'item', 2 "
               "'emb.ctx.weight'");
  EXPECT_EQ(untouched, std::vector<float>(2 * 16, 7.0f));
}

}  // namespace
}  // namespace qemb
