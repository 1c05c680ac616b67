// PyTorch checkpoints and NumPy arrays as checkpoints: files written by torch
// itself (zip and legacy torch.save; f32/f16/bf16, a view at an offset, a
// transposed view, two names on one storage, a nested module) read back
// exactly, and hostile pickles and archives refused with exact messages.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "qemb/checkpoint.h"
#include "qemb/half.h"
#include "qemb/npy.h"
#include "qemb/pytorch.h"
#include "support/checkpoints.h"
#include "support/torch_files.h"

namespace qemb {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace qemb::testing;
using namespace std::string_literals;

// Writes the checkpoints with torch and, for each tensor, its values as
// float32 (torch's own conversion) in <name>.f32.
const char kTorchWriter[] = R"PY(
import sys, collections, torch
out = sys.argv[1]
g = torch.Generator().manual_seed(7)
big = torch.randn(8, 4, generator=g)
tied = torch.randn(9, 2, generator=g)
sd = collections.OrderedDict()
sd['emb.f32'] = torch.randn(7, 5, generator=g)
sd['emb.f16'] = torch.randn(6, 4, generator=g).half()
sd['emb.bf16'] = torch.randn(5, 3, generator=g).bfloat16()
sd['view'] = big[2:5]
sd['transposed'] = big.t()
sd['tied.a'] = tied
sd['tied.b'] = tied
sd['steps'] = torch.arange(6).reshape(2, 3)
torch.manual_seed(3)
seq = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 3))
torch.save(sd, out + '/sd.pt')
torch.save(sd, out + '/legacy.pt', _use_new_zipfile_serialization=False)
torch.save(sd, out + '/p4.pt', pickle_protocol=4)
torch.save({'p': torch.nn.Parameter(big.clone())}, out + '/param.pt')
big.numpy().tofile(out + '/big.f32')
torch.save({'model': seq.state_dict(), 'epoch': 3}, out + '/nested.pth')
torch.save(seq.state_dict(), out + '/seq_legacy.bin', _use_new_zipfile_serialization=False)
for name, t in list(sd.items()) + [('model.' + k, v) for k, v in seq.state_dict().items()]:
    t.float().contiguous().numpy().tofile(out + '/' + name + '.f32')
)PY";

std::vector<float> read_f32_file(const std::string& path) {
  const std::vector<uint8_t> bytes = read_bytes(path);
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

std::vector<float> read_table(const Checkpoint& ckpt, const std::string& name, int64_t begin = 0, int64_t end = -1) {
  auto t = ckpt.table(name);
  EXPECT_TRUE(t.ok()) << name << ": " << t.error().to_string();
  if (!t.ok()) return {};
  if (end < 0) end = t->rows();
  std::vector<float> out(static_cast<size_t>((end - begin) * t->dim()));
  EXPECT_TRUE(t->read_rows(begin, end, out.data()).ok());
  return out;
}

class TorchWritten : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!python_has("torch")) return;
    dir_ = new TempDir("qemb_torch_");
    std::ofstream(dir_->file("write.py")) << kTorchWriter;
    const CommandResult r = run_command(kTestPython + " " + dir_->file("write.py") + " " + dir_->path().string());
    ASSERT_EQ(r.exit_code, 0) << r.out;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (dir_ == nullptr) GTEST_SKIP() << "python3 cannot import torch (Debian's python3-torch writes these files)";
  }
  static std::string file(const std::string& name) { return dir_->file(name); }
  static TempDir* dir_;
};
TempDir* TorchWritten::dir_ = nullptr;

