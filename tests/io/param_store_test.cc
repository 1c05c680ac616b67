#include "io/param_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "qemb/half.h"
#include "support/test_util.h"

namespace qemb {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<uint8_t> bytes_of(const std::vector<float>& values, const std::string& dtype) {
  auto bytes = floats_to_dtype_bytes(values.data(), values.size(), dtype);
  EXPECT_TRUE(bytes.ok());
  return bytes.ok() ? *bytes : std::vector<uint8_t>{};
}

// An LLM-shaped checkpoint with every dtype the store converts, an integer
// tensor, and a name ("blocks.0") that is both a tensor and a module.
class ParamStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.file("model.safetensors");
    std::vector<SafetensorsTensorData> tensors;
    tensors.push_back({"model.embed_tokens.weight", "F32", {3, 2}, bytes_of({1, 2, 3, 4, 5, 6}, "F32")});
    tensors.push_back({"model.layers.0.self_attn.q_proj.weight", "BF16", {2, 2}, bytes_of({0.5f, -1, 2, 4}, "BF16")});
    tensors.push_back({"model.layers.0.input_layernorm.weight", "F16", {2}, bytes_of({1, 0.25f}, "F16")});
    tensors.push_back({"model.norm.weight", "F32", {2}, bytes_of({7, 8}, "F32")});
    tensors.push_back({"model.position_ids", "I32", {2}, {1, 0, 0, 0, 2, 0, 0, 0}});
    tensors.push_back({"blocks.0", "F32", {1}, bytes_of({9}, "F32")});
    tensors.push_back({"blocks.0.bias", "F32", {1}, bytes_of({10}, "F32")});
    tensors.push_back({"lm_head.weight", "F32", {3, 2}, bytes_of({-1, -2, -3, -4, -5, -6}, "F32")});
    ASSERT_TRUE(write_safetensors(path_, {{"format", "pt"}, {"note", "kept as is"}}, tensors).ok());
    auto store = ParamStore::open(path_);
    ASSERT_TRUE(store.ok()) << store.error().to_string();
    store_.emplace(std::move(store).value());
  }

  ParamStore& store() { return *store_; }

  qemb::testing::TempDir dir_;
  std::string path_;
  std::optional<ParamStore> store_;
};

TEST_F(ParamStoreTest, GetResolvesNestedDottedPaths) {
  auto embed = store().get("model.embed_tokens.weight");
  ASSERT_TRUE(embed.ok()) << embed.error().to_string();
  EXPECT_THAT(embed->shape, ElementsAre(3, 2));
  EXPECT_THAT(embed->values, ElementsAre(1, 2, 3, 4, 5, 6));
  auto q = store().get("model.layers.0.self_attn.q_proj.weight");
  ASSERT_TRUE(q.ok());
  EXPECT_THAT(q->values, ElementsAre(0.5f, -1, 2, 4));
  auto norm = store().get("model.layers.0.input_layernorm.weight");
  ASSERT_TRUE(norm.ok());
  EXPECT_THAT(norm->values, ElementsAre(1, 0.25f));
  auto info = store().info("model.layers.0.self_attn.q_proj.weight");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->dtype, "BF16");
  EXPECT_EQ(info->name, "model.layers.0.self_attn.q_proj.weight");
}

TEST_F(ParamStoreTest, ANameCanBeBothATensorAndAModule) {
  auto block = store().get("blocks.0");
  ASSERT_TRUE(block.ok()) << block.error().to_string();
  EXPECT_THAT(block->values, ElementsAre(9));
  auto bias = store().get("blocks.0.bias");
  ASSERT_TRUE(bias.ok());
  EXPECT_THAT(bias->values, ElementsAre(10));
  auto members = store().children("blocks.0");
  ASSERT_TRUE(members.ok());
  EXPECT_THAT(*members, ElementsAre("bias"));
}

TEST_F(ParamStoreTest, SetWritesTheTensorGetReadsAndNeverAddsAFlatEntry) {
  const std::vector<std::string> before = store().names();
  ASSERT_TRUE(store().set("model.layers.0.self_attn.q_proj.weight", {{2, 2}, {1, 1, 1, 1}}).ok());
  auto q = store().get("model.layers.0.self_attn.q_proj.weight");
  ASSERT_TRUE(q.ok());
  EXPECT_THAT(q->values, ElementsAre(1, 1, 1, 1));
  EXPECT_EQ(store().names(), before);  // no "model.layers.0.self_attn.q_proj.weight" appended as a new key
  EXPECT_THAT(store().modified(), ElementsAre("model.layers.0.self_attn.q_proj.weight"));
  EXPECT_TRUE(store().is_modified("model.layers.0.self_attn.q_proj.weight"));
  EXPECT_FALSE(store().is_modified("model.norm.weight"));
  EXPECT_FALSE(store().is_modified("model.nope"));
  // The other tensors read as before.
  EXPECT_THAT(store().get("model.norm.weight")->values, ElementsAre(7, 8));
}

