// Bad input, table-driven, across `qemb compile`, `qemb run`, `qemb inspect`,
// `qemb export-onnx` and the library calls the command line cannot reach.
// Every row must give a clear message and a failing exit code (or error
// code), must not crash, and must leave the folder exactly as it was: no
// output file, no temporary, the input untouched, and an existing output file
// not clobbered.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "artifact/artifact_io.h"
#include "qemb/bench.h"
#include "core/ir.h"
#include "qemb/compiler.h"
#include "qemb/embedding_bag.h"
#include "qemb/npy.h"
#include "qemb/runtime.h"
#include "qemb/safetensors.h"
#include "qemb/tokens.h"
#include "artifact/artifact_test_util.h"
#include "support/test_util.h"
#include "support/torch_files.h"

namespace qemb {
namespace {

namespace fs = std::filesystem;
using qemb::testing::run_command;
using qemb::testing::TempDir;

const std::string kQemb = QEMB_CLI_PATH;
constexpr int64_t kVocab = 40, kDim = 6;
const char kPrecious[] = "precious: an earlier run's output";

// ---- byte builders ----------------------------------------------------------

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

// A safetensors file from header text; `declared` overrides the length prefix.
std::string safetensors(const std::string& header, size_t data_bytes, int64_t declared = -1) {
  const uint64_t n = declared < 0 ? header.size() : static_cast<uint64_t>(declared);
  return le64(n) + header + std::string(data_bytes, '\x01');
}

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape, uint64_t begin,
                  uint64_t end) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[" +
         std::to_string(begin) + "," + std::to_string(end) + "]}";
}

std::string npy(const std::string& descr, const std::vector<int64_t>& shape, const std::vector<uint8_t>& data) {
  auto e = encode_npy(descr, shape, data.data(), data.size());
  EXPECT_TRUE(e.ok()) << e.error().message;
  return e.ok() ? std::string(e->begin(), e->end()) : std::string();
}

std::vector<uint8_t> f32_bytes(std::vector<float> v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<uint8_t> i64_bytes(std::vector<int64_t> v) {
  std::vector<uint8_t> b(v.size() * 8);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Every file under `root` with its bytes: what "the folder is unchanged" means.
std::map<std::string, std::string> snapshot(const fs::path& root) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const std::string rel = fs::relative(e.path(), root).string();
    files[rel] = e.is_regular_file() ? qemb::testing::read_text(e.path().string()) : "<folder>";
  }
  return files;
}

std::string describe_changes(const std::map<std::string, std::string>& before,
                             const std::map<std::string, std::string>& after) {
  std::string out;
  for (const auto& [name, bytes] : after) {
    auto it = before.find(name);
    if (it == before.end()) out += " created '" + name + "';";
    else if (it->second != bytes) out += " changed '" + name + "';";
  }
  for (const auto& [name, bytes] : before)
    if (!after.count(name)) out += " removed '" + name + "';";
  return out;
}

// A GGUF v3 file with one F32 [40, 6] token_embd.weight; the knobs make it lie.
struct GgufSpec {
  std::string magic = "GGUF";
  uint32_t version = 3;
  uint64_t tensor_count = 1, kv_count = 1;
  uint64_t key_length = 20;  // "general.architecture"
  uint32_t value_type = 8;   // string
  uint32_t ggml_type = 0;    // F32
  uint64_t offset = 0;
  uint64_t cols = kDim;
  size_t data_bytes = kVocab * kDim * 4;
};

std::string gguf(const GgufSpec& g) {
  std::string b = g.magic;
  auto put = [&](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) b.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  put(g.version, 4);
  put(g.tensor_count, 8);
  put(g.kv_count, 8);
  put(g.key_length, 8);
  b += "general.architecture";
  put(g.value_type, 4);
  put(5, 8);
  b += "llama";
  put(17, 8);
  b += "token_embd.weight";
  put(2, 4);
  put(g.cols, 8);
  put(kVocab, 8);
  put(g.ggml_type, 4);
  put(g.offset, 8);
  b.resize((b.size() + 31) / 32 * 32, '\0');
  return b + std::string(g.data_bytes, '\x01');
}

template <typename F>
std::function<std::string(const class BadInput&)> gguf_with(F tweak) {
  return [tweak](const BadInput&) {
    GgufSpec g;
    tweak(g);
    return gguf(g);
  };
}

// A torch.save zip of one F32 [40, 6] state-dict tensor of zeros.
std::string torch_pt(const std::string& name, int64_t numel) {
  using namespace qemb::testing;
  return torch_zip(state_dict_pickle({{name, "FloatStorage", "0", numel, 0, {40, 6}, {6, 1}}}),
                   {{"0", std::string(static_cast<size_t>(numel) * 4, '\0')}});
}

// ---- the fixture: a good checkpoint, a good artifact, and its layout --------

class BadInput : public ::testing::Test {
 public:  // the case tables read the fixture through a reference
  void SetUp() override {
    fs::create_directories(dir_.file("folder"));
    // /dev/full, copied into the folder where root may: a regression then
    // replaces the copy, not the machine's device.
    full_ = dir_.file("full");
    if (::mknod(full_.c_str(), S_IFCHR | 0666, ::makedev(1, 7)) != 0) full_ = "/dev/full";
    ckpt_ = dir_.file("model.safetensors");
    art_ = dir_.file("good.qemb");
    auto table = qemb::testing::spread_table(kVocab, kDim, 5);
    std::vector<uint8_t> bytes(table.size() * 4);
    std::memcpy(bytes.data(), table.data(), bytes.size());
    ASSERT_TRUE(write_safetensors(ckpt_, {},
                                  {{"model.embed_tokens.weight", "F32", {kVocab, kDim}, bytes},
                                   {"model.cube", "F32", {2, 2, 2}, std::vector<uint8_t>(32, 0)}})
                    .ok());
    CompileOptions options;
    options.qnn_sdk_version = "2.48";
    auto compiled = compile_checkpoint(ckpt_, options, art_);
    ASSERT_TRUE(compiled.ok()) << compiled.error().message;
    good_artifact_ = qemb::testing::read_text(art_);
    // A fused compile: its table row-interleaved in a ROWS section (format 3).
    fused_ = dir_.file("fused.qemb");
    options.mode = CompileMode::kFused;
    auto fused = compile_checkpoint(ckpt_, options, fused_);
    ASSERT_TRUE(fused.ok()) << fused.error().message;
    auto loaded = load_artifact(art_);
    ASSERT_TRUE(loaded.ok()) << loaded.error().message;
    sections_ = loaded->sections;
  }

  const SectionInfo& section(SectionKind kind) const {
    for (const auto& s : sections_)
      if (s.kind == kind) return s;
    ADD_FAILURE() << "no " << to_string(kind) << " section";
    return sections_.front();
  }
  // The good artifact with one byte inverted.
  std::string flipped(uint64_t offset) const {
    std::string b = good_artifact_;
    b[offset] = static_cast<char>(~b[offset]);
    return b;
  }
  std::string flipped_in(SectionKind kind) const {
    const SectionInfo& s = section(kind);
    return flipped(s.offset + s.size / 2);
  }
  std::string truncated_in(SectionKind kind) const {
    const SectionInfo& s = section(kind);
    return good_artifact_.substr(0, s.offset + s.size / 2);
  }
  // Where the header says the section table is (a streamed compile writes it last).
  uint64_t table_offset() const {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(good_artifact_[24 + i]);
    return v;
  }
  // The first zero padding byte: the first gap between the header, the table
  // and the sections (sections are 64-aligned, so there is one).
  uint64_t padding_offset() const {
    std::vector<std::pair<uint64_t, uint64_t>> spans = {
        {0, kArtifactHeaderSize}, {table_offset(), table_offset() + sections_.size() * kArtifactSectionEntrySize}};
    for (const auto& s : sections_) spans.push_back({s.offset, s.offset + s.size});
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i)
      if (spans[i].first > spans[i - 1].second) return spans[i - 1].second;
    ADD_FAILURE() << "no padding between the parts of the artifact";
    return 0;
  }

  // The good artifact's graph and metadata written again, non-streamed, with
  // `edit` applied to its sections (checksums stay right): a hostile file.
  std::string rewritten(const std::function<void(std::vector<artifact_test::RawSection>&)>& edit,
                        const nlohmann::json* metadata = nullptr, const Graph* graph = nullptr) const {
    auto loaded = load_artifact(art_);
    EXPECT_TRUE(loaded.ok());
    if (!loaded.ok()) return std::string();
    const std::string path = dir_.file("rewritten.qemb");
    EXPECT_TRUE(write_artifact(path, graph ? *graph : *loaded->graph, metadata ? *metadata : loaded->metadata).ok());
    const std::string text = qemb::testing::read_text(path);
    fs::remove(path);
    auto sections = artifact_test::split_raw(std::vector<uint8_t>(text.begin(), text.end()));
    if (edit) edit(sections);
    auto bytes = artifact_test::build_raw(sections);
    return std::string(bytes.begin(), bytes.end());
  }
  // The fused artifact laid out again (META, GRAPH, then its ROWS section as
  // section 2), with `edit` applied to its sections and GRAPH JSON, written
  // as format `version` with checksums right.
  std::string fused_edited(const std::function<void(std::vector<artifact_test::RawSection>&, nlohmann::json&)>& edit,
                           uint32_t version = 3) const {
    auto loaded = load_artifact(fused_);
    EXPECT_TRUE(loaded.ok());
    if (!loaded.ok()) return std::string();
    const std::string path = dir_.file("fused-rewritten.qemb");
    EXPECT_TRUE(write_artifact(path, *loaded->graph, loaded->metadata).ok());
    const std::string text = qemb::testing::read_text(path);
    fs::remove(path);
    auto sections = artifact_test::split_raw(std::vector<uint8_t>(text.begin(), text.end()));
    EXPECT_EQ(sections[2].kind, 4u);
    nlohmann::json graph = nlohmann::json::parse(sections[1].bytes.begin(), sections[1].bytes.end());
    edit(sections, graph);
    sections[1].bytes = artifact_test::text_bytes(graph.dump());
    auto bytes = artifact_test::build_raw(sections, version);
    return std::string(bytes.begin(), bytes.end());
  }
  // A safetensors table of `dtype` whose values cycle through `pattern`
  // (little-endian elements).
  std::string table_of(const std::string& dtype, const std::vector<uint8_t>& pattern) const {
    const size_t element = dtype == "F32" ? 4 : 2, count = pattern.size() / element;
    std::string data;
    for (size_t i = 0; i < static_cast<size_t>(kVocab * kDim); ++i)
      data.append(reinterpret_cast<const char*>(pattern.data()) + (i % count) * element, element);
    return safetensors("{" + entry("model.embed_tokens.weight", dtype, "[40,6]", 0, data.size()) + "}", 0) + data;
  }
  // Convert(table) -> output: checksums right, no gather of the ids. Both
  // runtimes returned rows 0..V-1 for any V ids.
  std::string convert_only() const {
    auto loaded = load_artifact(art_);
    EXPECT_TRUE(loaded.ok());
    if (!loaded.ok()) return std::string();
    const Tensor* table = loaded->graph->find_tensor(loaded->graph->ops[0].inputs[0]);
    const Tensor* out = nullptr;
    for (const Tensor& t : loaded->graph->tensors)
      if (t.kind == TensorKind::kAppRead) out = &t;
    Graph g;
    g.add_tensor(*table);
    g.add_tensor({"ids", TensorKind::kAppWrite, DataType::kInt32, {0}, Encoding{}, nullptr});
    g.add_tensor({"out", TensorKind::kAppRead, DataType::kUFixedPoint16, {kVocab, kDim}, out->encoding, nullptr});
    g.add_op({OpType::kConvert, "c", {table->name}, {"out"}, 0, std::nullopt});
    return rewritten(nullptr, nullptr, &g);
  }

  TempDir dir_;
  std::string ckpt_, art_, good_artifact_, full_, fused_;
  std::vector<SectionInfo> sections_;
};

// One row: the bad file's bytes (written to {bad}), the command, and the
// message the user must see. `output` is where the command would write:
// "{out}" (a fresh name: checked both absent and pre-existing) or another
// placeholder (an input, a missing folder...) that must stay as it is.
struct CliCase {
  std::string what;
  std::function<std::string(const BadInput&)> bad_bytes;  // null: no {bad} file
  std::string bad_name;                                    // e.g. "bad.safetensors"
  std::string args;
  std::string message;
  int exit_code = 1;
};

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return s;
}