TEST_F(TorchWritten, ZipAndLegacyStateDictsReadExactly) {
  for (const std::string f : {"sd.pt", "legacy.pt", "p4.pt"}) {
    SCOPED_TRACE(f);
    auto ckpt = Checkpoint::open(file(f));
    ASSERT_TRUE(ckpt.ok()) << ckpt.error().to_string();
    EXPECT_EQ(ckpt->format(), CheckpointFormat::kPytorch);
    EXPECT_EQ(ckpt->file(), file(f));
    EXPECT_THAT(ckpt->tensor_names(), ElementsAre("emb.f32", "emb.f16", "emb.bf16", "view", "transposed", "tied.a",
                                                  "tied.b", "steps"));
    for (const std::string name : {"emb.f32", "emb.f16", "emb.bf16", "view", "transposed", "tied.a", "tied.b"}) {
      SCOPED_TRACE(name);
      const std::vector<float> expected = read_f32_file(file(name + ".f32"));
      const std::vector<float> got = read_table(*ckpt, name);
      ASSERT_EQ(got.size(), expected.size());
      EXPECT_EQ(0, std::memcmp(got.data(), expected.data(), got.size() * 4));
    }
    auto info = ckpt->info("emb.bf16");
    ASSERT_TRUE(info.ok());
    EXPECT_EQ(info->dtype, "BF16");
    EXPECT_EQ(info->shape, (std::vector<int64_t>{5, 3}));
    EXPECT_EQ(ckpt->info("transposed")->shape, (std::vector<int64_t>{4, 8}));
    // A row range of a view at an offset, and of a transposed view.
    const std::vector<float> view = read_f32_file(file("view.f32"));
    EXPECT_EQ(read_table(*ckpt, "view", 1, 3), std::vector<float>(view.begin() + 4, view.end()));
    const std::vector<float> tr = read_f32_file(file("transposed.f32"));
    EXPECT_EQ(read_table(*ckpt, "transposed", 2, 3), std::vector<float>(tr.begin() + 16, tr.begin() + 24));
    // Tied weights: one storage, read in place where it is float32 and aligned.
    auto tf = ckpt->tensor_file_of("tied.a");
    ASSERT_TRUE(tf.ok());
    EXPECT_EQ((*tf)->find("tied.a")->first(), (*tf)->find("tied.b")->first());
    EXPECT_EQ((*tf)->find("view")->offset, 8);
    EXPECT_EQ((*tf)->find("transposed")->strides, (std::vector<int64_t>{1, 4}));
    auto transposed = ckpt->table("transposed");
    ASSERT_TRUE(transposed.ok());
    EXPECT_EQ(transposed->rows_in_place(0, 1), nullptr);  // strided: gathered, not in place
    if (f != "legacy.pt") {  // the legacy format packs storages unaligned
      auto t = ckpt->table("view");
      ASSERT_TRUE(t.ok());
      const float* in_place = t->rows_in_place(0, 3);
      ASSERT_NE(in_place, nullptr);
      EXPECT_EQ(0, std::memcmp(in_place, view.data(), view.size() * 4));
    }
    auto steps = ckpt->table("steps");
    ASSERT_FALSE(steps.ok());
    EXPECT_EQ(steps.error().message,
              "tensor 'steps' in '" + file(f) + "' has dtype I64; qemb reads F32, F16 and BF16 embeddings");
  }
}

TEST_F(TorchWritten, ParametersAreTheirTensors) {
  auto ckpt = Checkpoint::open(file("param.pt"));
  ASSERT_TRUE(ckpt.ok()) << ckpt.error().to_string();
  EXPECT_THAT(ckpt->tensor_names(), ElementsAre("p"));
  EXPECT_EQ(read_table(*ckpt, "p"), read_f32_file(file("big.f32")));
}

TEST_F(TorchWritten, NestedModulesFlattenWithDots) {
  for (const std::string f : {"nested.pth", "seq_legacy.bin"}) {
    SCOPED_TRACE(f);
    auto ckpt = Checkpoint::open(file(f));
    ASSERT_TRUE(ckpt.ok()) << ckpt.error().to_string();
    const std::string prefix = f == "nested.pth" ? "model." : "";
    EXPECT_THAT(ckpt->tensor_names(), ElementsAre(prefix + "0.weight", prefix + "1.weight", prefix + "1.bias"));
    EXPECT_EQ(read_table(*ckpt, prefix + "0.weight"), read_f32_file(file("model.0.weight.f32")));
    EXPECT_EQ(read_table(*ckpt, prefix + "1.weight"), read_f32_file(file("model.1.weight.f32")));
  }
}