TEST_F(ParamStoreTest, SetOfWhatGetReturnsRoundTripsForEveryFloatTensor) {
  for (const std::string& name : store().names()) {
    if (name == "model.position_ids") continue;
    auto t = store().get(name);
    ASSERT_TRUE(t.ok()) << name;
    const FloatTensor copy = *t;
    ASSERT_TRUE(store().set(name, *t).ok()) << name;
    EXPECT_EQ(store().get(name)->values, copy.values) << name;
  }
}

TEST_F(ParamStoreTest, UnknownPathNamesTheFirstMissingComponentAndSuggests) {
  auto r = store().get("model.layers.0.embed.weight");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(r.error().message,
            "no tensor 'model.layers.0.embed.weight' in '" + path_ +
                "': 'model.layers.0' has no member 'embed'; closest existing names: 'model.layers.0.self_attn', "
                "'model.layers.0.input_layernorm'");

  auto top = store().get("modle.embed_tokens.weight");
  ASSERT_FALSE(top.ok());
  EXPECT_EQ(top.error().code, ErrorCode::kNotFound);
  EXPECT_THAT(top.error().message,
              HasSubstr("the checkpoint has no top-level 'modle'; closest existing names: 'model', "));

  auto past_leaf = store().get("model.norm.weight.scale");
  ASSERT_FALSE(past_leaf.ok());
  EXPECT_EQ(past_leaf.error().code, ErrorCode::kNotFound);
  EXPECT_THAT(past_leaf.error().message, HasSubstr("'model.norm.weight' is a tensor and has no member 'scale'"));
}

TEST_F(ParamStoreTest, GetAndSetFailTheSameWayOnTheSamePath) {
  for (const char* path : {"model.layers.0.embed.weight", "modle.embed_tokens.weight", "model.layers.0",
                                  "model.norm.weight.scale", "", "model..norm"}) {
    auto got = store().get(path);
    Status set = store().set(path, {{1}, {0}});
    ASSERT_FALSE(got.ok()) << path;
    ASSERT_FALSE(set.ok()) << path;
    EXPECT_EQ(got.error().code, set.code()) << path;
    EXPECT_EQ(got.error().message, set.message()) << path;
  }
  EXPECT_TRUE(store().modified().empty());
}

TEST_F(ParamStoreTest, AModulePathIsNotATensor) {
  auto r = store().info("model.layers.0");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(r.error().message,
              HasSubstr("'model.layers.0' in '" + path_ +
                        "' is a module, not a tensor; its members are: input_layernorm, self_attn"));
  auto empty = store().info("");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(empty.error().message, HasSubstr("empty tensor path"));
}