TEST_F(BadInput, CommandLineTable) {
  using B = const BadInput&;
  const std::string embed = "model.embed_tokens.weight";
  const std::string good_entry = entry(embed, "F32", "[40,6]", 0, 960);
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  // Issue 37's folders: a checkpoint of only lm_head.weight (config.json
  // decides whether it is the input embedding), and an index whose shard is
  // a FIFO.
  {
    fs::create_directories(dir_.file("lmhead"));
    auto table = qemb::testing::spread_table(kVocab, kDim, 9);
    std::vector<uint8_t> bytes(table.size() * 4);
    std::memcpy(bytes.data(), table.data(), bytes.size());
    ASSERT_TRUE(write_safetensors(dir_.file("lmhead/model.safetensors"), {},
                                  {{"lm_head.weight", "F32", {kVocab, kDim}, bytes}})
                    .ok());
    fs::create_directories(dir_.file("fifo_shard"));
    write_file(dir_.file("fifo_shard/model.safetensors.index.json"),
               "{\"weight_map\": {\"model.embed_tokens.weight\": \"a.safetensors\"}}");
    ASSERT_EQ(::mkfifo(dir_.file("fifo_shard/a.safetensors").c_str(), 0600), 0);
  }
  std::string many_shards = "{\"weight_map\": {";
  for (int i = 0; i <= 100000; ++i)
    many_shards += (i ? ",\"t" : "\"t") + std::to_string(i) + "\": \"s" + std::to_string(i) + ".safetensors\"";
  many_shards += "}}";
  const std::string same_file = "' (-o) is the same file as the input '";
  const std::vector<CliCase> cases = {
      // -- compile: the safetensors checkpoint ------------------------------
      {"empty checkpoint", [](B) { return std::string(); }, "bad.safetensors",
       "compile {bad} -o {out}", "is 0 bytes, shorter than the 8-byte header length"},
      {"checkpoint shorter than the length prefix", [](B) { return std::string("\x10\0\0", 3); },
       "bad.safetensors", "compile {bad} -o {out}", "is 3 bytes, shorter than the 8-byte header length"},
      {"header length 0", [](B) { return le64(0) + "{}"; }, "bad.safetensors", "compile {bad} -o {out}",
       "header length is 0; not a safetensors file"},
      {"truncated header", [&](B) { return safetensors("{" + good_entry + "}", 0).substr(0, 40); },
       "bad.safetensors", "compile {bad} -o {out}", "runs past the end of the file (40 bytes)"},
      {"oversized header length", [&](B) { return safetensors("{" + good_entry + "}", 960, 1ll << 40); },
       "bad.safetensors", "compile {bad} -o {out}", "header length 1099511627776 exceeds the 104857600-byte limit"},
      {"header that is not JSON", [](B) { return safetensors("{not json at all}", 0); }, "bad.safetensors",
       "compile {bad} -o {out}", "header is not valid UTF-8 JSON"},
      {"header that is a JSON array", [](B) { return safetensors("[1,2]", 0); }, "bad.safetensors",
       "compile {bad} -o {out}", "header must be a JSON object, found array"},
      {"data offsets past the end", [&](B) { return safetensors("{" + good_entry + "}", 100); },
       "bad.safetensors", "compile {bad} -o {out}",
       "data_offsets end 960 is past the data region (100 bytes); the file is truncated or corrupt"},
      {"overlapping tensors",
       [&](B) { return safetensors("{" + good_entry + "," + entry("b", "F32", "[4]", 944, 960) + "}", 960); },
       "bad.safetensors", "compile {bad} -o {out}", "[944, 960) overlap"},
      {"data offsets begin after end", [&](B) { return safetensors("{" + entry(embed, "F32", "[0]", 8, 4) + "}", 8); },
       "bad.safetensors", "compile {bad} -o {out}", "data_offsets begin 8 is after end 4"},
      {"dtype qemb does not compile",
       [&](B) { return safetensors("{" + entry(embed, "I8", "[40,6]", 0, 240) + "}", 240); }, "bad.safetensors",
       "compile {bad} -o {out}", "has dtype I8; qemb reads F32, F16 and BF16"},
      {"dtype unknown to safetensors",
       [&](B) { return safetensors("{" + entry(embed, "F7", "[40,6]", 0, 240) + "}", 240); }, "bad.safetensors",
       "compile {bad} -o {out}", "has unknown dtype 'F7'"},
      {"shape and data size disagree",
       [&](B) { return safetensors("{" + entry(embed, "F32", "[40,6]", 0, 900) + "}", 960); }, "bad.safetensors",
       "compile {bad} -o {out}", "data_offsets cover 900 bytes but F32[40, 6] needs 960"},
      {"duplicate tensor names",
       [&](B) { return safetensors("{" + good_entry + "," + good_entry + "}", 960); }, "bad.safetensors",
       "compile {bad} -o {out}", "lists tensor 'model.embed_tokens.weight' more than once"},
      {"negative dimension",
       [&](B) { return safetensors("{" + entry(embed, "F32", "[-40,6]", 0, 960) + "}", 960); }, "bad.safetensors",
       "compile {bad} -o {out}", "negative dimension -40 at shape index 0"},
      {"3-D tensor named explicitly", nullptr, "", "compile {ckpt} --tensor model.cube -o {out}",
       "has shape [2, 2, 2]; an embedding table must be 2-D [vocab, dim]"},
      {"only a 1-D embedding-named tensor",
       [&](B) { return safetensors("{" + entry(embed, "F32", "[240]", 0, 960) + "}", 960); }, "bad.safetensors",
       "compile {bad} -o {out}", "no embedding table found"},
      {"non-finite value in the table",
       [&](B) {
         std::string s = safetensors("{" + good_entry + "}", 960);
         const float nan = std::numeric_limits<float>::quiet_NaN();
         std::memcpy(s.data() + s.size() - 960 + 4 * 13, &nan, 4);  // row 2, column 1
         return s;
       },
       "bad.safetensors", "compile {bad} --qnn-sdk-version 2.48 -o {out}",
       "non-finite value (NaN) at row 2, column 1"},
      {"missing checkpoint", nullptr, "", "compile {dir}/absent.safetensors -o {out}",
       "absent.safetensors': No such file or directory"},
      {"checkpoint folder with no checkpoint in it", nullptr, "", "compile {dir}/folder -o {out}",
       "holds no model.safetensors.index.json, .safetensors or .gguf file"},
      {"compile output equal to the input", nullptr, "", "compile {ckpt} -o {ckpt}",
       "is the input checkpoint; choose another path"},
      // -- what the deployed pattern costs (collapsed rows), wrong kinds of file --
      {"compile with a negative --max-collapsed-rows", nullptr, "",
       "compile {ckpt} --qnn-sdk-version 2.37 --max-collapsed-rows -1 -o {out}", "--max-collapsed-rows", 2},
      {"compile with both collapse limits", nullptr, "",
       "compile {ckpt} --qnn-sdk-version 2.37 --fail-on-collapse --max-collapsed-rows 3 -o {out}",
       "--fail-on-collapse excludes --max-collapsed-rows", 2},
      {"compile refusing collapsed rows", nullptr, "",
       "compile {ckpt} --qnn-sdk-version 2.37 --fail-on-collapse -o {out}",
       "the legacy pattern collapses 30 of 40 rows (75.00%) of this 16a4w table to a constant (their scales are "
       "under 1/(2 qmax) of the largest); target QNN SDK >= 2.48 (--qnn-sdk-version 2.48) for the optimized "
       "pattern, which loses none, or use 16a8w, which collapses fewer, more than --max-collapsed-rows 0; nothing "
       "was written"},
      {"eval with a collapse limit over 100%", nullptr, "", "eval {ckpt} --max-collapsed-pct 101",
       "--max-collapsed-pct", 2},
      {"eval with an SQNR floor that is no number", nullptr, "", "eval {ckpt} --min-sqnr loud", "--min-sqnr", 2},
      {"a checkpoint given to run", nullptr, "", "run {ckpt} --tokens 1 -o {out}",
       "not a qemb artifact but a safetensors checkpoint; run, inspect and bench read a compiled artifact: compile "
       "it first"},
      {"an artifact given to compile", nullptr, "", "compile {art} -o {out}",
       "is a qemb artifact, not a checkpoint: compile, eval and fakequant read the float checkpoint it was compiled "
       "from"},
      {"calibration token past the end", [](B) { return std::string("1, 2\n40\n"); }, "calib.txt",
       "compile {ckpt} --calibration-tokens {bad} --qnn-sdk-version 2.48 -o {out}",
       "calibration token 40 at position 2 is outside the table's rows [0, 40)"},
      {"fakequant output equal to the input", nullptr, "",
       "fakequant {ckpt} --scheme 16a4w --qnn-sdk-version 2.48 -o {ckpt}", "is the input checkpoint"},
      {"fakequant output in a missing folder", nullptr, "",
       "fakequant {ckpt} --scheme 16a4w --qnn-sdk-version 2.48 -o {dir}/no/such/f.safetensors",
       "check that the folder exists and is writable"},
      {"fakequant of a checkpoint with duplicate names",
       [&](B) { return safetensors("{" + good_entry + "," + good_entry + "}", 960); }, "bad.safetensors",
       "fakequant {bad} --scheme 16a8w --qnn-sdk-version 2.48 -o {out}", "more than once"},
      {"compile with an empty --name", nullptr, "", "compile {ckpt} --qnn-sdk-version 2.48 --name '' -o {out}",
       "qemb: error: invalid argument: --name is empty; name the table's node\n"},
      {"compile output in a missing folder", nullptr, "", "compile {ckpt} --qnn-sdk-version 2.48 -o {dir}/no/such/a.qemb",
       "check that the folder exists and is writable"},
      {"compile output that is a folder", nullptr, "", "compile {ckpt} --qnn-sdk-version 2.48 -o {dir}/folder",
       "/folder': it is a folder; give the output a file name"},
      // -- outputs that are not regular files, for every command that writes --
      {"compile output a full device", nullptr, "", "compile {ckpt} --qnn-sdk-version 2.48 -o {full}",
       "/full': No space left on device"},
      {"run output a full device", nullptr, "", "run {art} --tokens 1 -o {full}",
       "/full': No space left on device"},
      {"fakequant output a full device", nullptr, "", "fakequant {ckpt} --scheme 16a4w --qnn-sdk-version 2.48 -o {full}",
       "/full': No space left on device"},
      {"eval report a full device", nullptr, "", "eval {ckpt} --qnn-sdk-version 2.48 --report {full}",
       "/full': No space left on device"},
      {"run output that is a folder", nullptr, "", "run {art} --tokens 1 -o {dir}/folder",
       "/folder': it is a folder; give the output a file name"},
      {"fakequant output that is a folder", nullptr, "",
       "fakequant {ckpt} --scheme 16a4w --qnn-sdk-version 2.48 -o {dir}/folder", "it is a folder"},
      {"eval report that is a folder", nullptr, "", "eval {ckpt} --qnn-sdk-version 2.48 --report {dir}/folder",
       "it is a folder"},
      {"checkpoint that is a character device", nullptr, "", "compile /dev/zero -o {out}",
       "'/dev/zero' is not a regular file (it is a character device); checkpoints and artifacts are memory-mapped"},
      {"artifact that is a character device", nullptr, "", "run /dev/zero --tokens 1 -o {out}",
       "'/dev/zero' is not a regular file (it is a character device)"},
      {"empty token file over an existing output", [](B) { return std::string("# no ids\n"); }, "ids.txt",
       "run {art} --tokens-file {bad} -o {out}", "the token list is empty: there are no ids to look up"},
      {"token file that is a folder", nullptr, "", "run {art} --tokens-file {dir}/folder -o {out}",
       "it is a folder; give a regular file, a pipe or '-' for standard input"},
#ifdef QEMB_HAVE_ONNX
      // -- export-onnx ---------------------------------------------------------
      {"export-onnx at an opset without uint16 Q/DQ", nullptr, "",
       "export-onnx {ckpt} --qnn-sdk-version 2.48 --opset 17 -o {out}",
       "--opset: opset 17 has no uint16 QuantizeLinear/DequantizeLinear, which ONNX added in opset 21; use --opset 21",
       2},
      {"export-onnx at an unknown opset", nullptr, "", "export-onnx {ckpt} --qnn-sdk-version 2.48 --opset 99 -o {out}",
       "--opset: unknown opset 99: this exporter knows opsets 21 to 22; use --opset 21", 2},
      {"export-onnx at opset 0", nullptr, "", "export-onnx {ckpt} --qnn-sdk-version 2.48 --opset 0 -o {out}",
       "--opset: unknown opset 0: ai.onnx opsets are numbered from 1", 2},
      {"export-onnx at opset -1", nullptr, "", "export-onnx {ckpt} --qnn-sdk-version 2.48 --opset -1 -o {out}",
       "--opset: '-1' is not an opset number", 2},
      {"export-onnx with an unknown scheme", nullptr, "", "export-onnx {ckpt} --scheme 16a3w -o {out}",
       "--scheme: unknown scheme '16a3w': expected one of 16a4w, 16a8w, 16a2w, 8a4w, 8a8w, 8a2w, w4, w8, w2", 2},
      {"export-onnx output equal to the input", nullptr, "", "export-onnx {ckpt} --qnn-sdk-version 2.48 -o {ckpt}",
       "is the input '"},
      {"export-onnx encodings equal to the input", nullptr, "",
       "export-onnx {art} --folded --encodings {art} -o {out}", "is the input '"},
      {"export-onnx encodings and model at one path", nullptr, "",
       "export-onnx {ckpt} --qnn-sdk-version 2.48 --encodings {out} -o {out}",
       "'; give --encodings its own path\n"},
      {"export-onnx output in a missing folder", nullptr, "",
       "export-onnx {ckpt} --qnn-sdk-version 2.48 -o {dir}/no/such/m.onnx",
       "check that the folder exists and is writable"},
      {"export-onnx encodings in a missing folder (no model either)", nullptr, "",
       "export-onnx {ckpt} --qnn-sdk-version 2.48 --encodings {dir}/no/such/e.json -o {out}",
       "check that the folder exists and is writable"},
      {"export-onnx --folded with the legacy pattern", nullptr, "",
       "export-onnx {ckpt} --qnn-sdk-version 2.48 --pattern legacy --folded -o {out}",
       // The library names OnnxExportOptions.folded and CompileOptions.pattern; the CLI its flags.
       "qemb: error: invalid argument: --folded applies to the optimized pattern only: the legacy pattern's Convert "
       "follows its Gather, so there is no table to fold; drop --folded or use --pattern optimized\n"},
      {"export-onnx --int4-weights with 8-bit weights", nullptr, "",
       "export-onnx {ckpt} --qnn-sdk-version 2.48 --scheme 16a8w --int4-weights -o {out}",
       "qemb: error: invalid argument: --int4-weights needs 4-bit weights; scheme 16a8w has 8-bit weights\n"},
      {"export-onnx --int4-weights with --folded", nullptr, "",
       "export-onnx {ckpt} --qnn-sdk-version 2.48 --int4-weights --folded -o {out}",
       "qemb: error: invalid argument: --int4-weights applies to the weight initializer, which the folded form does "
       "not have; drop one of --int4-weights and --folded\n"},
      {"export-onnx of a materialized artifact without --folded", nullptr, "", "export-onnx {art} -o {out}",
       "qemb: error: unsupported: the artifact holds only the folded uint16 table (compiled with the optimized "
       "pattern and --mode materialize), not the per-row weights; export it with --folded, or export from the "
       "checkpoint or an artifact compiled with --mode fused\n"},
      {"export-onnx of an artifact with compile options", nullptr, "", "export-onnx {art} --scheme 16a8w -o {out}",
       "is an artifact, compiled already (scheme 16a4w, pattern optimized); --tensor, --scheme, --pattern, "
       "--qnn-sdk-version and --calibration-tokens apply to a checkpoint: drop them, or export from the "
       "checkpoint\n"},
      {"export-onnx of a corrupted artifact", [](B b) { return b.flipped_in(SectionKind::kData); }, "bad.qemb",
       "export-onnx {bad} --folded -o {out}", "(DATA) checksum mismatch"},
      {"export-onnx of a checkpoint that is not JSON", [](B) { return safetensors("{not json at all}", 0); },
       "bad.safetensors", "export-onnx {bad} -o {out}", "header is not valid UTF-8 JSON"},
      {"export-onnx with an unknown pattern", nullptr, "", "export-onnx {ckpt} --pattern fastest -o {out}",
       "--pattern: unknown pattern 'fastest': expected auto, optimized or legacy", 2},
      {"export-onnx with a forced pattern the target refuses", nullptr, "",
       "export-onnx {ckpt} --qnn-sdk-version 2.37 --pattern optimized -o {out}", "2.48"},
      {"export-onnx output /dev/full", nullptr, "", "export-onnx {ckpt} --qnn-sdk-version 2.48 -o /dev/full",
       "cannot write '/dev/full': No space left on device"},
      {"export-onnx output that is a folder", nullptr, "", "export-onnx {ckpt} --qnn-sdk-version 2.48 -o {dir}/folder",
       "/folder': it is a folder; give the output a file name"},
#else
      {"export-onnx in a build without ONNX", nullptr, "", "export-onnx {ckpt} --qnn-sdk-version 2.48 -o {out}",
       "this qemb was built without ONNX export (QEMB_ONNX_EXPORT=OFF, or libonnx-dev and libprotobuf-dev missing)"},
#endif
      // -- compile: GGUF checkpoints -------------------------------------------
      {"GGUF with bad magic", gguf_with([](GgufSpec& g) { g.magic = "GGML"; }), "bad.gguf",
       "compile {bad} -o {out}", "does not start with the magic \"GGUF\"; not a GGUF file"},
      {"GGUF truncated in the tensor infos", [](B) { return gguf(GgufSpec{}).substr(0, 100); }, "bad.gguf",
       "compile {bad} -o {out}", "the file is truncated or corrupt"},
      {"GGUF of version 1", gguf_with([](GgufSpec& g) { g.version = 1; }), "bad.gguf", "compile {bad} -o {out}",
       "has version 1; qemb reads GGUF versions 2 and 3"},
      {"GGUF lying about its tensor count", gguf_with([](GgufSpec& g) { g.tensor_count = 1ull << 40; }), "bad.gguf",
       "compile {bad} -o {out}", "claims 1099511627776 tensors, more than its"},
      {"GGUF lying about its key/value count", gguf_with([](GgufSpec& g) { g.kv_count = 1ull << 40; }), "bad.gguf",
       "compile {bad} -o {out}", "claims 1099511627776 key/value pairs"},
      {"GGUF with a huge string", gguf_with([](GgufSpec& g) { g.key_length = 1ull << 62; }), "bad.gguf",
       "compile {bad} -o {out}", "over the 67108864-byte limit"},
      {"GGUF with an unknown value type", gguf_with([](GgufSpec& g) { g.value_type = 99; }), "bad.gguf",
       "compile {bad} -o {out}", "value of 'general.architecture' has value type 99"},
      {"GGUF with an unknown ggml type", gguf_with([](GgufSpec& g) { g.ggml_type = 77; }), "bad.gguf",
       "compile {bad} -o {out}", "has ggml type 77, which qemb does not know"},
      {"GGUF with misaligned tensor data", gguf_with([](GgufSpec& g) { g.offset = 8; }), "bad.gguf",
       "compile {bad} -o {out}", "starts at data offset 8, not a multiple of the alignment 32"},
      {"GGUF with an offset past the end", gguf_with([](GgufSpec& g) { g.offset = 1 << 20; }), "bad.gguf",
       "compile {bad} -o {out}", "occupies data bytes [1048576, 1049536), past the end of the 960-byte data region"},
      {"GGUF embedding of an IQ type qemb does not read",
       gguf_with([](GgufSpec& g) {
         g.ggml_type = 16;  // IQ2_XXS: 256-value blocks of 66 bytes
         g.cols = 256;
         g.data_bytes = kVocab * 66;
       }),
       "bad.gguf", "compile {bad} --qnn-sdk-version 2.48 -o {out}",
       "tensor 'token_embd.weight' has GGUF type IQ2_XXS; qemb reads F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, "
       "Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL and IQ4_XS tables"},
      {"GGUF K-quant whose rows are not whole 256-value blocks",
       gguf_with([](GgufSpec& g) {
         g.ggml_type = 12;  // Q4_K
         g.cols = 320;
         g.data_bytes = kVocab * 144;
       }),
       "bad.gguf", "compile {bad} --qnn-sdk-version 2.48 -o {out}",
       "tensor 'token_embd.weight' has 320 values a row, not a multiple of the 256-value blocks of Q4_K"},
      {"GGUF K-quant whose blocks need more bytes than the file holds",
       gguf_with([](GgufSpec& g) {
         g.ggml_type = 14;  // Q6_K: 210 bytes a 256-value block
         g.cols = 256;
         g.data_bytes = (kVocab - 1) * 210;
       }),
       "bad.gguf", "compile {bad} --qnn-sdk-version 2.48 -o {out}",
       "tensor 'token_embd.weight' occupies data bytes [0, 8400), past the end of the 8190-byte data region; the "
       "file is truncated or corrupt"},
      {"GGUF truncated inside its last block",
       gguf_with([](GgufSpec& g) {
         g.ggml_type = 23;  // IQ4_XS: 136 bytes a 256-value block
         g.cols = 256;
         g.data_bytes = kVocab * 136 - 7;
       }),
       "bad.gguf", "eval {bad} --qnn-sdk-version 2.48",
       "tensor 'token_embd.weight' occupies data bytes [0, 5440), past the end of the 5433-byte data region"},
      {"GGUF Q6_K block with an infinite scale",
       [](B) {
         GgufSpec g;
         g.ggml_type = 14;
         g.cols = 256;
         g.data_bytes = kVocab * 210;
         std::string b = gguf(g);
         const size_t d = b.size() - g.data_bytes + 3 * 210 + 208;  // row 3's f16 d
         b[d] = 0x00;
         b[d + 1] = 0x7C;  // +inf
         return b;
       },
       "bad.gguf", "compile {bad} --qnn-sdk-version 2.48 -o {out}",
       "the table holds a non-finite value (Inf) at row 3, column 0; fix the checkpoint before quantizing"},
      {"GGUF embedding of ternary type TQ2_0",
       gguf_with([](GgufSpec& g) {
         g.ggml_type = 35;  // TQ2_0: 256-value blocks of 66 bytes
         g.cols = 256;
         g.data_bytes = kVocab * 66;
       }),
       "bad.gguf", "eval {bad} --qnn-sdk-version 2.48",
       "tensor 'token_embd.weight' has GGUF type TQ2_0; qemb reads F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, "
       "Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL and IQ4_XS tables"},
      {"GGUF fakequant", [](B) { return gguf(GgufSpec{}); }, "bad.gguf",
       "fakequant {bad} --scheme 16a4w --qnn-sdk-version 2.48 -o {out}", "fakequant writes safetensors checkpoints"},
      // -- compile: PyTorch checkpoints and NumPy arrays --------------------------
      {"PyTorch checkpoint whose pickle calls os.system",
       [](B) {
         using namespace qemb::testing;
         return torch_zip("\x80\x02" + pk_global("posix", "system") + pk_str("true") + "\x85R.", {});
       },
       "bad.pt", "compile {bad} -o {out}",
       "archive/data.pkl refuses the global 'posix.system': only state dicts of tensors are read"},
      {"PyTorch checkpoint whose pickle reduces builtins.eval",
       [](B) {
         using namespace qemb::testing;
         return torch_zip("\x80\x02" + pk_global("builtins", "eval") + pk_str("1") + "\x85R.", {});
       },
       "bad.bin", "eval {bad}", "refuses the global 'builtins.eval'"},
      {"truncated .pt",
       [&](B) { return torch_pt(embed, 240).substr(0, 300); }, "bad.pt", "compile {bad} -o {out}",
       "has no end of central directory record (truncated or not a zip file)"},
      {"legacy .pt cut inside its storages",
       [&](B) {
         using namespace qemb::testing;
         const std::string magic = std::string("\x80\x02\x8a\x0a", 4) +
                                   std::string("\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19", 10) + ".";
         const std::string sd = state_dict_pickle({{embed, "FloatStorage", "0", 240, 0, {40, 6}, {6, 1}}});
         return magic + "\x80\x02M\xe9\x03." + "\x80\x02}." + sd + "\x80\x02]" + pk_str("0") + "a." +
                le_bytes(240, 8) + std::string(100, '\0');
       },
       "bad.pt", "compile {bad} -o {out}", "storage '0' of 240 elements runs past the end of the file (truncated)"},
      {"PyTorch storage smaller than its pickle says",
       [&](B) {
         using namespace qemb::testing;
         return torch_zip(state_dict_pickle({{embed, "FloatStorage", "0", 240, 0, {40, 6}, {6, 1}}}),
                          {{"0", std::string(96, '\0')}});
       },
       "bad.pt", "compile {bad} -o {out}",
       "says its storage '0' holds 240 elements of 4 bytes, but the file has 96 bytes for it"},
      {"PyTorch fakequant", [&](B) { return torch_pt(embed, 240); }, "bad.pt",
       "fakequant {bad} --scheme 16a4w --qnn-sdk-version 2.48 -o {out}",
       "is a pytorch checkpoint (compile and eval read it)"},
      {"npz with several arrays and no --tensor",
       [](B) {
         const std::string a = npy("<f4", {40, 6}, std::vector<uint8_t>(960, 0));
         return qemb::testing::stored_zip({{"a.npy", a}, {"b.npy", a}});
       },
       "bad.npz", "compile {bad} -o {out}", "holds several arrays (a, b). Pass --tensor NAME to choose one"},
      {"npz --tensor naming no array",
       [](B) { return qemb::testing::stored_zip({{"a.npy", npy("<f4", {40, 6}, std::vector<uint8_t>(960, 0))}}); },
       "bad.npz", "compile {bad} --tensor b -o {out}", "no tensor 'b' in"},
      {"1-D npy", [](B) { return npy("<f4", {240}, std::vector<uint8_t>(960, 0)); }, "bad.npy",
       "compile {bad} -o {out}", "bad.npy' has shape [240]; an embedding table must be 2-D [vocab, dim]"},
      {"int npy", [](B) { return npy("<i4", {40, 6}, std::vector<uint8_t>(960, 0)); }, "bad.npy",
       "compile {bad} -o {out}", "bad.npy' has dtype I32; qemb reads F32, F16 and BF16 embeddings"},
      // -- sharded checkpoints --------------------------------------------------
      {"index naming a missing shard",
       [](B) { return std::string("{\"weight_map\": {\"model.embed_tokens.weight\": \"absent.safetensors\"}}"); },
       "model.safetensors.index.json", "compile {bad} -o {out}",
       "names shard 'absent.safetensors', which is not in"},
      {"index that is not JSON", [](B) { return std::string("{\"weight_map\": "); }, "model.safetensors.index.json",
       "eval {bad}", "not valid JSON"},
      {"index whose shard lacks the tensor",
       [](B) { return std::string("{\"weight_map\": {\"model.wte.weight\": \"model.safetensors\"}}"); },
       "model.safetensors.index.json", "compile {bad} -o {out}",
       "places tensor 'model.wte.weight' in shard 'model.safetensors', but that shard does not hold it"},
      {"fakequant of an index into an existing folder",
       [](B) {
         return std::string(
             "{\"weight_map\": {\"model.embed_tokens.weight\": \"model.safetensors\", \"model.cube\": "
             "\"model.safetensors\"}}");
       },
       "model.safetensors.index.json", "fakequant {bad} --scheme 16a4w --qnn-sdk-version 2.48 -o {dir}/folder",
       "already exists; fakequant of a checkpoint folder writes a new folder"},
      // -- run / inspect: the artifact --------------------------------------
      {"empty artifact", [](B) { return std::string(); }, "bad.qemb", "run {bad} --tokens 1 -o {out}",
       "is 0 bytes, smaller than the 64-byte header"},
      {"artifact with bad magic (a checkpoint)", [](B b) { return qemb::testing::read_text(b.ckpt_); }, "bad.qemb",
       "run {bad} --tokens 1 -o {out}", "not a qemb artifact"},
      {"artifact from a future format version",
       [](B b) {
         std::string s = b.good_artifact_;
         s[8] = 4;  // format version field
         return s;
       },
       "bad.qemb", "run {bad} --tokens 1 -o {out}", "written by a newer qemb (format 4); this build reads formats 1 to 3"},
      {"artifact truncated inside the header", [](B b) { return b.good_artifact_.substr(0, 40); }, "bad.qemb",
       "run {bad} --tokens 1 -o {out}", "is 40 bytes, smaller than the 64-byte header"},
      {"artifact truncated inside the section table", [](B b) { return b.good_artifact_.substr(0, 100); },
       "bad.qemb", "run {bad} --tokens 1 -o {out}", "but it is 100 bytes (truncated)"},
      {"artifact truncated inside META", [](B b) { return b.truncated_in(SectionKind::kMeta); }, "bad.qemb",
       "run {bad} --tokens 1 -o {out}", "(truncated)"},
      {"artifact truncated inside GRAPH", [](B b) { return b.truncated_in(SectionKind::kGraph); }, "bad.qemb",
       "run {bad} --tokens 1 -o {out}", "(truncated)"},
      {"artifact truncated inside DATA", [](B b) { return b.truncated_in(SectionKind::kData); }, "bad.qemb",
       "run {bad} --tokens 1 -o {out}", "(truncated)"},
      {"artifact with bytes appended", [](B b) { return b.good_artifact_ + std::string(64, '\0'); }, "bad.qemb",
       "run {bad} --tokens 1 -o {out}", "bytes but it is"},
      {"flipped byte in the header", [](B b) { return b.flipped(50); }, "bad.qemb",  // a reserved byte
       "run {bad} --tokens 1 -o {out}", "header/section-table checksum mismatch"},
      {"flipped byte in the section table", [](B b) { return b.flipped(b.table_offset() + 8); }, "bad.qemb",
       "run {bad} --tokens 1 -o {out}", "header/section-table checksum mismatch"},
      {"flipped byte in META", [](B b) { return b.flipped_in(SectionKind::kMeta); }, "bad.qemb",
       "run {bad} --tokens 1 -o {out}", "(META) checksum mismatch"},
      {"flipped byte in GRAPH", [](B b) { return b.flipped_in(SectionKind::kGraph); }, "bad.qemb",
       "run {bad} --tokens 1 -o {out}", "(GRAPH) checksum mismatch"},
      {"flipped byte in DATA", [](B b) { return b.flipped_in(SectionKind::kData); }, "bad.qemb",
       "run {bad} --tokens 1 -o {out}", "(DATA) checksum mismatch"},
      {"flipped padding byte", [](B b) { return b.flipped(b.padding_offset()); }, "bad.qemb",
       "run {bad} --tokens 1 -o {out}", "is not zero"},
      {"missing artifact", nullptr, "", "run {dir}/absent.qemb --tokens 1 -o {out}",
       "absent.qemb': No such file or directory"},
      {"inspect an empty artifact", [](B) { return std::string(); }, "bad.qemb", "inspect {bad}",
       "smaller than the 64-byte header"},
      {"inspect an artifact with bad magic", [](B) { return std::string(100, 'x'); }, "bad.qemb", "inspect {bad}",
       "not a qemb artifact (starts with 78 78 78"},
      {"inspect a future format version",
       [](B b) {
         std::string s = b.good_artifact_;
         s[9] = 1;  // format 257
         return s;
       },
       "bad.qemb", "inspect {bad} --json", "written by a newer qemb (format 257)"},
      {"inspect a flipped DATA byte", [](B b) { return b.flipped_in(SectionKind::kData); }, "bad.qemb",
       "inspect {bad}", "(DATA) checksum mismatch"},
      // -- run/inspect: a fused artifact's row-interleaved table (ROWS) -------
      {"fused table with the wrong row stride",
       [](B b) { return b.fused_edited([](auto&, nlohmann::json& g) { g["tensors"][0]["row_stride"] = 12; }); },
       "bad.qemb", "run {bad} --tokens 1 -o {out}",
       "tensor 'embedding_weight' has row stride 12, a row of 6 int4 values needs 8"},
      {"fused table whose ROWS section is a record short",
       [](B b) { return b.fused_edited([](auto& s, nlohmann::json&) { s[2].bytes.resize(s[2].bytes.size() - 8); }); },
       "bad.qemb", "run {bad} --tokens 1 -o {out}",
       "section 2 'tensor:embedding_weight' (ROWS) holds 312 bytes, tensor 'embedding_weight' (SFIXED_POINT_8, "
       "bitwidth 4, row stride 8) needs 320"},
      {"ROWS section in a format-2 file",
       [](B b) { return b.fused_edited([](auto&, nlohmann::json&) {}, 2); }, "bad.qemb",
       "run {bad} --tokens 1 -o {out}",
       "section 2 'tensor:embedding_weight' has unknown kind 4 (expected 1=META, 2=GRAPH, 3=DATA in format 2)"},
      {"fused table stored in a DATA section",
       [](B b) { return b.fused_edited([](auto& s, nlohmann::json&) { s[2].kind = 3; }); }, "bad.qemb",
       "inspect {bad}", "refers to section 2 'tensor:embedding_weight' (DATA), expected a ROWS section"},
      {"fused table that also names a scales section",
       [](B b) {
         return b.fused_edited([](auto&, nlohmann::json& g) { g["tensors"][0]["encoding"]["scales_section"] = 2; });
       },
       "bad.qemb", "run {bad} --tokens 1 -o {out}",
       "encoding has a scales_section, but its tensor is row-interleaved"},
      {"fused table with a row count that differs from its shape",
       [](B b) { return b.fused_edited([](auto&, nlohmann::json& g) { g["tensors"][0]["encoding"]["count"] = 39; }); },
       "bad.qemb", "run {bad} --tokens 1 -o {out}", "encoding.count is 39, the row-interleaved tensor has 40 rows"},
      {"fused table with a NaN scale",
       [](B b) {
         return b.fused_edited([](auto& s, nlohmann::json&) { s[2].bytes[7 * 8 + 3] = 0x7f, s[2].bytes[7 * 8 + 2] = 0xc0; });
       },
       "bad.qemb", "run {bad} --tokens 1 -o {out}",
       "section 2 'tensor:embedding_weight' (ROWS) row 7 has a scale that is not finite"},
      {"fused table's ROWS section off its 64-byte alignment",
       [](B b) { return b.fused_edited([](auto& s, nlohmann::json&) { s[2].offset = 4096 + 4; }); }, "bad.qemb",
       "inspect {bad}", "section 2 'tensor:embedding_weight' (ROWS) starts at offset 4100, not a multiple of 64"},
      // -- run: token ids -----------------------------------------------------
      {"id past the last row", nullptr, "", "run {art} --tokens 0,40 -o {out}",
       "token id 40 at position 1 is past the last row; ids must be in [0, 40)"},
      {"negative id", nullptr, "", "run {art} --tokens 5,-3 -o {out}", "token id -3 at position 1 is negative"},
      {"dequantized run with an id past the end", nullptr, "", "run {art} --tokens 99 --dequantize -o {out}",
       "token id 99 at position 0 is past the last row"},
      {"non-numeric id", nullptr, "", "run {art} --tokens 1,two -o {out}", "'two' is not an integer"},
      {"id beyond 64 bits", nullptr, "", "run {art} --tokens 99999999999999999999 -o {out}",
       "does not fit in a 64-bit integer"},
      {"empty id in the list", nullptr, "", "run {art} --tokens 1,,2 -o {out}", "token list item 1 is empty"},
      {"token text file with junk", [](B) { return std::string("1\n2\nthree\n"); }, "ids.txt",
       "run {art} --tokens-file {bad} -o {out}", "(line 3) 'three' is not an integer"},
      {"token .npy of float dtype", [](B) { return npy("<f4", {2}, std::vector<uint8_t>(8, 0)); }, "ids.npy",
       "run {art} --tokens-file {bad} -o {out}", "holds dtype '<f4'; token ids must be integers"},
      {"token .npy of rank 3", [](B) { return npy("<i8", {2, 1, 2}, i64_bytes({1, 2, 3, 4})); }, "ids.npy",
       "run {art} --tokens-file {bad} -o {out}", "token ids must be a 1-D or 2-D array"},
      {"token .npy with an id past the end", [](B) { return npy("<i8", {2}, i64_bytes({3, 40})); }, "ids.npy",
       "run {art} --tokens-file {bad} -o {out}", "token id 40 at position 1 is past the last row"},
      {"token .npy with its data cut short",
       [](B) {
         std::string s = npy("<i8", {4}, i64_bytes({1, 2, 3, 4}));
         return s.substr(0, s.size() - 5);
       },
       "ids.npy", "run {art} --tokens-file {bad} -o {out}", "needs 32 data bytes but the file has 27 (truncated)"},
      {"missing token file", nullptr, "", "run {art} --tokens-file {dir}/absent.txt -o {out}",
       "absent.txt': No such file or directory"},
      {"no ids at all", nullptr, "", "run {art} -o {out}", "no token ids: pass --tokens 1,2,3 or --tokens-file FILE"},
      {"run output equal to the artifact", nullptr, "", "run {art} --tokens 1 -o {art}",
       "is the input artifact; choose another path"},
      {"run output in a missing folder", nullptr, "", "run {art} --tokens 1 -o {dir}/no/such/o.npy",
       "check that the folder exists and is writable"},
      // -- empty tables: an error everywhere, before any output exists -------
      {"compile of a [0, 8] table", [&](B) { return safetensors("{" + entry(embed, "F32", "[0,8]", 0, 0) + "}", 0); },
       "bad.safetensors", "compile {bad} --qnn-sdk-version 2.48 -o {out}",
       "the embedding table is empty (0 x 8); it needs at least one row and one column"},
      {"compile of a [40, 0] table",
       [&](B) { return safetensors("{" + entry(embed, "F32", "[40,0]", 0, 0) + "}", 0); }, "bad.safetensors",
       "compile {bad} --qnn-sdk-version 2.48 -o {out}", "the embedding table is empty (40 x 0)"},
      {"materialized compile of a [0, 8] table",
       [&](B) { return safetensors("{" + entry(embed, "F32", "[0,8]", 0, 0) + "}", 0); }, "bad.safetensors",
       "compile {bad} --mode materialize --pattern legacy -o {out}", "the embedding table is empty (0 x 8)"},
      {"eval of a [0, 8] table", [&](B) { return safetensors("{" + entry(embed, "F32", "[0,8]", 0, 0) + "}", 0); },
       "bad.safetensors", "eval {bad} --qnn-sdk-version 2.48", "the embedding table is empty (0 x 8)"},
      {"eval of a [40, 0] table",
       [&](B) { return safetensors("{" + entry(embed, "F32", "[40,0]", 0, 0) + "}", 0); }, "bad.safetensors",
       "eval {bad} --qnn-sdk-version 2.48 --json", "the embedding table is empty (40 x 0)"},
      {"fakequant of a [0, 8] table",
       [&](B) { return safetensors("{" + entry(embed, "F32", "[0,8]", 0, 0) + "}", 0); }, "bad.safetensors",
       "fakequant {bad} --scheme 16a4w --qnn-sdk-version 2.48 -o {out}", "the embedding table is empty (0 x 8)"},
      {"fakequant of a [40, 0] table",
       [&](B) { return safetensors("{" + entry(embed, "F32", "[40,0]", 0, 0) + "}", 0); }, "bad.safetensors",
       "fakequant {bad} --scheme 16a8w --qnn-sdk-version 2.48 -o {out}", "the embedding table is empty (40 x 0)"},
      {"compile --json with the artifact on standard output", nullptr, "", "compile {ckpt} --json -o -",
       "--json prints to standard output, which '-o -' already carries the artifact on"},
      // -- usage errors: exit 2, whatever CLI11's own code -------------------
      {"no command", nullptr, "", "", "A subcommand is required", 2},
      {"unknown command", nullptr, "", "compiel {ckpt} -o {out}",
       "unknown command 'compiel'; did you mean 'compile'?; the commands are compile, run, inspect, bench, eval, "
       "fakequant, export-onnx", 2},
      {"a mistyped flag", nullptr, "", "compile {ckpt} --memroy-budget 1 -o {out}",
       "--memroy-budget; did you mean --memory-budget?\nRun 'qemb --help' or 'qemb COMMAND --help' for usage.", 2},
      {"an unknown flag near none", nullptr, "", "run {art} --tokens 1 --frobnicate -o {out}",
       "--frobnicate\nRun 'qemb --help'", 2},
      {"unknown flag", nullptr, "", "compile {ckpt} --bogus -o {out}",
       "The following argument was not expected: --bogus", 2},
      {"missing checkpoint argument", nullptr, "", "compile -o {out}", "checkpoint is required", 2},
      {"missing value of -o", nullptr, "", "compile {ckpt} -o", "--output: 1 required TEXT missing", 2},
      {"value that is not a number", nullptr, "", "run {art} --tokens 1 --threads many -o {out}", "--threads", 2},
      {"unknown compile scheme", nullptr, "", "compile {ckpt} --scheme 16a2w8 -o {out}",
       "--scheme: unknown scheme '16a2w8': expected one of 16a4w, 16a8w, 16a2w, 8a4w, 8a8w, 8a2w, w4, w8, w2", 2},
      {"group-wise compile scheme", nullptr, "", "compile {ckpt} --scheme w4-g32 -o {out}",
       "--scheme: unknown scheme 'w4-g32' (group-wise scales (-g<B>) and asymmetric rows (-asym) are not served "
       "yet: every scheme here is per-row symmetric): expected one of 16a4w, 16a8w, 16a2w, 8a4w, 8a8w, 8a2w, w4, w8, w2", 2},
      {"weight-only scheme with the legacy pattern", nullptr, "", "compile {ckpt} --scheme w4 --pattern legacy -o {out}",
       "the legacy pattern quantizes the lookup's output to a per-tensor activation; weight-only scheme w4 has none "
       "(its lookups return floats): use --pattern auto or optimized, or an activation scheme (16a4w, 8a4w)"},
      {"unknown compile pattern", nullptr, "", "compile {ckpt} --pattern fastest -o {out}",
       "unknown pattern 'fastest': expected auto, optimized or legacy", 2},
      {"unknown compile mode", nullptr, "", "compile {ckpt} --mode lazy -o {out}",
       "unknown mode 'lazy': expected materialize, fused or auto", 2},
      {"unknown eval scheme", nullptr, "", "eval {ckpt} --scheme 16a1w",
       "unknown scheme '16a1w': expected one of 16a4w, 16a8w, 16a2w, 8a4w, 8a8w, 8a2w, w4, w8, w2, or all", 2},
      {"unknown fakequant scheme", nullptr, "", "fakequant {ckpt} --scheme all -o {out}",
       "unknown scheme 'all': expected one of 16a4w, 16a8w, 16a2w, 8a4w, 8a8w, 8a2w, w4, w8, w2", 2},
      {"fakequant without --scheme", nullptr, "", "fakequant {ckpt} -o {out}", "--scheme is required", 2},
      {"bench output dtype without --dequantize", nullptr, "", "bench {art} --out-dtype bf16",
       "--out-dtype requires --dequantize", 2},
      {"unknown bench output dtype", nullptr, "", "bench {art} --dequantize --out-dtype int8",
       "--out-dtype: unknown output dtype 'int8': expected f32, f16 or bf16", 2},
      {"bench report with a batch", nullptr, "", "bench {art} --report {out} --batch 8",
       "--batch excludes --report", 2},
      {"bench report of pooled lookups", nullptr, "", "bench {art} --report {out} --bags",
       "--bags excludes --report", 2},
      {"bench report and JSON both on standard output", nullptr, "", "bench {art} --report - --json",
       "--report - and --json both write to standard output: give one of them a file"},
      {"unknown run output dtype", nullptr, "", "run {art} --tokens 1 --dequantize --out-dtype f64 -o {out}",
       "--out-dtype: unknown output dtype 'f64': expected f32, f16 or bf16", 2},
      {"run output dtype without --dequantize or --bags", nullptr, "", "run {art} --tokens 1 --out-dtype f16 -o {out}",
       "--out-dtype requires --dequantize or --bags", 2},
      {"unknown output dtype of pooled bags", nullptr, "",
       "run {art} --tokens 1 --bags {dir}/absent.npy --out-dtype f8 -o {out}",
       "--out-dtype: unknown output dtype 'f8': expected f32, f16 or bf16", 2},
      // -- one rule for every count, size and duration (usage errors) ---------
      {"negative thread count", nullptr, "", "run {art} --tokens 1 --threads -1 -o {out}",
       "--threads: '-1' is not a whole number in [0, 65536]", 2},
      {"negative compile thread count", nullptr, "", "compile {ckpt} --threads -5 -o {out}",
       "--threads: '-5' is not a whole number in [0, 65536]", 2},
      {"memory budget -1", nullptr, "", "compile {ckpt} --memory-budget -1 -o {out}",
       "--memory-budget: '-1' is not a whole number in [0, 9223372036854775807]", 2},
      {"memory budget past 64 bits", nullptr, "", "compile {ckpt} --memory-budget 18446744073709551616 -o {out}",
       "--memory-budget: '18446744073709551616' is too large; the most is 9223372036854775807", 2},
      {"bench batch -1", nullptr, "", "bench {art} --batch -1", "--batch: '-1' is not a whole number in [1, 16777216]",
       2},
      {"bench batch 0", nullptr, "", "bench {art} --batch 0", "--batch: '0' is too small; the least is 1", 2},
      {"bench batch of 10^12 ids", nullptr, "", "bench {art} --batch 1000000000000",
       "--batch: '1000000000000' is too large; the most is 16777216", 2},
      {"bench for ever", nullptr, "", "bench {art} --seconds inf", "--seconds: 'inf' is not a finite number of seconds",
       2},
      {"bench for nan seconds", nullptr, "", "bench {art} --seconds nan",
       "--seconds: 'nan' is not a finite number of seconds", 2},
      {"bench for -1 seconds", nullptr, "", "bench {art} --seconds -1", "--seconds: '-1' is outside (0, 3600] seconds",
       2},
      {"eval worst rows -1", nullptr, "", "eval {ckpt} --worst-rows -1",
       "--worst-rows: '-1' is not a whole number in [0, 9223372036854775807]", 2},
      {"eval threads -1", nullptr, "", "eval {ckpt} --threads -1",
       "--threads: '-1' is not a whole number in [0, 65536]", 2},
      {"compile for a version that does not parse", nullptr, "", "compile {ckpt} --qnn-sdk-version 2.x -o {out}",
       "--qnn-sdk-version: invalid SDK version \"2.x\"", 2},
      {"eval for a version that does not parse", nullptr, "", "eval {ckpt} --qnn-sdk-version latest",
       "--qnn-sdk-version: invalid SDK version \"latest\"", 2},
      {"fakequant for a version that does not parse", nullptr, "",
       "fakequant {ckpt} --scheme 16a4w --qnn-sdk-version 2 -o {out}", "--qnn-sdk-version: invalid SDK version \"2\"", 2},
      {"export-onnx for a version that does not parse", nullptr, "",
       "export-onnx {ckpt} --qnn-sdk-version v -o {out}", "--qnn-sdk-version: invalid SDK version \"v\"", 2},
      // -- hostile files: deep JSON, ranges past float32, repeated keys, graphs
      {"safetensors metadata nested 100k deep",
       [&](B) { return safetensors("{\"__metadata__\":{\"a\":" + deep + "}," + good_entry + "}", 960); },
       "bad.safetensors", "compile {bad} -o {out}", "header nests JSON deeper than 16 levels"},
      {"shape nested 100k deep (eval)",
       [&](B) { return safetensors("{\"" + embed + "\":{\"dtype\":\"F32\",\"shape\":[40," + deep +
                                   "],\"data_offsets\":[0,960]}}", 960); },
       "bad.safetensors", "eval {bad} --qnn-sdk-version 2.48", "header nests JSON deeper than 16 levels"},
      {"data_offsets nested 100k deep (fakequant)",
       [&](B) { return safetensors("{\"" + embed + "\":{\"dtype\":\"F32\",\"shape\":[40,6],\"data_offsets\":" +
                                   deep + "}}", 960); },
       "bad.safetensors", "fakequant {bad} --scheme 16a4w --qnn-sdk-version 2.48 -o {out}",
       "header nests JSON deeper than 16 levels"},
      {"table spanning +-2e38 (compile)", [](B b) { return b.table_of("F32", f32_bytes({2e38f, -2e38f, 1.0f})); },
       "bad.safetensors", "compile {bad} --qnn-sdk-version 2.48 -o {out}",
       "the table's values span [-2e+38, 2e+38], wider than float32 can hold"},
      {"table spanning +-2e38 (eval)", [](B b) { return b.table_of("F32", f32_bytes({2e38f, -2e38f, 1.0f})); },
       "bad.safetensors", "eval {bad} --qnn-sdk-version 2.48", "wider than float32 can hold"},
      {"table spanning +-2e38 (fakequant)", [](B b) { return b.table_of("F32", f32_bytes({2e38f, -2e38f, 1.0f})); },
       "bad.safetensors", "fakequant {bad} --scheme 16a8w --qnn-sdk-version 2.48 -o {out}",
       "wider than float32 can hold"},
      {"BF16 table near its maximum", [](B b) { return b.table_of("BF16", {0x7f, 0x7f, 0x7f, 0xff}); },
       "bad.safetensors", "compile {bad} --qnn-sdk-version 2.48 -o {out}", "wider than float32 can hold"},
      {"META that repeats a key",
       [](B b) {
         return b.rewritten([](auto& sections) {
           std::string meta(sections[0].bytes.begin(), sections[0].bytes.end());
           meta.insert(1, "\"scheme\":\"16a8w\",");
           sections[0].bytes = artifact_test::text_bytes(meta);
         });
       },
       "bad.qemb", "run {bad} --tokens 1 -o {out}", "(META) repeats the key 'scheme' in one object"},
      {"GRAPH that repeats a key",
       [](B b) {
         return b.rewritten([](auto& sections) {
           std::string graph(sections[1].bytes.begin(), sections[1].bytes.end());
           graph.insert(1, "\"ops\":[],");
           sections[1].bytes = artifact_test::text_bytes(graph);
         });
       },
       "bad.qemb", "inspect {bad}", "(GRAPH) repeats the key 'ops' in one object"},
      {"graph that converts the table and gathers nothing", [](B b) { return b.convert_only(); }, "bad.qemb",
       "run {bad} --tokens 3,3,3,3 -o {out}", "the graph gathers the input ids 0 times"},
      {"the same on the reference interpreter", [](B b) { return b.convert_only(); }, "bad.qemb",
       "run {bad} --tokens 3,3,3,3 --reference -o {out}", "the graph gathers the input ids 0 times"},
      {"tensor name with terminal escapes", nullptr, "", "compile {ckpt} --tensor 'a\x1b[2Jb\rc' -o {out}",
       "no tensor 'a\\x1b[2Jb\\rc' in"},
      {"unknown --verify mode", nullptr, "", "run {art} --tokens 1 --verify most -o {out}",
       "unknown --verify 'most': expected full or header", 2},
      // -- run --bags: pooled lookups --------------------------------------------
      {"bag offsets that decrease", [](B) { return npy("<i8", {4}, i64_bytes({0, 3, 2, 4})); }, "bags.npy",
       "run {art} --tokens 1,2,3,4 --bags {bad} -o {out}",
       "offsets[2] = 2 is less than offsets[1] = 3; offsets must not decrease"},
      {"bag offsets not starting at 0", [](B) { return npy("<i8", {3}, i64_bytes({1, 2, 4})); }, "bags.npy",
       "run {art} --tokens 1,2,3,4 --bags {bad} -o {out}", "offsets[0] = 1; the first offset must be 0"},
      {"bag offsets past the ids", [](B) { return npy("<i8", {3}, i64_bytes({0, 9, 4})); }, "bags.npy",
       "run {art} --tokens 1,2,3,4 --bags {bad} -o {out}", "offsets[1] = 9 is past the end of the 4 indices"},
      {"last bag offset short of the ids", [](B) { return npy("<i8", {3}, i64_bytes({0, 1, 3})); }, "bags.npy",
       "run {art} --tokens 1,2,3,4 --bags {bad} -o {out}",
       "the last offset, offsets[2] = 3, must equal the number of indices (4)"},
      {"bag length past the ids", [](B) { return npy("<i8", {2}, i64_bytes({1, 5})); }, "bags.npy",
       "run {art} --tokens 1,2,3,4 --bags {bad} --bag-format lengths -o {out}",
       "lengths[1] = 5 runs past the end of the 4 indices (bag 1 starts at 1)"},
      {"negative bag length", [](B) { return npy("<i8", {2}, i64_bytes({-1, 5})); }, "bags.npy",
       "run {art} --tokens 1,2,3,4 --bags {bad} --bag-format lengths -o {out}", "lengths[0] = -1 is negative"},
      {"bagged id past the last row", [](B) { return npy("<i8", {3}, i64_bytes({0, 1, 2})); }, "bags.npy",
       "run {art} --tokens 1,40 --bags {bad} -o {out}",
       "table 0 ('good.qemb'): id 40 at position 1 (bag 1) is past the last row; ids must be in [0, 40)"},
      {"bag offsets of float dtype", [](B) { return npy("<f4", {2}, std::vector<uint8_t>(8, 0)); }, "bags.npy",
       "run {art} --tokens 1 --bags {bad} -o {out}", "holds dtype '<f4'; bag offsets and lengths must be int32 or int64"},
      {"bag offsets of rank 2", [](B) { return npy("<i8", {2, 2}, i64_bytes({0, 1, 1, 1})); }, "bags.npy",
       "run {art} --tokens 1 --bags {bad} -o {out}", "has shape [2, 2]; bag offsets and lengths must be a 1-D array"},
      {"unknown pool mode", nullptr, "", "run {art} --tokens 1 --bags {dir}/absent.npy --pool max -o {out}",
       "--pool: unknown pool mode 'max': expected sum or mean", 2},
      {"unknown bag format", nullptr, "", "run {art} --tokens 1 --bags {dir}/absent.npy --bag-format csr -o {out}",
       "--bag-format: unknown --bag-format 'csr': expected include-last-offset, offsets or lengths", 2},
      {"pooling flags without bags", nullptr, "", "run {art} --tokens 1 --pool mean -o {out}",
       "give --bags OFFSETS.npy too"},
      {"padding id that is not a number", nullptr, "", "run {art} --tokens 1 --bags {dir}/absent.npy --padding-idx x -o {out}",
       "--padding-idx: 'x' is not an integer", 2},
      {"padding id past 64 bits", nullptr, "",
       "run {art} --tokens 1 --bags {dir}/absent.npy --padding-idx 9223372036854775808 -o {out}",
       "--padding-idx: '9223372036854775808' is outside the range of a 64-bit integer", 2},
      {"missing bags file", nullptr, "", "run {art} --tokens 1 --bags {dir}/absent.npy -o {out}",
       "absent.npy': No such file or directory"},
      // -- run --bags over several tables (one --table, --bags and id list each)
      {"two --bags without --table", [](B) { return npy("<i8", {2}, i64_bytes({0, 1})); }, "bags.npy",
       "run {art} --tokens 1 --tokens 2 --bags {bad} --bags {bad} -o {out}",
       "--bags is given 2 times and --table 0 times: pooling several tables takes one --table NAME and one --bags "
       "file per table, in the same order"},
      {"two tables and one --bags", [](B) { return npy("<i8", {2}, i64_bytes({0, 1})); }, "bags.npy",
       "run {art} --tokens 1 --tokens 2 --table embedding --table embedding --bags {bad} -o {out}",
       "--bags is given once and --table 2 times"},
      {"two tables and one id list", [](B) { return npy("<i8", {2}, i64_bytes({0, 1})); }, "bags.npy",
       "run {art} --tokens 1 --table embedding --table embedding --bags {bad} --bags {bad} -o {out}",
       "--tokens is given once for 2 tables: give one id list per --table, in the same order"},
      {"two tables and one weights file", [](B) { return npy("<f4", {1}, std::vector<uint8_t>(4, 0)); }, "w.npy",
       "run {art} --tokens 1 --tokens 2 --table embedding --table embedding --bags {dir}/absent.npy "
       "--bags {dir}/absent.npy --weights {bad} -o {out}",
       "--weights is given once for 2 tables: give one weights file per --table, in the same order, or none"},
      {"ids of two tables from both --tokens and --tokens-file", nullptr, "",
       "run {art} --tokens 1 --tokens-file {dir}/absent.txt --table embedding --table embedding "
       "--bags {dir}/absent.npy --bags {dir}/absent.npy -o {out}",
       "give either --tokens or --tokens-file, not both"},
      {"pooled table the artifact lacks", [](B) { return npy("<i8", {2}, i64_bytes({0, 1})); }, "bags.npy",
       "run {art} --tokens 1 --tokens 2 --table embedding --table nope --bags {bad} --bags {bad} -o {out}",
       "the artifact has no table 'nope'; its tables: embedding"},
      {"plain lookup from two tables", nullptr, "", "run {art} --tokens 1 --table embedding --table embedding -o {out}",
       "--table is given 2 times; a lookup reads one table (pool several with one --bags per --table)"},
      {"plain lookup of two id lists", nullptr, "", "run {art} --tokens 1 --tokens 2 -o {out}",
       "--tokens is given 2 times; a lookup reads one id list (pool several tables with --bags)"},
      {"unknown inspect --verify mode", nullptr, "", "inspect {art} --verify some",
       "unknown --verify 'some': expected full or header", 2},
      {"unknown bench --verify mode", nullptr, "", "bench {art} --verify none",
       "unknown --verify 'none': expected full or header", 2},
      {"run --table the artifact lacks", nullptr, "", "run {art} --tokens 1 --table nope -o {out}",
       "the artifact has no table 'nope'; its tables: embedding"},
      // -- compile: several tables ---------------------------------------------
      {"--tensor glob matching nothing", nullptr, "", "compile {ckpt} --tensor 'decoder.*' -o {out}",
       "' and no name matches it as a pattern: the checkpoint has no top-level 'decoder'"},
      {"--tensor naming a 3-D tensor among several", nullptr, "",
       "compile {ckpt} --tensor model.embed_tokens.weight,model.cube -o {out}", "must be 2-D [vocab, dim]"},
      {"--scheme for a tensor not being compiled", nullptr, "",
       "compile {ckpt} --scheme model.cube=16a8w --qnn-sdk-version 2.48 -o {out}",
       "--scheme model.cube=16a8w: 'model.cube' is not one of the tables being compiled"},
      {"--scheme with an unknown scheme for one table", nullptr, "",
       "compile {ckpt} --scheme model.embed_tokens.weight=16a3w --qnn-sdk-version 2.48 -o {out}", "16a3w", 2},
      // -- issue 37 ------------------------------------------------------------
      // 11: an output that is one of the command's other inputs (same inode).
      {"run --bags writing over its own offsets", [](B) { return npy("<i8", {3}, i64_bytes({0, 1, 2})); }, "bags.npy",
       "run {art} --tokens 1,2 --bags {bad} -o {bad}",
       same_file + "{bad}' (--bags); writing it would replace that input: choose another output path"},
      {"run --bags writing over its weights", [](B) { return npy("<f4", {2}, f32_bytes({1, 1})); }, "w.npy",
       "run {art} --tokens 1,2 --bags {dir}/../absent.npy --weights {bad} -o {bad}",
       same_file + "{bad}' (--weights)"},
      {"run writing over its token file", [](B) { return std::string("1 2 3\n"); }, "ids.txt",
       "run {art} --tokens-file {bad} -o {bad}", same_file + "{bad}' (--tokens-file)"},
      {"compile writing over its calibration tokens", [](B) { return std::string("1 2 3\n"); }, "ids.txt",
       "compile {ckpt} --calibration-tokens {bad} -o {bad}", same_file + "{bad}' (--calibration-tokens)"},
      {"eval report over its token file", [](B) { return std::string("1 2 3\n"); }, "ids.txt",
       "eval {ckpt} --tokens {bad} --report {bad}",
       "' (--report) is the same file as the input '{bad}' (--tokens)"},
      {"compile writing over its --tensor-file", [](B) { return std::string("model.embed_tokens.weight\n"); },
       "names.txt", "compile {ckpt} --tensor-file {bad} -o {bad}", same_file + "{bad}' (--tensor-file)"},
      // 14: config.json decides whether lm_head.weight is the input embedding.
      {"config.json that does not parse", [](B) { return std::string("{\"tie_word_embeddings\": fals"); },
       "lmhead/config.json", "compile {dir}/lmhead --qnn-sdk-version 2.48 -o {out}",
       "lmhead/config.json' is not valid JSON ("},
      {"tie_word_embeddings as a string", [](B) { return std::string("{\"tie_word_embeddings\": \"false\"}"); },
       "lmhead/config.json", "compile {dir}/lmhead --qnn-sdk-version 2.48 -o {out}",
       "lmhead/config.json' gives \"tie_word_embeddings\" the value \"false\", not true or false; it decides "
       "whether lm_head.weight is the input embedding (\"tie_word_embeddings\"): fix the file, or name the table "
       "with --tensor"},
      // 3: an index naming more distinct shards than any checkpoint has.
      {"index naming 100001 distinct shards", [&](B) { return many_shards; }, "model.safetensors.index.json",
       "compile {bad} -o {out}",
       "\"weight_map\" names more than 100000 distinct shard files; no real checkpoint has that many"},
      // 16: the minor ones.
      {"--scheme twice for one table", nullptr, "",
       "compile {ckpt} --scheme model.embed_tokens.weight=16a8w --scheme model.embed_tokens.weight=16a4w "
       "--qnn-sdk-version 2.48 -o {out}",
       "--scheme is given twice for 'model.embed_tokens.weight' (--scheme model.embed_tokens.weight=16a8w and "
       "--scheme model.embed_tokens.weight=16a4w); give one value"},
      {"--mode twice for every table", nullptr, "",
       "compile {ckpt} --mode fused,materialize --qnn-sdk-version 2.48 -o {out}",
       "--mode is given twice for every table (--mode fused and --mode materialize); give one value"},
      {"shard that is a FIFO", nullptr, "", "compile {dir}/fifo_shard -o {out}",
       "names shard 'a.safetensors', which is a FIFO, not a regular file; shards are memory-mapped"},
      {"big-endian GGUF", gguf_with([](GgufSpec& g) { g.version = 3u << 24; }), "bad.gguf", "compile {bad} -o {out}",
       "is big-endian (version 3 stored byte-swapped); qemb reads little-endian GGUF only"},
#ifdef QEMB_HAVE_ONNX
      // 9: all outputs or none.
      {"export-onnx encodings to a full device over an existing model", nullptr, "",
       "export-onnx {ckpt} --qnn-sdk-version 2.48 --encodings {full} -o {out}", "No space left on device"},
      {"export-onnx encodings over its calibration tokens", [](B) { return std::string("1 2\n"); }, "ids.txt",
       "export-onnx {ckpt} --qnn-sdk-version 2.48 --calibration-tokens {bad} --encodings {bad} -o {out}",
       "' (--encodings) is the same file as the input '{bad}' (--calibration-tokens)"},
      // -- issue 36, section 2: tables by name ------------------------------
      {"export-onnx --table the artifact lacks", nullptr, "", "export-onnx {art} --table nope --folded -o {out}",
       "not found: the artifact has no table 'nope'; its tables: embedding"},
      {"export-onnx --table of a checkpoint", nullptr, "", "export-onnx {ckpt} --qnn-sdk-version 2.48 --table x -o {out}",
       "is a checkpoint; --table and --all-tables choose tables of an artifact: name the checkpoint's tensor with "
       "--tensor, or compile it first"},
      {"export-onnx --table with --all-tables", nullptr, "", "export-onnx {art} --table embedding --all-tables -o {out}",
       "--table excludes --all-tables", 2},
#endif
      {"compile --tensor TENSOR= (no name)", nullptr, "",
       "compile {ckpt} --tensor model.embed_tokens.weight= --qnn-sdk-version 2.48 -o {out}",
       "table spec 'model.embed_tokens.weight=' gives an empty name after '='; write TENSOR=NAME"},
      {"compile --tensor =NAME (no tensor)", nullptr, "", "compile {ckpt} --tensor =e --qnn-sdk-version 2.48 -o {out}",
       "table spec '=e' names no tensor before '='; write TENSOR=NAME"},
      {"compile --tensor TENSOR=NAME with --name", nullptr, "",
       "compile {ckpt} --tensor model.embed_tokens.weight=e --name x --qnn-sdk-version 2.48 -o {out}",
       "--name and --tensor TENSOR=NAME both name the table; give one of them"},
      {"bench --table the artifact lacks", nullptr, "", "bench {art} --table nope --seconds 0.01",
       "not found: the artifact has no table 'nope'; its tables: embedding"},
      {"run --table the artifact lacks", nullptr, "", "run {art} --table nope --tokens 1 -o {out}",
       "not found: the artifact has no table 'nope'; its tables: embedding"},
      {"run --bags --json to '-o -'",
       [](B) { return npy("<i8", {2}, std::vector<uint8_t>{0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0}); },
       "off.npy", "run {art} --tokens 1,2 --bags {bad} --json -o -",
       "--json prints to standard output, which '-o -' already carries the pooled rows on; write them to a file "
       "with --json, or drop --json"},
  };
  ASSERT_GE(cases.size(), 30u);

  for (const CliCase& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string bad = c.bad_name.empty() ? "" : dir_.file(c.bad_name);
    if (c.bad_bytes) write_file(bad, c.bad_bytes(*this));
    const std::string out = dir_.file(c.args.find("run ") == 0           ? "out.npy"
                                      : c.args.find("fakequant ") == 0   ? "out.safetensors"
                                      : c.args.find("export-onnx ") == 0 ? "out.onnx"
                                                                         : "out.qemb");
    std::string args = c.args;
    for (auto [from, to] : {std::pair<std::string, std::string>{"{bad}", bad}, {"{ckpt}", ckpt_}, {"{art}", art_},
                            {"{out}", out}, {"{dir}", dir_.path().string()},
                            {"{full}", full_}})
      args = replace_all(args, from, to);

    // Once with no output file, once with one from an earlier run.
    for (bool existing_output : {false, true}) {
      if (existing_output) {
        if (c.args.find("{out}") == std::string::npos) break;
        write_file(out, kPrecious);
      }
      const auto before = snapshot(dir_.path());
      const auto r = run_command(kQemb + " " + args);
      EXPECT_EQ(r.exit_code, c.exit_code) << args << "\n" << r.out;
      EXPECT_NE(r.out.find("qemb: error: "), std::string::npos) << r.out;
      const std::string message = replace_all(replace_all(c.message, "{bad}", bad), "{dir}", dir_.path().string());
      EXPECT_NE(r.out.find(message), std::string::npos) << "expected: " << message << "\ngot: " << r.out;
      EXPECT_EQ(describe_changes(before, snapshot(dir_.path())), "") << args;
    }
    fs::remove(out);
    if (!bad.empty()) fs::remove(bad);
  }
}