TEST_F(TorchWritten, DetectedByMagicNotByName) {
  std::filesystem::copy_file(file("sd.pt"), file("renamed.weights"));
  std::filesystem::copy_file(file("legacy.pt"), file("legacy.data"));
  for (const std::string f : {"renamed.weights", "legacy.data"}) {
    auto ckpt = Checkpoint::open(file(f));
    ASSERT_TRUE(ckpt.ok()) << ckpt.error().to_string();
    EXPECT_EQ(ckpt->format(), CheckpointFormat::kPytorch);
    EXPECT_EQ(read_table(*ckpt, "emb.f32"), read_f32_file(file("emb.f32.f32")));
  }
}

// ---- checkpoints built here, byte by byte -----------------------------------

std::string write_file(const TempDir& dir, const std::string& name, const std::string& bytes) {
  std::ofstream(dir.file(name), std::ios::binary) << bytes;
  return dir.file(name);
}

std::string open_error(const std::string& path) {
  auto c = Checkpoint::open(path);
  if (c.ok()) return "opened";
  return c.error().message;
}

const std::vector<float> kSix = {1.5f, -2.25f, 3.0f, 0.125f, -0.5f, 7.0f};

TEST(TorchFile, HandWrittenStateDictAndFolders) {
  TempDir dir;
  const std::string pickle = state_dict_pickle({{"model.embed_tokens.weight", "FloatStorage", "0", 6, 0, {2, 3}, {3, 1}},
                                                {"model.norm.weight", "FloatStorage", "0", 6, 3, {3}, {1}}});
  std::filesystem::create_directories(dir.file("folder"));
  const std::string path = write_file(dir, "folder/pytorch_model.bin", torch_zip(pickle, {{"0", float_bytes(kSix)}}));
  for (const std::string& p : {path, dir.file("folder")}) {
    auto ckpt = Checkpoint::open(p);
    ASSERT_TRUE(ckpt.ok()) << ckpt.error().to_string();
    EXPECT_EQ(ckpt->format(), CheckpointFormat::kPytorch);
    EXPECT_EQ(std::string(to_string(ckpt->format())), "pytorch");
    auto name = ckpt->find_embedding("");
    ASSERT_TRUE(name.ok()) << name.error().to_string();
    EXPECT_EQ(*name, "model.embed_tokens.weight");
    EXPECT_EQ(read_table(*ckpt, *name), kSix);
  }
  // A folder with safetensors too prefers them.
  write_lone_embedding(dir.file("folder/model.safetensors"), kSix, 2, 3, "F32");
  EXPECT_EQ(Checkpoint::open(dir.file("folder"))->format(), CheckpointFormat::kSafetensors);
}