TEST_F(ParamStoreTest, SetChecksShapeCountAndDtype) {
  Status wrong_shape = store().set("model.embed_tokens.weight", {{2, 3}, {1, 2, 3, 4, 5, 6}});
  EXPECT_EQ(wrong_shape.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(wrong_shape.message(),
            "cannot set tensor 'model.embed_tokens.weight' of shape [3, 2] to values of shape [2, 3]; the shapes "
            "must match");
  Status wrong_count = store().set("model.embed_tokens.weight", {{3, 2}, {1, 2, 3}});
  EXPECT_EQ(wrong_count.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(wrong_count.message(), HasSubstr("(6 values) from 3 values"));
  Status integer = store().set("model.position_ids", {{2}, {1, 2}});
  EXPECT_EQ(integer.code(), ErrorCode::kUnsupported);
  EXPECT_THAT(integer.message(), HasSubstr("dtype I32"));
  EXPECT_EQ(store().get("model.position_ids").error().code, ErrorCode::kUnsupported);
  EXPECT_TRUE(store().modified().empty());
}

// Bytes of the saved file equal the source except inside the replaced spans.
void expect_only_spans_differ(const std::vector<uint8_t>& source, const std::vector<uint8_t>& saved,
                              const std::vector<const SafetensorsTensor*>& replaced) {
  ASSERT_EQ(source.size(), saved.size());
  for (size_t i = 0; i < source.size(); ++i) {
    bool inside = false;
    for (const SafetensorsTensor* t : replaced) inside = inside || (i >= t->begin && i < t->end);
    if (!inside) {
      ASSERT_EQ(source[i], saved[i]) << "byte " << i;
    }
  }
}

TEST_F(ParamStoreTest, SaveReplacesOnlyTheModifiedTensorsBytes) {
  // 1 + 2^-8 is a tie between two BF16 neighbours: it must round to even (1.0).
  const float tie = 1.0f + 1.0f / 256.0f;
  ASSERT_TRUE(store().set("model.layers.0.self_attn.q_proj.weight", {{2, 2}, {tie, 3, -0.0f, 1e-3f}}).ok());
  const std::string out = dir_.file("out1.safetensors");
  ASSERT_TRUE(store().save(out).ok());
  const auto source = qemb::testing::read_text(path_);
  const auto saved = qemb::testing::read_text(out);
  const SafetensorsTensor* q = store().file().find("model.layers.0.self_attn.q_proj.weight");
  expect_only_spans_differ({source.begin(), source.end()}, {saved.begin(), saved.end()}, {q});
  const uint16_t expected[4] = {float_to_bf16(tie), float_to_bf16(3), float_to_bf16(-0.0f), float_to_bf16(1e-3f)};
  EXPECT_EQ(expected[0], 0x3F80);  // 1.0
  EXPECT_EQ(std::memcmp(saved.data() + q->begin, expected, sizeof expected), 0);

  auto reopened = ParamStore::open(out);
  ASSERT_TRUE(reopened.ok());
  EXPECT_THAT(reopened->get("model.layers.0.self_attn.q_proj.weight")->values,
              ElementsAre(1.0f, 3.0f, -0.0f, bf16_to_float(float_to_bf16(1e-3f))));
  EXPECT_EQ(reopened->file().metadata(), store().file().metadata());
}

TEST_F(ParamStoreTest, SaveWithSeveralModifiedTensors) {
  ASSERT_TRUE(store().set("lm_head.weight", {{3, 2}, {0, 0, 0, 0, 0, 1}}).ok());
  ASSERT_TRUE(store().set("model.layers.0.input_layernorm.weight", {{2}, {2, 65504}}).ok());
  ASSERT_TRUE(store().set("model.embed_tokens.weight", {{3, 2}, {6, 5, 4, 3, 2, 1}}).ok());
  const std::string out = dir_.file("out3.safetensors");
  ASSERT_TRUE(store().save(out).ok());
  const auto source = qemb::testing::read_text(path_);
  const auto saved = qemb::testing::read_text(out);
  expect_only_spans_differ({source.begin(), source.end()}, {saved.begin(), saved.end()},
                           {store().file().find("lm_head.weight"),
                            store().file().find("model.layers.0.input_layernorm.weight"),
                            store().file().find("model.embed_tokens.weight")});
  auto reopened = ParamStore::open(out);
  ASSERT_TRUE(reopened.ok());
  EXPECT_THAT(reopened->get("lm_head.weight")->values, ElementsAre(0, 0, 0, 0, 0, 1));
  EXPECT_THAT(reopened->get("model.layers.0.input_layernorm.weight")->values, ElementsAre(2, 65504));
  EXPECT_THAT(reopened->get("model.embed_tokens.weight")->values, ElementsAre(6, 5, 4, 3, 2, 1));
  EXPECT_THAT(reopened->get("model.norm.weight")->values, ElementsAre(7, 8));
}

TEST_F(ParamStoreTest, SaveWithoutChangesIsAByteCopy) {
  const std::string out = dir_.file("copy.safetensors");
  ASSERT_TRUE(store().save(out).ok());
  EXPECT_EQ(qemb::testing::read_text(out), qemb::testing::read_text(path_));
}

TEST_F(ParamStoreTest, SaveRefusesToOverwriteItsSource) {
  ASSERT_TRUE(store().set("model.norm.weight", {{2}, {0, 0}}).ok());
  Status s = store().save(path_);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("is the input checkpoint"));
  EXPECT_THAT(ParamStore::open(path_)->get("model.norm.weight")->values, ElementsAre(7, 8));
}

TEST(SplitDottedPath, KeepsEmptyComponents) {
  EXPECT_THAT(split_dotted_path("a.b.c"), ElementsAre("a", "b", "c"));
  EXPECT_THAT(split_dotted_path("a..b"), ElementsAre("a", "", "b"));
  EXPECT_THAT(split_dotted_path(".a."), ElementsAre("", "a", ""));
  EXPECT_THAT(split_dotted_path("weight"), ElementsAre("weight"));
}

TEST(ParamStoreOpen, MissingFileIsAClearError) {
  auto r = ParamStore::open("/nonexistent/qemb/model.safetensors");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("/nonexistent/qemb/model.safetensors"));
}

}  // namespace
}  // namespace qemb
