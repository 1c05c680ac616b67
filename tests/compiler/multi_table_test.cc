// One artifact of several tables: each keeps its own scheme, pattern, mode and
// activation encoding, and serves exactly what it would alone.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <numeric>

#include "core/ir.h"
#include "qemb/compiler.h"
#include "qemb/embedding_bag.h"
#include "qemb/half.h"
#include "qemb/inspect.h"
#include "qemb/runtime.h"
#include "support/checkpoints.h"
#include "support/temp_dir.h"

namespace qemb {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using namespace qemb::testing;

constexpr int kTables = 20;

struct TableSpec {
  std::string tensor;
  int64_t rows, dim;
  CompileOptions options;
};

std::vector<TableSpec> specs() {
  std::vector<TableSpec> out;
  for (int i = 0; i < kTables; ++i) {
    TableSpec s;
    s.tensor = "tables." + std::to_string(i) + ".weight";
    s.rows = 3 + 17 * i % 61;
    s.dim = 1 + 7 * i % 37;
    s.options.tensor = s.tensor;
    s.options.node_name = s.tensor;
    s.options.scheme = i % 2 ? Scheme::k16a8w : Scheme::k16a4w;
    s.options.qnn_sdk_version = i % 3 ? "2.48" : "2.37";
    s.options.mode = i % 4 < 2 ? CompileMode::kFused : CompileMode::kMaterialize;
    if (i % 5 == 0) s.options.calibration_tokens = std::vector<int64_t>{0, 1, 2};
    out.push_back(s);
  }
  return out;
}

std::string write_checkpoint(const TempDir& dir) {
  std::vector<SafetensorsTensorData> tensors;
  int i = 0;
  for (const TableSpec& s : specs()) {
    const std::string dtype = i % 3 ? "BF16" : "F32";
    tensors.push_back({s.tensor, dtype, {s.rows, s.dim}, encode_floats(spread_table(s.rows, s.dim, 300 + i), dtype)});
    ++i;
  }
  tensors.push_back({"norm.weight", "F32", {4}, encode_floats({1, 1, 1, 1}, "F32")});
  const std::string path = dir.file("tables.safetensors");
  EXPECT_TRUE(write_safetensors(path, {}, tensors).ok());
  return path;
}

template <typename Out, typename Table>
std::vector<Out> all_rows(const Table& t) {
  std::vector<int64_t> ids(static_cast<size_t>(t.vocab_size()));
  std::iota(ids.rbegin(), ids.rend(), 0);  // descending, to catch row mix-ups
  std::vector<Out> out(ids.size() * static_cast<size_t>(t.dim()));
  Status s;
  if constexpr (std::is_same_v<Out, float>) s = t.lookup_dequantized(ids, out.data());
  else s = t.lookup(ids, out.data());
  EXPECT_TRUE(s.ok()) << s.error().to_string();
  return out;
}

TEST(MultiTable, TwentyTablesEachServeWhatTheyServeAlone) {
  TempDir dir;
  const std::string ckpt = write_checkpoint(dir);
  std::vector<CompileOptions> options;
  for (const TableSpec& s : specs()) options.push_back(s.options);
  const std::string art = dir.file("all.qemb");
  auto compiled = compile_checkpoint_tables(ckpt, options, art);
  ASSERT_TRUE(compiled.ok()) << compiled.error().to_string();
  ASSERT_EQ(compiled->size(), static_cast<size_t>(kTables));

  auto rt = EmbeddingRuntime::load(art);
  ASSERT_TRUE(rt.ok()) << rt.error().to_string();
  // Several tables, some fused (row-interleaved): format 3.
  EXPECT_EQ((*rt)->artifact().format_version, 3u);
  ASSERT_EQ((*rt)->table_count(), static_cast<size_t>(kTables));
  const auto all = specs();
  for (int i = 0; i < kTables; ++i) {
    SCOPED_TRACE(all[i].tensor);
    const EmbeddingTable& t = (*rt)->table(static_cast<size_t>(i));
    EXPECT_EQ(t.name(), all[i].tensor);
    EXPECT_EQ(t.vocab_size(), all[i].rows);
    EXPECT_EQ(t.dim(), all[i].dim);
    EXPECT_EQ(t.metadata()["scheme"], to_string(all[i].options.scheme));
    EXPECT_EQ(t.metadata()["source"]["tensor"], all[i].tensor);
    auto found = (*rt)->find_table(all[i].tensor);
    ASSERT_TRUE(found.ok());
    EXPECT_EQ(*found, &t);

    CompileOptions alone = all[i].options;
    alone.node_name = "embedding";
    const std::string one = dir.file("one.qemb");
    fs::remove(one);
    auto c = compile_checkpoint(ckpt, alone, one);
    ASSERT_TRUE(c.ok()) << c.error().to_string();
    EXPECT_EQ(c->pattern, (*compiled)[static_cast<size_t>(i)].pattern);
    EXPECT_EQ(c->mode, (*compiled)[static_cast<size_t>(i)].mode);
    auto single = EmbeddingRuntime::load(one);
    ASSERT_TRUE(single.ok());
    // Fused tables are stored row-interleaved (format 3); materialized ones
    // hold a uint16 table or a plain per-row table without the zero offsets.
    const bool plain_v1 = c->runtime_graph->ops.size() == 1 && c->runtime_graph->ops[0].type == OpType::kGather;
    EXPECT_EQ((*single)->artifact().format_version, plain_v1 ? 1u : 3u);
    EXPECT_EQ((*single)->activation().scale, t.activation().scale);
    EXPECT_EQ((*single)->activation().zero_point, t.activation().zero_point);
    EXPECT_EQ((*single)->kernel_name(), t.kernel_name());
    EXPECT_EQ(all_rows<uint16_t>(**single), all_rows<uint16_t>(t));
    const auto a = all_rows<float>(**single), b = all_rows<float>(t);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
    // Half outputs of a table are its float32 values rounded, as for one table.
    std::vector<int64_t> ids(static_cast<size_t>(t.vocab_size()));
    std::iota(ids.rbegin(), ids.rend(), 0);
    for (FloatDtype dtype : {FloatDtype::kF16, FloatDtype::kBF16}) {
      std::vector<uint16_t> half(b.size());
      ASSERT_TRUE(t.lookup_dequantized(ids, dtype, half.data()).ok());
      for (size_t k = 0; k < b.size(); ++k)
        ASSERT_EQ(half[k], dtype == FloatDtype::kF16 ? float_to_f16(b[k]) : float_to_bf16(b[k])) << k;
    }
  }
  // The accessors without a table describe the first; a lookup without a
  // table is an error listing them (issue 36: no silent first table).
  EXPECT_EQ((*rt)->vocab_size(), all[0].rows);
  std::vector<uint16_t> row(static_cast<size_t>((*rt)->dim()));
  const Status plain = (*rt)->lookup(std::vector<int64_t>{0}, row.data());
  ASSERT_FALSE(plain.ok());
  EXPECT_EQ(plain.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(plain.message(), HasSubstr("the artifact holds 20 tables (tables.0.weight, tables.1.weight, "));
  EXPECT_THAT(plain.message(), HasSubstr("tables.19.weight); look one up through EmbeddingRuntime::find_table(NAME) "
                                         "or table(INDEX)"));
  auto missing = (*rt)->find_table("tables.99.weight");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_THAT(missing.error().message,
              HasSubstr("the artifact has no table 'tables.99.weight'; its tables: tables.0.weight, tables.1.weight"));
  // inspect lists them all, each with its own scheme.
  const nlohmann::json j = describe_artifact(**rt);
  ASSERT_EQ(j["tables"].size(), static_cast<size_t>(kTables));
  EXPECT_EQ(j["tables"][3]["name"], "tables.3.weight");
  EXPECT_EQ(j["tables"][3]["scheme"], "16a8w");
  EXPECT_EQ(j["tables"][4]["scheme"], "16a4w");
  EXPECT_EQ(j["format_version"], 3);
  // The reference interpreter agrees, table by table.
  RuntimeOptions ro;
  ro.reference = true;
  auto ref = EmbeddingRuntime::load(art, ro);
  ASSERT_TRUE(ref.ok());
  for (int i = 0; i < kTables; ++i)
    EXPECT_EQ(all_rows<uint16_t>((*ref)->table(static_cast<size_t>(i))),
              all_rows<uint16_t>((*rt)->table(static_cast<size_t>(i))))
        << i;
}

TEST(MultiTable, OneTableIsTheOneTableArtifactByteForByte) {
  TempDir dir;
  const std::string ckpt = write_checkpoint(dir);
  CompileOptions o = specs()[7].options;
  auto a = compile_checkpoint_tables(ckpt, {o}, dir.file("a.qemb"));
  ASSERT_TRUE(a.ok()) << a.error().to_string();
  ASSERT_TRUE(compile_checkpoint(ckpt, o, dir.file("b.qemb")).ok());
  EXPECT_EQ(read_bytes(dir.file("a.qemb")), read_bytes(dir.file("b.qemb")));
  auto rt = EmbeddingRuntime::load(dir.file("a.qemb"));
  ASSERT_TRUE(rt.ok());
  EXPECT_EQ((*rt)->table_count(), 1u);
  EXPECT_EQ((*rt)->table(0).name(), o.node_name);
  EXPECT_EQ((*rt)->table(0).metadata()["scheme"], "16a8w");
}

TEST(MultiTable, RefusesDuplicateNamesAndReportsTheFailingTable) {
  TempDir dir;
  const std::string ckpt = write_checkpoint(dir);
  auto s = specs();
  CompileOptions a = s[1].options, b = s[2].options;
  b.node_name = a.node_name;
  auto dup = compile_checkpoint_tables(ckpt, {a, b}, dir.file("x.qemb"));
  ASSERT_FALSE(dup.ok());
  EXPECT_THAT(dup.error().message, HasSubstr("two tables are both named 'tables.1.weight'"));
  b = s[2].options;
  b.calibration_tokens = std::vector<int64_t>{999};
  auto bad = compile_checkpoint_tables(ckpt, {a, b}, dir.file("x.qemb"));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.error().message, HasSubstr("table 'tables.2.weight' (tables.2.weight): calibration token 999"));
  EXPECT_FALSE(fs::exists(dir.file("x.qemb")));
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir.path())) left.push_back(e.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"tables.safetensors"});
}