TEST(TorchFile, ShardedIndexMapsEachTensorToItsShard) {
  TempDir dir;
  const std::string a = state_dict_pickle({{"model.embed_tokens.weight", "HalfStorage", "0", 6, 0, {2, 3}, {3, 1}}});
  const std::string b = state_dict_pickle({{"lm_head.weight", "FloatStorage", "k", 6, 0, {3, 2}, {2, 1}}});
  std::string halves;
  for (float v : kSix) halves += le_bytes(float_to_f16(v), 2);
  write_file(dir, "pytorch_model-00001-of-00002.bin", torch_zip(a, {{"0", halves}}));
  write_file(dir, "pytorch_model-00002-of-00002.bin", torch_zip(b, {{"k", float_bytes(kSix)}}));
  write_file(dir, "pytorch_model.bin.index.json",
             R"({"metadata": {}, "weight_map": {"model.embed_tokens.weight": "pytorch_model-00001-of-00002.bin",
                 "lm_head.weight": "pytorch_model-00002-of-00002.bin"}})");
  for (const std::string& p : {dir.file("pytorch_model.bin.index.json"), dir.path().string()}) {
    auto ckpt = Checkpoint::open(p);
    ASSERT_TRUE(ckpt.ok()) << ckpt.error().to_string();
    EXPECT_EQ(ckpt->format(), CheckpointFormat::kShardedPytorch);
    EXPECT_EQ(std::string(to_string(ckpt->format())), "sharded pytorch");
    EXPECT_EQ(*ckpt->find_embedding(""), "model.embed_tokens.weight");
    EXPECT_EQ(read_table(*ckpt, "model.embed_tokens.weight"), kSix);
    EXPECT_EQ(read_table(*ckpt, "lm_head.weight"), kSix);
    EXPECT_EQ(ckpt->info("lm_head.weight")->file, dir.file("pytorch_model-00002-of-00002.bin"));
  }
  // An index that places a tensor in a shard without it.
  write_file(dir, "bad.bin.index.json",
             R"({"weight_map": {"model.embed_tokens.weight": "pytorch_model-00002-of-00002.bin",
                 "lm_head.weight": "pytorch_model-00002-of-00002.bin"}})");
  auto bad = Checkpoint::open(dir.file("bad.bin.index.json"));
  ASSERT_TRUE(bad.ok());
  auto t = bad->table("model.embed_tokens.weight");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().message, "index '" + dir.file("bad.bin.index.json") +
                                   "' places tensor 'model.embed_tokens.weight' in shard "
                                   "'pytorch_model-00002-of-00002.bin', but that shard does not hold it; the index "
                                   "and its shards disagree (re-download the checkpoint)");
}

TEST(TorchFile, HostilePicklesAreRefusedByName) {
  TempDir dir;
  struct Case {
    std::string label, pickle, message;
  };
  const std::string tail =
      ": only state dicts of tensors are read (collections.OrderedDict, torch tensor and parameter rebuilds, torch "
      "storage types), as torch.load(weights_only=True) does; nothing in the file is executed";
  const std::vector<Case> cases = {
      {"os.system", "\x80\x02" + pk_global("posix", "system") + "q\x00"s + pk_str("true") + "\x85R.",
       "refuses the global 'posix.system'" + tail},
      {"__reduce__ eval (protocol 2)", "\x80\x02" + pk_global("__builtin__", "eval") + pk_str("1") + "\x85R.",
       "refuses the global '__builtin__.eval'" + tail},
      {"eval by STACK_GLOBAL", "\x80\x04" + pk_str("builtins") + pk_str("eval") + "\x93" + pk_str("1") + "\x85R.",
       "refuses the global 'builtins.eval'" + tail},
      {"a storage type called", "\x80\x02" + pk_global("torch", "FloatStorage") + ")R.",
       "calls 'torch.FloatStorage', which a state dict never calls; only state dicts of tensors are read"},
      {"deep nesting", "\x80\x02" + std::string(100, ']') + std::string(99, 'a') + ".",
       "nests containers deeper than 64 levels (at byte 165)"},
      {"truncated", state_dict_pickle({{"w", "FloatStorage", "0", 6, 0, {2, 3}, {3, 1}}}).substr(0, 40),
       "has a GLOBAL without its two newline-ended lines (at byte 35)"},
      {"no STOP", "\x80\x02}", "ends without its STOP opcode (the pickle is truncated)"},
      {"tensor past its storage", state_dict_pickle({{"w", "FloatStorage", "0", 6, 0, {4, 3}, {3, 1}}}),
       "has a tensor that reads element 11 of storage '0', which holds 6 elements (at byte 163)"},
      {"one dict in two places (a memo cycle)", "\x80\x02}q\x00"s + pk_str("a") + "h\x00s."s,
       "holds one dict in two places (at 'a'); a state dict is a tree"},
      {"unknown opcode", "\x80\x02i.", "uses pickle opcode 0x69 (at byte 2), which a state dict of tensors does not "
                                       "use; only state dicts are read"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.label);
    const std::string path = write_file(dir, "evil.pt", torch_zip(c.pickle, {{"0", float_bytes(kSix)}}));
    EXPECT_EQ(open_error(path), "'" + path + "' archive/data.pkl " + c.message);
    auto direct = unpickle_state_dict(reinterpret_cast<const uint8_t*>(c.pickle.data()), c.pickle.size(), "p");
    ASSERT_FALSE(direct.ok());
    EXPECT_EQ(direct.error().message, "p " + c.message);
  }
}

