// `qemb run ART --bags OFFSETS.npy --tokens-file IDS.npy [--weights W.npy]
// [--pool sum|mean]`: the pooled rows it writes are the library's, bit for
// bit, for every form of bags; it prints one row per bag without -o.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <span>
#include <tuple>
#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

#include "qemb/compiler.h"
#include "qemb/embedding_bag.h"
#include "qemb/npy.h"
#include "qemb/runtime.h"
#include "qemb/safetensors.h"
#include "support/test_util.h"

namespace qemb {
namespace {

using qemb::testing::run_command;
using qemb::testing::TempDir;

const std::string kQemb = QEMB_CLI_PATH;

template <typename T>
void write_vector(const std::string& path, const char* descr, const std::vector<T>& v) {
  ASSERT_TRUE(write_npy(path, descr, {static_cast<int64_t>(v.size())}, v.data(), v.size() * sizeof(T)).ok());
}

class RunBags : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string ckpt = dir_.file("model.safetensors");
    auto table = qemb::testing::spread_table(40, 6, 9);
    std::vector<uint8_t> bytes(table.size() * 4);
    std::memcpy(bytes.data(), table.data(), bytes.size());
    ASSERT_TRUE(write_safetensors(ckpt, {}, {{"model.embed_tokens.weight", "F32", {40, 6}, bytes}}).ok());
    CompileOptions options;
    options.qnn_sdk_version = "2.48";
    art_ = dir_.file("t.qemb");
    ASSERT_TRUE(compile_checkpoint(ckpt, options, art_).ok());
    write_vector<int64_t>(dir_.file("ids.npy"), "<i8", ids_);
    write_vector<int32_t>(dir_.file("offsets.npy"), "<i4", {0, 2, 2, 5, 6});
    write_vector<int64_t>(dir_.file("offsets_b.npy"), "<i8", {0, 2, 2, 5});
    write_vector<int32_t>(dir_.file("lengths.npy"), "<i4", {2, 0, 3, 1});
    write_vector<float>(dir_.file("w.npy"), "<f4", weights_);
  }

  // The library's answer for the same input.
  std::vector<float> library(PoolMode mode, bool weighted, std::optional<int64_t> padding = {}) {
    auto rt = EmbeddingRuntime::load(art_);
    EXPECT_TRUE(rt.ok());
    const std::vector<int64_t> offsets{0, 2, 2, 5, 6};
    TableBags t;
    t.table = rt->get();
    t.indices = std::span<const int64_t>(ids_);
    t.boundaries = std::span<const int64_t>(offsets);
    t.mode = mode;
    t.padding_idx = padding;
    if (weighted) t.per_sample_weights = std::span<const float>(weights_);
    std::vector<float> out(4 * 6);
    EXPECT_TRUE(embedding_bag(t, out.data()).ok());
    return out;
  }

  std::vector<float> output(const std::string& path) {
    auto a = read_npy(path);
    EXPECT_TRUE(a.ok()) << a.error().message;
    EXPECT_EQ(a->dtype, "<f4");
    EXPECT_EQ(a->shape, (std::vector<int64_t>{4, 6}));
    std::vector<float> v(a->data.size() / 4);
    std::memcpy(v.data(), a->data.data(), a->data.size());
    return v;
  }

  std::string run(const std::string& args) {
    const std::string out = dir_.file("out.npy");
    auto r = run_command(kQemb + " run " + art_ + " --tokens-file " + dir_.file("ids.npy") + " " + args + " -o " + out);
    EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.out;
    return out;
  }

  static void expect_bits(const std::vector<float>& want, const std::vector<float>& got) {
    ASSERT_EQ(want.size(), got.size());
    for (size_t k = 0; k < want.size(); ++k)
      EXPECT_EQ(std::memcmp(&want[k], &got[k], 4), 0) << k << ": " << got[k] << " vs " << want[k];
  }

  TempDir dir_;
  std::string art_;
  std::vector<int64_t> ids_{3, 39, 0, 7, 7, 12};
  std::vector<float> weights_{0.5f, -1.25f, 0.0f, 2.0f, -0.0f, 3.0f};
};

TEST_F(RunBags, SumMeanAndWeightsAreTheLibrarysBits) {
  expect_bits(library(PoolMode::kSum, false), output(run("--bags " + dir_.file("offsets.npy"))));
  expect_bits(library(PoolMode::kMean, false), output(run("--bags " + dir_.file("offsets.npy") + " --pool mean")));
  expect_bits(library(PoolMode::kSum, true),
              output(run("--bags " + dir_.file("offsets.npy") + " --weights " + dir_.file("w.npy"))));
  expect_bits(library(PoolMode::kMean, false, 7),
              output(run("--bags " + dir_.file("offsets.npy") + " --pool mean --padding-idx 7")));
}