// The smallest tables are not bad input: [1, 1], and one column at 4 bits
// (half a byte a row), compile in every mode and pattern, and every kernel
// returns what the scalar reference interpreter returns.
TEST_F(BadInput, SmallestTablesWork) {
  struct Shape {
    int64_t rows, dim;
  };
  for (Shape shape : {Shape{1, 1}, Shape{7, 1}, Shape{5, 3}}) {
    std::vector<float> table(static_cast<size_t>(shape.rows * shape.dim));
    for (size_t i = 0; i < table.size(); ++i) table[i] = 0.25f * static_cast<float>(i + 1) * (i % 2 ? -1.0f : 1.0f);
    std::vector<uint8_t> bytes(table.size() * 4);
    std::memcpy(bytes.data(), table.data(), bytes.size());
    const std::string ckpt = dir_.file("tiny.safetensors"), art = dir_.file("tiny.qemb");
    ASSERT_TRUE(write_safetensors(ckpt, {}, {{"embed_tokens.weight", "F32", {shape.rows, shape.dim}, bytes}}).ok());
    std::string all_ids;
    for (int64_t r = 0; r < shape.rows; ++r) all_ids += (r ? "," : "") + std::to_string(r);
    for (const char* scheme : {"16a4w", "16a8w"}) {
      for (const char* mode : {"fused", "materialize"}) {
        for (const char* pattern : {"optimized", "legacy"}) {
          const std::string what = std::to_string(shape.rows) + "x" + std::to_string(shape.dim) + " " + scheme +
                                   " " + mode + " " + pattern;
          SCOPED_TRACE(what);
          auto c = run_command(kQemb + " compile " + ckpt + " --quiet --qnn-sdk-version 2.48 --scheme " + scheme +
                               " --mode " + mode + " --pattern " + pattern + " -o " + art);
          ASSERT_EQ(c.exit_code, 0) << c.out;
          auto fast = run_command(kQemb + " run " + art + " --dequantize --tokens " + all_ids);
          auto reference = run_command(kQemb + " run " + art + " --dequantize --reference --tokens " + all_ids);
          ASSERT_EQ(fast.exit_code, 0) << fast.out;
          EXPECT_EQ(fast.out, reference.out);
          // One row of one value: the weight is exact (q = +-qmax), so only
          // the 16-bit activation step separates the output from the input.
          if (shape.rows == 1 && shape.dim == 1) {
            EXPECT_NEAR(std::stof(fast.out.substr(fast.out.find(':') + 1)), table[0], 0.25 / 65535 + 1e-7);
          }
        }
      }
      auto e = run_command(kQemb + " eval " + ckpt + " --qnn-sdk-version 2.48 --json --scheme " + scheme);
      EXPECT_EQ(e.exit_code, 0) << e.out;
      auto fq = run_command(kQemb + " fakequant " + ckpt + " --quiet --qnn-sdk-version 2.48 --scheme " + scheme +
                            " -o " + dir_.file("fq.safetensors"));
      EXPECT_EQ(fq.exit_code, 0) << fq.out;
    }
  }
}