// Pooled lookups take the tables of one artifact directly, and pool exactly
// what the same tables give as one-table runtimes.
TEST(MultiTable, EmbeddingBagsOverTheTablesOfOneArtifact) {
  TempDir dir;
  const std::string ckpt = write_checkpoint(dir);
  auto s = specs();
  std::vector<CompileOptions> options = {s[2].options, s[5].options, s[11].options};
  ASSERT_TRUE(compile_checkpoint_tables(ckpt, options, dir.file("three.qemb")).ok());
  auto rt = EmbeddingRuntime::load(dir.file("three.qemb"));
  ASSERT_TRUE(rt.ok());
  std::vector<std::unique_ptr<EmbeddingRuntime>> singles;
  for (size_t t = 0; t < options.size(); ++t) {
    const std::string path = dir.file("single" + std::to_string(t) + ".qemb");
    ASSERT_TRUE(compile_checkpoint(ckpt, options[t], path).ok());
    auto one = EmbeddingRuntime::load(path);
    ASSERT_TRUE(one.ok());
    singles.push_back(std::move(*one));
  }
  const std::vector<int64_t> ids = {0, 1, 2, 2, 1, 0};
  const std::vector<int64_t> offsets = {0, 2, 2, 6};  // 3 bags, one empty
  std::vector<TableBags> from_artifact(3), from_singles(3);
  size_t width = 0;
  for (size_t t = 0; t < 3; ++t) {
    from_artifact[t].embedding_table = &(*rt)->table(t);
    from_singles[t].table = singles[t].get();
    for (TableBags* b : {&from_artifact[t], &from_singles[t]}) {
      b->indices = std::span<const int64_t>(ids);
      b->boundaries = std::span<const int64_t>(offsets);
      b->mode = t == 1 ? PoolMode::kMean : PoolMode::kSum;
    }
    width += static_cast<size_t>((*rt)->table(t).dim());
  }
  std::vector<float> a(3 * width, -1.0f), b(3 * width, -2.0f);
  ASSERT_TRUE(embedding_bags(from_artifact, a.data()).ok());
  ASSERT_TRUE(embedding_bags(from_singles, b.data()).ok());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
}

}  // namespace
}  // namespace qemb