TEST_F(RunBags, EveryBagFormatGivesTheSameRows) {
  const std::vector<float> want = library(PoolMode::kSum, false);
  expect_bits(want, output(run("--bags " + dir_.file("offsets_b.npy") + " --bag-format offsets")));
  expect_bits(want, output(run("--bags " + dir_.file("lengths.npy") + " --bag-format lengths --threads 2")));
  expect_bits(want, output(run("--bags " + dir_.file("offsets.npy") + " --reference")));
}

TEST_F(RunBags, PrintsOneRowPerBagWithoutAnOutput) {
  auto r = run_command(kQemb + " run " + art_ + " --tokens 1,2 --bags " + dir_.file("offsets_b.npy") +
                       " --bag-format offsets 2>&1");
  EXPECT_NE(r.exit_code, 0);  // 4 bags whose offsets overrun 2 ids
  EXPECT_NE(r.out.find("offsets[3] = 5 is past the end of the 2 indices"), std::string::npos) << r.out;
  std::vector<int32_t> two{0, 1, 2};
  write_vector<int32_t>(dir_.file("two.npy"), "<i4", two);
  r = run_command(kQemb + " run " + art_ + " --tokens 0,0 --bags " + dir_.file("two.npy"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out.rfind("0: ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("\n1: "), std::string::npos) << r.out;
  // Both bags hold row 0 once: the same printed row.
  const size_t nl = r.out.find('\n');
  EXPECT_EQ(r.out.substr(3, nl - 3), r.out.substr(nl + 4, r.out.find('\n', nl + 1) - nl - 4)) << r.out;
}

// --out-dtype f16 | bf16: the library's half-precision bits of the same bags
// (float16 as '<f2', bfloat16's bit patterns as '<u2').
TEST_F(RunBags, HalfOutputsAreTheLibrarysBits) {
  auto rt = EmbeddingRuntime::load(art_);
  ASSERT_TRUE(rt.ok());
  const std::vector<int64_t> offsets{0, 2, 2, 5, 6};
  TableBags t;
  t.table = rt->get();
  t.indices = std::span<const int64_t>(ids_);
  t.boundaries = std::span<const int64_t>(offsets);
  t.per_sample_weights = std::span<const float>(weights_);
  for (const auto& [flag, type, descr] : {std::tuple{"f16", BagOutputType::kFloat16, "<f2"},
                                          std::tuple{"bf16", BagOutputType::kBFloat16, "<u2"}}) {
    SCOPED_TRACE(flag);
    std::vector<uint16_t> want(4 * 6);
    ASSERT_TRUE(embedding_bags(std::span<const TableBags>(&t, 1), type, want.data()).ok());
    const std::string out = run("--bags " + dir_.file("offsets.npy") + " --weights " + dir_.file("w.npy") +
                                " --out-dtype " + flag);
    auto a = read_npy(out);
    ASSERT_TRUE(a.ok()) << a.error().message;
    EXPECT_EQ(a->dtype, descr);
    EXPECT_EQ(a->shape, (std::vector<int64_t>{4, 6}));
    ASSERT_EQ(a->data.size(), want.size() * 2);
    EXPECT_EQ(std::memcmp(a->data.data(), want.data(), a->data.size()), 0);
  }
}

// qemb bench --bags: the pooled kernel against the memcpy gather, as JSON.
// (Only the shape of the answer: speed itself is not a unit test.)
TEST_F(RunBags, BenchPoolsBagsAndReportsTheRatio) {
  auto r = run_command(kQemb + " bench " + art_ + " --bags --pooling 3 --batch 8 --seconds 0.01 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["pooling"], 3);
  EXPECT_EQ(j["batch"], 8);
  EXPECT_EQ(j["kernel"].get<std::string>().rfind("bag_u16_i64[", 0), 0u) << j["kernel"];  // materialized
  EXPECT_GT(j["rows_per_s"].get<double>(), 0.0);
  EXPECT_GT(j["ratio"].get<double>(), 0.0);
  r = run_command(kQemb + " bench " + art_ + " --bags --pooling 0 2>&1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("--pooling must be at least 1"), std::string::npos) << r.out;
  r = run_command(kQemb + " bench " + art_ + " --bags --dequantize 2>&1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("--bags pools into float32 already; drop --dequantize"), std::string::npos) << r.out;
}

// Bad weights (the bad-input table takes one bad file a row; these need a good
// --bags file too): a clear message, exit 1, and no output file.
TEST_F(RunBags, BadWeightsFailAndWriteNothing) {
  write_vector<float>(dir_.file("short.npy"), "<f4", {1.0f, 2.0f, 3.0f});
  write_vector<double>(dir_.file("f64.npy"), "<f8", {1, 2, 3, 4, 5, 6});
  const struct {
    std::string args, message;
  } cases[] = {
      {"--weights " + dir_.file("short.npy"),
       "table 0 ('t.qemb'): 3 per-sample weights for 6 indices; give one weight per index"},
      {"--weights " + dir_.file("f64.npy"), "holds dtype '<f8'; per-sample weights must be float32 ('<f4')"},
      {"--weights " + dir_.file("w.npy") + " --pool mean",
       "table 0 ('t.qemb'): per-sample weights need pool mode sum (as in PyTorch, mean takes none)"},
  };
  const std::string out = dir_.file("never.npy");
  for (const auto& c : cases) {
    auto r = run_command(kQemb + " run " + art_ + " --tokens-file " + dir_.file("ids.npy") + " --bags " +
                         dir_.file("offsets.npy") + " " + c.args + " -o " + out + " 2>&1");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("qemb: error: invalid argument: "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << r.out;
    EXPECT_FALSE(std::filesystem::exists(out)) << c.args;
  }
}

// Writes one F32 table per spec (spread values seeded by its row count) into
// one checkpoint in `dir` and compiles them all into the artifact `art`: the
// 3-wide table at 16a8w, the others at 16a4w, each in its spec's mode.
struct TableSpec {
  const char* name;
  int64_t rows, dim;
  CompileMode mode;
};

::testing::AssertionResult compile_tables(const TempDir& dir, std::span<const TableSpec> specs,
                                          const std::string& art) {
  std::vector<SafetensorsTensorData> tensors;
  std::vector<CompileOptions> options;
  for (const TableSpec& t : specs) {
    auto values = qemb::testing::spread_table(t.rows, t.dim, 5 + t.rows);
    std::vector<uint8_t> bytes(values.size() * 4);
    std::memcpy(bytes.data(), values.data(), bytes.size());
    tensors.push_back({t.name, "F32", {t.rows, t.dim}, bytes});
    CompileOptions o;
    o.tensor = o.node_name = t.name;
    o.qnn_sdk_version = "2.48";
    o.mode = t.mode;
    o.scheme = t.dim == 3 ? Scheme::k16a8w : Scheme::k16a4w;
    options.push_back(o);
  }
  const std::string ckpt = dir.file("tables.safetensors");
  if (Status st = write_safetensors(ckpt, {}, tensors); !st.ok()) return ::testing::AssertionFailure() << st.message();
  auto compiled = compile_checkpoint_tables(ckpt, options, art);
  if (!compiled.ok()) return ::testing::AssertionFailure() << compiled.status().message();
  return ::testing::AssertionSuccess();
}

// --table picks one table of a multi-table artifact; the pooled rows have that
// table's width (here narrower and wider than the first table's).
TEST(RunBagsTables, TableOfAMultiTableArtifact) {
  TempDir dir;
  const TableSpec tables[] = {{"a.weight", 40, 6, CompileMode::kFused},
                              {"b.weight", 30, 3, CompileMode::kFused},
                              {"c.weight", 20, 21, CompileMode::kFused}};
  const std::string art = dir.file("multi.qemb");
  ASSERT_TRUE(compile_tables(dir, tables, art));
  const std::vector<int64_t> ids{3, 19, 0, 7, 7, 12};
  const std::vector<int64_t> offsets{0, 2, 2, 5, 6};
  write_vector<int64_t>(dir.file("ids.npy"), "<i8", ids);
  write_vector<int64_t>(dir.file("offsets.npy"), "<i8", offsets);
  auto rt = EmbeddingRuntime::load(art);
  ASSERT_TRUE(rt.ok());
  for (const auto& t : tables) {
    SCOPED_TRACE(t.name);
    TableBags b;
    b.embedding_table = *(*rt)->find_table(t.name);
    b.indices = std::span<const int64_t>(ids);
    b.boundaries = std::span<const int64_t>(offsets);
    b.mode = PoolMode::kMean;
    std::vector<float> want(4 * static_cast<size_t>(t.dim));
    ASSERT_TRUE(embedding_bag(b, want.data()).ok());
    const std::string out = dir.file(std::string(t.name) + ".npy");
    auto r = run_command(kQemb + " run " + art + " --table " + t.name + " --tokens-file " + dir.file("ids.npy") +
                         " --bags " + dir.file("offsets.npy") + " --pool mean -o " + out + " 2>&1");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    auto a = read_npy(out);
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->shape, (std::vector<int64_t>{4, t.dim}));
    ASSERT_EQ(a->data.size(), want.size() * 4);
    EXPECT_EQ(std::memcmp(a->data.data(), want.data(), a->data.size()), 0);
  }
  auto r = run_command(kQemb + " run " + art + " --tokens-file " + dir.file("ids.npy") + " --bags " +
                       dir.file("offsets.npy") + " -o " + dir.file("never.npy") + " 2>&1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("the artifact holds 3 tables (a.weight, b.weight, c.weight); choose one with --table NAME"),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir.file("never.npy")));
}

// The three-table artifact of TableOfAMultiTableArtifact, with ids, offsets
// and weights for each table (the same 4 bags).
class TableBatched : public ::testing::Test {
 protected:
  struct Spec {
    const char* name;
    int64_t rows, dim;
    std::vector<int64_t> ids;
  };

  void SetUp() override {
    std::vector<TableSpec> tables;
    for (const Spec& t : specs_) {
      tables.push_back({t.name, t.rows, t.dim, t.dim == 6 ? CompileMode::kMaterialize : CompileMode::kFused});
      write_vector<int64_t>(dir_.file(std::string(t.name) + ".ids.npy"), "<i8", t.ids);
      std::vector<float> w(t.ids.size());
      for (size_t k = 0; k < w.size(); ++k) w[k] = 0.25f * static_cast<float>(k) - 0.5f;
      write_vector<float>(dir_.file(std::string(t.name) + ".w.npy"), "<f4", w);
      weights_.push_back(w);
    }
    art_ = dir_.file("multi.qemb");
    ASSERT_TRUE(compile_tables(dir_, tables, art_));
    write_vector<int64_t>(dir_.file("offsets.npy"), "<i8", {0, 2, 2, 5, 6});
    write_vector<int32_t>(dir_.file("offsets3.npy"), "<i4", {0, 2, 2, 6});
  }

  // --table T --bags O --tokens-file I [--weights W], once per table, in `order`.
  std::string table_flags(const std::vector<size_t>& order, bool weights) {
    std::string args;
    for (size_t t : order) {
      const std::string name = specs_[t].name;
      args += " --table " + name + " --bags " + dir_.file("offsets.npy") + " --tokens-file " +
              dir_.file(name + ".ids.npy");
      if (weights) args += " --weights " + dir_.file(name + ".w.npy");
    }
    return args;
  }

  // The library's table-batched call for the same tables.
  std::vector<TableBags> library_bags(const EmbeddingRuntime& rt, const std::vector<size_t>& order, bool weights) {
    std::vector<TableBags> bags;
    for (size_t t : order) {
      TableBags b;
      b.table = &rt;
      b.embedding_table = *rt.find_table(specs_[t].name);
      b.indices = std::span<const int64_t>(specs_[t].ids);
      b.boundaries = std::span<const int64_t>(offsets_);
      if (weights) b.per_sample_weights = std::span<const float>(weights_[t]);
      bags.push_back(b);
    }
    return bags;
  }

  TempDir dir_;
  std::string art_;
  std::vector<Spec> specs_{{"a.weight", 40, 6, {3, 19, 0, 7, 7, 12}},
                           {"b.weight", 30, 3, {29, 1, 2, 2, 0, 5}},
                           {"c.weight", 20, 21, {19, 0, 4, 4, 8, 1}}};
  std::vector<std::vector<float>> weights_;
  const std::vector<int64_t> offsets_{0, 2, 2, 5, 6};
};

// One call over c, a, b (and a again: a table may serve several features):
// a [4, 21 + 6 + 3 + 6] output, each table's columns at its offset, bit for
// bit the library's table-batched result, in float32 and both half types.
TEST_F(TableBatched, WritesEachTablesColumnsAtItsOffset) {
  auto rt = EmbeddingRuntime::load(art_);
  ASSERT_TRUE(rt.ok());
  const std::vector<size_t> order{2, 0, 1, 0};
  const std::vector<TableBags> bags = library_bags(**rt, order, true);
  const int64_t width = 21 + 6 + 3 + 6;
  std::vector<float> want(4 * static_cast<size_t>(width));
  ASSERT_TRUE(embedding_bags(bags, want.data()).ok());
  // Table a's block (columns 21..26) is its own single-table pooling.
  std::vector<float> a_alone(4 * 6);
  ASSERT_TRUE(embedding_bag(bags[1], a_alone.data()).ok());
  for (size_t b = 0; b < 4; ++b)
    EXPECT_EQ(std::memcmp(&want[b * width + 21], &a_alone[b * 6], 6 * sizeof(float)), 0) << b;

  const std::string out = dir_.file("out.npy");
  auto r = run_command(kQemb + " run " + art_ + table_flags(order, true) + " -o " + out + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto a = read_npy(out);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->dtype, "<f4");
  EXPECT_EQ(a->shape, (std::vector<int64_t>{4, width}));
  ASSERT_EQ(a->data.size(), want.size() * 4);
  EXPECT_EQ(std::memcmp(a->data.data(), want.data(), a->data.size()), 0);

  for (const auto& [flag, type] : {std::pair{"f16", BagOutputType::kFloat16}, std::pair{"bf16", BagOutputType::kBFloat16}}) {
    SCOPED_TRACE(flag);
    std::vector<uint16_t> want_half(want.size());
    ASSERT_TRUE(embedding_bags(bags, type, want_half.data()).ok());
    r = run_command(kQemb + " run " + art_ + table_flags(order, true) + " --out-dtype " + flag + " -o " + out +
                    " 2>&1");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    a = read_npy(out);
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->shape, (std::vector<int64_t>{4, width}));
    ASSERT_EQ(a->data.size(), want_half.size() * 2);
    EXPECT_EQ(std::memcmp(a->data.data(), want_half.data(), a->data.size()), 0);
  }

  // Without -o: one printed row per bag, all 36 columns.
  r = run_command(kQemb + " run " + art_ + table_flags({1, 2}, false));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::string first = r.out.substr(0, r.out.find('\n'));
  EXPECT_EQ(std::count(first.begin(), first.end(), ' '), 3 + 21) << first;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 4) << r.out;
}

// Misuse that needs several tables: a clear message, exit 1, no output file.
TEST_F(TableBatched, BadInputFailsAndWritesNothing) {
  write_vector<int64_t>(dir_.file("far.npy"), "<i8", {1, 2, 30, 0, 0, 0});
  const std::string a = " --table a.weight --bags " + dir_.file("offsets.npy") + " --tokens-file " +
                        dir_.file("a.weight.ids.npy");
  const std::string b_ids = " --tokens-file " + dir_.file("b.weight.ids.npy");
  const struct {
    std::string args, message;
  } cases[] = {
      {a + " --table b.weight --bags " + dir_.file("offsets3.npy") + b_ids,
       "table 1 ('b.weight') has 3 bags but table 0 ('a.weight') has 4; every table of a call needs the same "
       "number of bags"},
      {a + " --table b.weight --bags " + dir_.file("offsets.npy") + " --tokens-file " + dir_.file("far.npy"),
       "table 1 ('b.weight'): id 30 at position 2 (bag 2) is past the last row; ids must be in [0, 30)"},
      {a + " --table nope --bags " + dir_.file("offsets.npy") + b_ids,
       "the artifact has no table 'nope'; its tables: a.weight, b.weight, c.weight"},
      {a + " --table b.weight" + b_ids, "--bags is given once and --table 2 times: pooling several tables takes one "
                                        "--table NAME and one --bags file per table, in the same order"},
      {a + " --table b.weight --bags " + dir_.file("offsets.npy"),
       "--tokens-file is given once for 2 tables: give one id list per --table, in the same order"},
      {a + " --weights " + dir_.file("a.weight.w.npy") + " --table b.weight --bags " + dir_.file("offsets.npy") + b_ids,
       "--weights is given once for 2 tables: give one weights file per --table, in the same order, or none"},
  };
  const std::string out = dir_.file("never.npy");
  for (const auto& c : cases) {
    auto r = run_command(kQemb + " run " + art_ + c.args + " -o " + out + " 2>&1");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << c.args << "\n" << r.out;
    EXPECT_FALSE(std::filesystem::exists(out)) << c.args;
  }
}

}  // namespace
}  // namespace qemb