// ---- legal but hostile: must work, and print nothing raw ---------------------

// Bytes a terminal acts on: ESC, CR, BEL, and the C1 CSI in UTF-8.
bool has_terminal_controls(const std::string& text) {
  return text.find('\x1b') != std::string::npos || text.find('\r') != std::string::npos ||
         text.find('\x07') != std::string::npos || text.find("\xc2\x9b") != std::string::npos;
}

TEST_F(BadInput, HostileButLegalInputWorksAndPrintsNothingRaw) {
  const std::string odd = dir_.file("m\xff\xfe.safetensors");  // a legal Linux name, not UTF-8
  fs::copy_file(ckpt_, odd);
  const std::string replaced = "m\xef\xbf\xbd\xef\xbf\xbd.safetensors";

  // compile blamed "metadata or a tensor name"; eval --json aborted (nlohmann type_error).
  auto r = run_command(kQemb + " compile '" + odd + "' --qnn-sdk-version 2.48 -o " + dir_.file("odd.qemb"));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  r = run_command(kQemb + " inspect --json " + dir_.file("odd.qemb"));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find(replaced), std::string::npos) << r.out;
  r = run_command(kQemb + " eval '" + odd + "' --json --qnn-sdk-version 2.48");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find(replaced), std::string::npos) << r.out;
  write_file(dir_.file("ids\xff.txt"), "1\n2\n");
  r = run_command(kQemb + " eval " + ckpt_ + " --json --qnn-sdk-version 2.48 --tokens '" + dir_.file("ids\xff.txt") + "'");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  const std::string sdk = dir_.file("qairt\xff/2.48.0.1");
  fs::create_directories(sdk);
  r = run_command("QNN_SDK_ROOT='" + sdk + "' " + kQemb + " eval " + ckpt_ + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("qairt\xef\xbf\xbd"), std::string::npos) << r.out;

  // A checksummed artifact with a section named 0xff: inspect --json aborted.
  write_file(dir_.file("ff.qemb"), rewritten([](auto& sections) { sections[2].name = "\xff"; }));
  r = run_command(kQemb + " inspect --json " + dir_.file("ff.qemb"));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("\"name\": \"\xef\xbf\xbd\""), std::string::npos) << r.out;

  // META strings that would clear the screen, retitle the window and rewrite lines.
  auto loaded = load_artifact(art_);
  ASSERT_TRUE(loaded.ok());
  nlohmann::json meta = loaded->metadata;
  meta["scheme"] = "16a4w\x1b]0;owned\x07\x1b[2J";
  meta["pattern_reason"] = "ok\rfake line\ncsi\xc2\x9b" "31m";
  meta["source"]["tensor"] = "t\x1b[1A";
  write_file(dir_.file("esc.qemb"), rewritten(nullptr, &meta));
  r = run_command(kQemb + " inspect " + dir_.file("esc.qemb"));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_FALSE(has_terminal_controls(r.out)) << r.out;
  EXPECT_NE(r.out.find("scheme:       16a4w\\x1b]0;owned\\x07\\x1b[2J\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ok\\rfake line\\ncsi\\xc2\\x9b31m"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(": t\\x1b[1A ("), std::string::npos) << r.out;

  // A tensor name with escapes, printed by compile, eval and fakequant.
  std::vector<uint8_t> table(kVocab * kDim * 4, 0);
  for (size_t i = 0; i < table.size(); i += 4) table[i + 3] = 0x3f;  // 0.5f
  const std::string esc_ckpt = dir_.file("esc.safetensors");
  ASSERT_TRUE(write_safetensors(esc_ckpt, {}, {{"\x1b[31mmodel.embed_tokens.weight", "F32", {kVocab, kDim}, table}}).ok());
  for (const std::string& args :
       {"compile " + esc_ckpt + " --qnn-sdk-version 2.48 -o " + dir_.file("esc2.qemb"),
        "eval " + esc_ckpt + " --qnn-sdk-version 2.48",
        "fakequant " + esc_ckpt + " --scheme 16a4w --qnn-sdk-version 2.48 -o " + dir_.file("fq.safetensors")}) {
    r = run_command(kQemb + " " + args);
    EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.out;
    EXPECT_FALSE(has_terminal_controls(r.out)) << args << "\n" << r.out;
    EXPECT_NE(r.out.find("\\x1b[31mmodel.embed_tokens.weight"), std::string::npos) << args << "\n" << r.out;
  }
}