TEST(TorchFile, LyingAndMissingStoragesAndArchives) {
  TempDir dir;
  const std::string pickle = state_dict_pickle({{"w", "FloatStorage", "0", 1000, 0, {2, 3}, {3, 1}}});
  std::string path = write_file(dir, "lying.pt", torch_zip(pickle, {{"0", float_bytes(kSix)}}));
  EXPECT_EQ(open_error(path), "'" + path + "': tensor 'w' says its storage '0' holds 1000 elements of 4 bytes, but "
                              "the file has 24 bytes for it; the checkpoint is corrupt or truncated");
  const std::string good = state_dict_pickle({{"w", "FloatStorage", "0", 6, 0, {2, 3}, {3, 1}}});
  path = write_file(dir, "nostorage.pt", torch_zip(good, {}));
  EXPECT_EQ(open_error(path), "'" + path + "' has no record 'archive/data/0' for a storage its pickle names; the "
                              "checkpoint is incomplete");
  path = write_file(dir, "nopkl.pt", stored_zip({{"archive/version", "3\n"}}));
  EXPECT_EQ(open_error(path),
            "'" + path + "' is a zip archive without <archive>/data.pkl; not a torch.save checkpoint");
  const std::string whole = torch_zip(good, {{"0", float_bytes(kSix)}});
  path = write_file(dir, "truncated.pt", whole.substr(0, whole.size() / 2));
  EXPECT_EQ(open_error(path),
            "zip archive '" + path + "': has no end of central directory record (truncated or not a zip file)");
  path = write_file(dir, "deflated.pt", stored_zip({{"archive/data.pkl", good}}, 8));
  EXPECT_EQ(open_error(path), "'" + path + "': record 'archive/data.pkl' is compressed or encrypted; torch.save "
                              "writes records stored, so this archive was rewritten by another tool");
  path = write_file(dir, "garbage.pt", "not a checkpoint at all");
  EXPECT_EQ(open_error(path), "'" + path + "' starts with neither a zip header (torch.save) nor the legacy "
                              "torch.save magic number; not a PyTorch checkpoint (or it is truncated)");
}

// ---- NumPy ---------------------------------------------------------------------

std::string npy_bytes(const std::string& descr, const std::vector<int64_t>& shape, const std::string& data) {
  auto e = encode_npy(descr, shape, data.data(), data.size());
  EXPECT_TRUE(e.ok());
  return std::string(e->begin(), e->end());
}