// ---- the library, where the command line cannot reach ------------------------

struct LibraryCase {
  std::string what;
  std::function<Status()> call;
  ErrorCode code;
  std::string message;
};

TEST_F(BadInput, LibraryTable) {
  auto loaded = EmbeddingRuntime::load(art_);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  const EmbeddingRuntime& rt = **loaded;
  std::vector<uint16_t> out(4 * kDim, 0xBEEF);
  std::vector<float> out_f(4 * kDim, -7.0f);
  const std::string out_path = dir_.file("out.bin");

  const std::vector<LibraryCase> cases = {
      {"hot bench over an empty id set",
       [&] {
         BenchOptions o;
         o.hot_set = 0;
         o.min_seconds = 0.0;
         return run_bench(rt, o).status();
       },
       ErrorCode::kInvalidArgument, "the hot id set must hold at least 1 id"},
      {"artifact from a null buffer", [] { return load_artifact_from_bytes(nullptr).status(); },
       ErrorCode::kInvalidArgument, "no buffer given"},
      {"artifact from an empty buffer",
       [] { return load_artifact_from_bytes(std::make_shared<OwnedBuffer>(std::vector<uint8_t>{})).status(); },
       ErrorCode::kCorrupt, "0 bytes, smaller than the 64-byte header"},
      {"artifact with a header that lies about the table",
       [&] {
         std::vector<uint8_t> b(good_artifact_.begin(), good_artifact_.end());
         b[12] = 0xff, b[13] = 0xff;  // section count 65535+
         return load_artifact_from_bytes(std::make_shared<OwnedBuffer>(b)).status();
       },
       ErrorCode::kCorrupt, "lies outside the"},
      {"int64 id past the end", [&] { return rt.lookup(std::vector<int64_t>{0, kVocab}, out.data()); },
       ErrorCode::kOutOfRange, "token id 40 at position 1 is past the last row"},
      {"lowest int64 id",
       [&] { return rt.lookup(std::vector<int64_t>{std::numeric_limits<int64_t>::min()}, out.data()); },
       ErrorCode::kOutOfRange, "token id -9223372036854775808 at position 0 is negative"},
      {"negative int32 id", [&] { return rt.lookup(std::vector<int32_t>{1, 2, -1}, out.data()); },
       ErrorCode::kOutOfRange, "token id -1 at position 2 is negative"},
      {"dequantized int32 id past the end",
       [&] { return rt.lookup_dequantized(std::vector<int32_t>{kVocab + 5}, out_f.data()); },
       ErrorCode::kOutOfRange, "token id 45 at position 0"},
      {"f16 int64 id past the end",
       [&] { return rt.lookup_dequantized(std::vector<int64_t>{3, kVocab}, FloatDtype::kF16, out.data()); },
       ErrorCode::kOutOfRange, "token id 40 at position 1 is past the last row"},
      {"bf16 negative int32 id",
       [&] { return rt.lookup_dequantized(std::vector<int32_t>{-2}, FloatDtype::kBF16, out.data()); },
       ErrorCode::kOutOfRange, "token id -2 at position 0 is negative"},
      // Issue 37, 1: an output sharing memory with the ids crashed.
      {"lookup into a buffer that holds its ids",
       [&] {
         std::vector<uint16_t> buf(4 * kDim, 0);
         const int64_t ids[4] = {1, 2, 3, 4};
         std::memcpy(buf.data(), ids, sizeof ids);
         return rt.lookup(std::span<const int64_t>(reinterpret_cast<const int64_t*>(buf.data()), 4), buf.data());
       },
       ErrorCode::kInvalidArgument,
       "the output buffer overlaps the ids: rows written there would overwrite inputs not yet read; pass an output "
       "that shares no memory with the inputs"},
      {"pooled lookup whose weights share the output",
       [&] {
         std::vector<float> buf(kDim, 1.0f);
         const std::vector<int64_t> ids = {1, 2}, offsets = {0, 2};
         TableBags t;
         t.table = &rt;
         t.indices = std::span<const int64_t>(ids);
         t.boundaries = std::span<const int64_t>(offsets);
         t.per_sample_weights = std::span<const float>(buf.data() + 3, 2);
         return embedding_bag(t, buf.data());
       },
       ErrorCode::kInvalidArgument, "table 0: the output buffer overlaps the per-sample weights"},
      {"unknown float dtype name", [] { return parse_float_dtype("fp16").status(); }, ErrorCode::kInvalidArgument,
       "unknown output dtype 'fp16': expected f32, f16 or bf16"},
      {"safetensors from no bytes", [] { return SafetensorsFile::from_bytes({}, "x.safetensors").status(); },
       ErrorCode::kParseError, "is 0 bytes"},
      {"tensor rows past the end",
       [&] {
         auto f = SafetensorsFile::open(ckpt_);
         if (!f.ok()) return f.status();
         std::vector<float> rows(2 * kDim);
         return f->read_rows_float("model.embed_tokens.weight", kVocab - 1, kVocab + 1, rows.data());
       },
       ErrorCode::kOutOfRange, "rows [39, 41)"},
      {"write-back over the input checkpoint",
       [&] {
         auto f = SafetensorsFile::open(ckpt_);
         if (!f.ok()) return f.status();
         std::vector<float> values(kVocab * kDim, 0.0f);
         return copy_with_replaced_tensor(*f, "model.embed_tokens.weight", values.data(), ckpt_);
       },
       ErrorCode::kInvalidArgument, "is the input checkpoint"},
      {"npy with a structured dtype",
       [] {
         const std::string h = "{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (1,), }";
         std::string s = std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(h.size() + 1) + '\0' + h + "\n" +
                         std::string(4, '\0');
         return parse_npy(reinterpret_cast<const uint8_t*>(s.data()), s.size(), "s.npy").status();
       },
       ErrorCode::kUnsupported, "'s.npy': structured dtypes are not supported"},
      {"token ids from a bool .npy",
       [] {
         NpyArray a;
         a.dtype = "|b1";
         a.shape = {2};
         a.data = {1, 0};
         return tokens_from_npy(a, "b.npy").status();
       },
       ErrorCode::kUnsupported, "token ids must be integers"},
      {"npy written to a folder path",
       [&] {
         const uint16_t v[2] = {1, 2};
         return write_npy_u16(dir_.file("folder"), v, 1, 2);
       },
       ErrorCode::kInvalidArgument, "/folder': it is a folder; give the output a file name"},
      {"bench that would never end",
       [&] {
         BenchOptions o;
         o.min_seconds = std::numeric_limits<double>::infinity();
         return run_bench(rt, o).status();
       },
       ErrorCode::kInvalidArgument, "must be a finite number of seconds > 0"},
      {"bench for NaN seconds",
       [&] {
         BenchOptions o;
         o.min_seconds = std::numeric_limits<double>::quiet_NaN();
         return run_bench(rt, o).status();
       },
       ErrorCode::kInvalidArgument, "must be a finite number of seconds > 0"},
      {"bench batch that wrapped from -1",
       [&] {
         BenchOptions o;
         o.batch = static_cast<size_t>(-1);  // length_error before
         return run_bench(rt, o).status();
       },
       ErrorCode::kInvalidArgument, "needs more than half of this machine's memory"},
      {"bench batch of 10^12 ids",
       [&] {
         BenchOptions o;
         o.batch = 1000000000000;  // bad_alloc before
         return run_bench(rt, o).status();
       },
       ErrorCode::kInvalidArgument, "use a smaller BenchOptions.batch"},
      {"artifact of an inconsistent graph over an existing file",
       [&] {
         write_file(out_path, kPrecious);
         Graph g;
         Tensor t;
         t.name = "w";
         t.kind = TensorKind::kStatic;
         t.dtype = DataType::kUFixedPoint16;
         t.shape = {2, 2};
         t.data = std::make_shared<OwnedBuffer>(std::vector<uint8_t>(3, 0));  // needs 8 bytes
         g.add_tensor(t);
         return write_artifact(out_path, g, nlohmann::json::object());
       },
       ErrorCode::kInvalidArgument, "STATIC tensor 'w' holds 3 bytes, its shape needs 8"},
  };
  ASSERT_GE(cases.size(), 10u);
  for (const LibraryCase& c : cases) {
    SCOPED_TRACE(c.what);
    fs::remove(out_path);
    const auto before = snapshot(dir_.path());
    Status s = c.call();
    EXPECT_EQ(s.code(), c.code) << to_string(s.code()) << ": " << s.message();
    EXPECT_NE(s.message().find(c.message), std::string::npos) << "expected: " << c.message << "\ngot: " << s.message();
    auto after = snapshot(dir_.path());
    if (before.count("out.bin") == 0 && after.count("out.bin")) {  // the case wrote it first, on purpose
      EXPECT_EQ(after["out.bin"], kPrecious) << "an existing output was clobbered";
      after.erase("out.bin");
    }
    EXPECT_EQ(describe_changes(before, after), "");
  }
  // Failed lookups wrote nothing.
  for (uint16_t v : out) EXPECT_EQ(v, 0xBEEF);
  for (float v : out_f) EXPECT_EQ(v, -7.0f);
}

// Issue 37, 2: a mapped artifact truncated under a running command raised
// SIGBUS, which killed qemb with "Bus error" and status 135. The command now
// says what happened and exits 3. The bench runs for up to 30 s; the file is
// truncated as soon as the bench has it mapped, and it exits at its next read.
TEST_F(BadInput, ArtifactTruncatedWhileMappedIsAClearError) {
  const auto table = qemb::testing::spread_table(4096, 64, 11);
  std::vector<uint8_t> bytes(table.size() * 4);
  std::memcpy(bytes.data(), table.data(), bytes.size());
  const std::string ckpt = dir_.file("big.safetensors"), art = dir_.file("big.qemb");
  ASSERT_TRUE(write_safetensors(ckpt, {}, {{"model.embed_tokens.weight", "F32", {4096, 64}, bytes}}).ok());
  CompileOptions options;
  options.qnn_sdk_version = "2.48";
  options.mode = CompileMode::kFused;
  ASSERT_TRUE(compile_checkpoint(ckpt, options, art).ok());
  const auto r = run_command(
      "(" + kQemb + " bench " + art + " --seconds 30 --cold > /dev/null & pid=$!; "
      "for i in $(seq 1 3000); do grep -q big.qemb /proc/$pid/maps 2>/dev/null && break; sleep 0.01; done; "
      "truncate -s 0 " + art + "; wait $pid; echo \"exit $?\")");
  EXPECT_NE(r.out.find("qemb: error: a memory-mapped input file (an artifact or checkpoint) was truncated or "
                       "rewritten in place while qemb read it (SIGBUS); do not modify files qemb is reading: write "
                       "a new file and rename it over the old one\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("exit 3\n"), std::string::npos) << r.out;
}

// Issue 37, 10: fakequant of a checkpoint folder followed links to folders
// ("lnk -> ." nested copies, "lnk -> .." copied the output into itself) and
// dropped FIFOs silently. Links to folders are not followed, what is skipped
// is named, and a link to a file (a Hugging Face cache) is copied as the file.
TEST_F(BadInput, FakequantOfAFolderFollowsNoFolderLinks) {
  const fs::path src = dir_.file("ckpt");
  fs::create_directories(src / "sub");
  fs::copy_file(ckpt_, src / "model.safetensors");
  write_file((src / "tokenizer.json").string(), "{}");
  write_file((src / "sub" / "notes.txt").string(), "kept");
  write_file(dir_.file("outside.txt"), "a linked file");
  fs::create_symlink(".", src / "self");
  fs::create_symlink("..", src / "parent");
  fs::create_symlink(dir_.file("outside.txt"), src / "linked.txt");
  ASSERT_EQ(::mkfifo((src / "pipe").c_str(), 0600), 0);
  const std::string out = dir_.file("fq");
  const auto r = run_command(kQemb + " fakequant " + src.string() + " --scheme 16a8w --qnn-sdk-version 2.48 -o " + out);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("qemb: warning: skipped parent (a link to a folder, not followed)\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("qemb: warning: skipped self (a link to a folder, not followed)\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("qemb: warning: skipped pipe (a FIFO)\n"), std::string::npos) << r.out;
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(out)) files.push_back(fs::relative(e.path(), out).string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"linked.txt", "model.safetensors", "sub", "sub/notes.txt", "tokenizer.json"}));
  EXPECT_EQ(qemb::testing::read_text(out + "/linked.txt"), "a linked file");
  EXPECT_FALSE(fs::is_symlink(out + "/linked.txt"));
}