TEST(NumpyCheckpoint, NpyAndNpzTablesReadInPlace) {
  TempDir dir;
  std::string halves;
  for (float v : kSix) halves += le_bytes(float_to_f16(v), 2);
  const std::string npy = write_file(dir, "emb.npy", npy_bytes("<f4", {2, 3}, float_bytes(kSix)));
  auto c = Checkpoint::open(npy);
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  EXPECT_EQ(c->format(), CheckpointFormat::kNpy);
  EXPECT_EQ(std::string(to_string(c->format())), "npy");
  EXPECT_EQ(*c->find_embedding(""), "emb");
  EXPECT_EQ(read_table(*c, "emb"), kSix);

  const std::string npz = write_file(
      dir, "tables.npz",
      stored_zip({{"a.npy", npy_bytes("<f2", {3, 2}, halves)}, {"b.npy", npy_bytes("<f4", {2, 3}, float_bytes(kSix))}}));
  c = Checkpoint::open(npz);
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  EXPECT_EQ(c->format(), CheckpointFormat::kNpz);
  EXPECT_EQ(std::string(to_string(c->format())), "npz");
  EXPECT_THAT(c->tensor_names(), ElementsAre("a", "b"));
  auto none = c->find_embedding("");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().message,
            "'" + npz + "' holds several arrays (a, b). Pass CompileOptions.tensor = NAME to choose one");
  EXPECT_EQ(read_table(*c, "a"), kSix);
  EXPECT_EQ(*c->find_embedding("b"), "b");
  auto b = c->table("b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->info().dtype, "F32");

  // Fortran order is a strided view.
  const std::string f = write_file(dir, "fortran.npy", [&] {
    std::string s = npy_bytes("<f4", {2, 3}, float_bytes({1, 4, 2, 5, 3, 6}));
    const size_t at = s.find("False");
    s.replace(at, 5, "True ");
    return s;
  }());
  c = Checkpoint::open(f);
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  EXPECT_EQ(read_table(*c, "fortran"), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST(NumpyCheckpoint, BadArraysAreRefusedClearly) {
  TempDir dir;
  std::string path = write_file(dir, "flat.npy", npy_bytes("<f4", {6}, float_bytes(kSix)));
  auto c = Checkpoint::open(path);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->find_embedding("").error().message,
            "array 'flat' in '" + path + "' has shape [6]; an embedding table must be 2-D [vocab, dim]");
  path = write_file(dir, "ints.npy", npy_bytes("<i4", {2, 3}, std::string(24, '\0')));
  c = Checkpoint::open(path);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->table("ints").error().message,
            "tensor 'ints' in '" + path + "' has dtype I32; qemb reads F32, F16 and BF16 embeddings");
  path = write_file(dir, "c.npz", stored_zip({{"a.npy", npy_bytes("<f4", {2, 3}, float_bytes(kSix))}}, 8));
  EXPECT_EQ(open_error(path), "'" + path + "': array 'a' is compressed (np.savez_compressed); qemb reads arrays in "
                              "place and does not inflate them: save with np.savez, or the table alone with np.save");
  path = write_file(dir, "short.npy", npy_bytes("<f4", {2, 3}, float_bytes(kSix)).substr(0, 140));
  EXPECT_EQ(open_error(path), ".npy file '" + path + "': a <f4 array of shape (2, 3) needs 24 data bytes but the "
                              "file has 12 (truncated)");
}

const char kNumpyWriter[] = R"PY(
import sys, numpy as np
out = sys.argv[1]
rng = np.random.default_rng(5)
a = rng.standard_normal((7, 5)).astype(np.float32)
b = rng.standard_normal((4, 6)).astype(np.float16)
np.save(out + '/a.npy', a)
np.savez(out + '/ab.npz', emb=a, other=b)
np.savez(out + '/one.npz', b)
np.savez_compressed(out + '/z.npz', emb=a)
a.tofile(out + '/a.f32')
b.astype(np.float32).tofile(out + '/b.f32')
)PY";

TEST(NumpyCheckpoint, FilesWrittenByNumpy) {
  if (!python_has("numpy")) GTEST_SKIP() << "python3 cannot import numpy";
  TempDir dir;
  std::ofstream(dir.file("write.py")) << kNumpyWriter;
  const CommandResult r = run_command(kTestPython + " " + dir.file("write.py") + " " + dir.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::vector<float> a = read_f32_file(dir.file("a.f32")), b = read_f32_file(dir.file("b.f32"));
  auto c = Checkpoint::open(dir.file("a.npy"));
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  EXPECT_EQ(read_table(*c, *c->find_embedding("")), a);
  c = Checkpoint::open(dir.file("ab.npz"));
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  EXPECT_THAT(c->tensor_names(), ElementsAre("emb", "other"));
  EXPECT_EQ(read_table(*c, "emb"), a);
  EXPECT_EQ(read_table(*c, "other"), b);
  c = Checkpoint::open(dir.file("one.npz"));
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  EXPECT_EQ(*c->find_embedding(""), "arr_0");
  EXPECT_EQ(read_table(*c, "arr_0"), b);
  EXPECT_THAT(open_error(dir.file("z.npz")), HasSubstr("array 'emb' is compressed (np.savez_compressed)"));
}

}  // namespace
}  // namespace qemb