// Issue 37, 12: --json printed bare inf/-inf for f16 rows past 65504, which
// is not JSON; they are the strings "Infinity" and "-Infinity".
TEST_F(BadInput, JsonRowsHoldNoBareInfinity) {
  std::vector<float> table(kVocab * kDim);
  for (size_t i = 0; i < table.size(); ++i) table[i] = (i % 2 ? -1.0f : 1.0f) * 100000.0f * static_cast<float>(1 + i % 3);
  std::vector<uint8_t> bytes(table.size() * 4);
  std::memcpy(bytes.data(), table.data(), bytes.size());
  const std::string ckpt = dir_.file("wide.safetensors"), art = dir_.file("wide.qemb");
  ASSERT_TRUE(write_safetensors(ckpt, {}, {{"model.embed_tokens.weight", "F32", {kVocab, kDim}, bytes}}).ok());
  CompileOptions options;
  options.qnn_sdk_version = "2.48";
  ASSERT_TRUE(compile_checkpoint(ckpt, options, art).ok());
  const auto r = run_command(kQemb + " run " + art + " --tokens 0,1 --dequantize --out-dtype f16 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out.find("inf,"), std::string::npos) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);  // throws (fails the test) if not JSON
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0][0], "Infinity");
  EXPECT_EQ(j[0][1], "-Infinity");
}

// Issue 37, 13: a shard may be a symbolic link to a file anywhere (a Hugging
// Face cache links its snapshot into blobs/); a name with ".." is refused.
TEST_F(BadInput, ShardsMayBeLinksOutOfTheFolderButNotDotDotNames) {
  fs::create_directories(dir_.file("blobs"));
  fs::create_directories(dir_.file("snapshot"));
  fs::copy_file(ckpt_, dir_.file("blobs/1234abcd"));
  fs::create_symlink(dir_.file("blobs/1234abcd"), dir_.file("snapshot/model-00001.safetensors"));
  write_file(dir_.file("snapshot/model.safetensors.index.json"),
             "{\"weight_map\": {\"model.embed_tokens.weight\": \"model-00001.safetensors\", "
             "\"model.cube\": \"model-00001.safetensors\"}}");
  auto r = run_command(kQemb + " compile " + dir_.file("snapshot") + " --qnn-sdk-version 2.48 -o " + dir_.file("s.qemb"));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  write_file(dir_.file("snapshot/model.safetensors.index.json"),
             "{\"weight_map\": {\"model.embed_tokens.weight\": \"../blobs/1234abcd\"}}");
  r = run_command(kQemb + " compile " + dir_.file("snapshot") + " --qnn-sdk-version 2.48 -o " + dir_.file("t.qemb"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("\"weight_map\" places 'model.embed_tokens.weight' in '../blobs/1234abcd'; shards must be "
                       "named inside the index's folder"),
            std::string::npos)
      << r.out;
}

// Issue 37, 16: tensor names holding ',' or '=' can be selected with
// --tensor-file, and given a per-table value (split at the last '=').
TEST_F(BadInput, TensorNamesWithCommaAndEquals) {
  auto table = qemb::testing::spread_table(kVocab, kDim, 5);
  std::vector<uint8_t> bytes(table.size() * 4);
  std::memcpy(bytes.data(), table.data(), bytes.size());
  const std::string ckpt = dir_.file("odd.safetensors");
  ASSERT_TRUE(write_safetensors(ckpt, {}, {{"emb,a=1", "F32", {kVocab, kDim}, bytes}, {"plain", "F32", {kVocab, kDim}, bytes}})
                  .ok());
  write_file(dir_.file("names.txt"), "emb,a=1\nplain\n");
  const auto r = run_command(kQemb + " compile " + ckpt + " --tensor-file " + dir_.file("names.txt") +
                             " --scheme 'emb,a=1=16a8w' --qnn-sdk-version 2.48 -o " + dir_.file("odd.qemb"));
  // The ',' in --scheme still splits the list: that name's scheme is given
  // through the general value instead.
  EXPECT_EQ(r.exit_code, 2) << r.out;
  const auto ok = run_command(kQemb + " compile " + ckpt + " --tensor-file " + dir_.file("names.txt") +
                              " --scheme plain=16a8w --qnn-sdk-version 2.48 -o " + dir_.file("odd.qemb"));
  ASSERT_EQ(ok.exit_code, 0) << ok.out;
  EXPECT_NE(ok.out.find("table:   emb,a=1\n"), std::string::npos) << ok.out;
  auto rt = EmbeddingRuntime::load(dir_.file("odd.qemb"));
  ASSERT_TRUE(rt.ok());
  EXPECT_EQ((*rt)->table_names(), (std::vector<std::string>{"emb,a=1", "plain"}));
  EXPECT_EQ((*rt)->table(1).metadata()["scheme"], "16a8w");
  EXPECT_EQ((*rt)->table(0).metadata()["scheme"], "16a4w");
}

// Issue 37, 6: `run --bags` allocated the whole [B, sum D] output at once
// (300k empty bags on D=4096: bad_alloc); it is pooled and written 16 MiB at
// a time. 750000 bags of D=6 float32 are 18 MB: two pieces, with bags on
// both sides of the seam.
TEST_F(BadInput, PooledOutputIsWrittenInPieces) {
  constexpr int32_t kBags = 750000;
  std::vector<int32_t> lengths(kBags, 0);
  lengths[0] = lengths[700000] = lengths[kBags - 1] = 1;
  std::vector<uint8_t> bytes(lengths.size() * 4);
  std::memcpy(bytes.data(), lengths.data(), bytes.size());
  write_file(dir_.file("lengths.npy"), npy("<i4", {kBags}, bytes));
  const std::string out = dir_.file("pooled.npy");
  auto r = run_command(kQemb + " run " + art_ + " --tokens 3,5,7 --bags " + dir_.file("lengths.npy") +
                       " --bag-format lengths -o " + out);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto pooled = read_npy(out);
  ASSERT_TRUE(pooled.ok()) << pooled.error().message;
  EXPECT_EQ(pooled->dtype, "<f4");
  EXPECT_EQ(pooled->shape, (std::vector<int64_t>{kBags, kDim}));
  auto rt = EmbeddingRuntime::load(art_);
  ASSERT_TRUE(rt.ok());
  std::vector<float> rows(3 * kDim);
  ASSERT_TRUE((*rt)->lookup_dequantized(std::vector<int64_t>{3, 5, 7}, rows.data()).ok());
  const auto* got = reinterpret_cast<const float*>(pooled->data.data());
  const int64_t at[3] = {0, 700000, kBags - 1};
  for (int k = 0; k < 3; ++k)
    for (int64_t j = 0; j < kDim; ++j) EXPECT_EQ(got[at[k] * kDim + j], rows[k * kDim + j]) << at[k] << "," << j;
  size_t nonzero = 0;
  for (int64_t i = 0; i < static_cast<int64_t>(kBags) * kDim; ++i) nonzero += got[i] != 0.0f;
  size_t nonzero_rows = 0;
  for (float v : rows) nonzero_rows += v != 0.0f;
  EXPECT_EQ(nonzero, nonzero_rows);
}

}  // namespace
}  // namespace qemb
