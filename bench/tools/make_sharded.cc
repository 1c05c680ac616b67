// Writes a large sharded checkpoint whose embedding is real and whose other
// shards are sparse files (declared tensors, no data blocks), plus the same
// embedding as one lone file, for scripts/bench-sharded.sh:
//   qemb_make_sharded --rows R --dim D --shards N --filler-gib G OUT_FOLDER
// OUT_FOLDER/sharded/ holds model.safetensors.index.json and N shards (the
// embedding in shard 2); OUT_FOLDER/lone.safetensors holds the embedding only.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "qemb/half.h"

namespace {

void fail(const std::string& what) {
  std::fprintf(stderr, "qemb_make_sharded: %s\n", what.c_str());
  std::exit(1);
}

// A safetensors header for one BF16 tensor, padded so data starts 8-aligned.
std::string header(const std::string& name, int64_t rows, int64_t dim) {
  std::string h = "{\"" + name + "\":{\"dtype\":\"BF16\",\"shape\":[" + std::to_string(rows) + "," +
                  std::to_string(dim) + "],\"data_offsets\":[0," + std::to_string(rows * dim * 2) + "]}}";
  while ((8 + h.size()) % 8) h += ' ';
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((h.size() >> (8 * i)) & 0xff);
  return out + h;
}

void write_embedding(const std::string& path, int64_t rows, int64_t dim) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) fail("cannot write " + path);
  const std::string h = header("model.embed_tokens.weight", rows, dim);
  std::fwrite(h.data(), 1, h.size(), f);
  std::vector<uint16_t> row(static_cast<size_t>(dim));
  uint64_t state = 0x9E3779B97F4A7C15ull;
  for (int64_t r = 0; r < rows; ++r) {
    const float scale = 0.001f + 0.05f * static_cast<float>(r % 97) / 97.0f;  // varied row scales
    for (int64_t j = 0; j < dim; ++j) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const float u = static_cast<float>(state >> 40) / static_cast<float>(1 << 24) - 0.5f;
      row[static_cast<size_t>(j)] = qemb::float_to_bf16(scale * u);
    }
    if (std::fwrite(row.data(), 2, row.size(), f) != row.size()) fail("short write to " + path);
  }
  if (std::fclose(f) != 0) fail("cannot close " + path);
}

// A shard whose one tensor's data is a hole: it takes no disk space.
void write_sparse(const std::string& path, const std::string& name, int64_t rows, int64_t dim) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) fail("cannot write " + path);
  const std::string h = header(name, rows, dim);
  std::fwrite(h.data(), 1, h.size(), f);
  std::fflush(f);
  if (::ftruncate(::fileno(f), static_cast<off_t>(h.size() + static_cast<size_t>(rows * dim * 2))) != 0)
    fail("cannot extend " + path);
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t rows = 128256, dim = 4096, shards = 4;
  double filler_gib = 5.0;
  std::string out;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] {
      if (i + 1 >= argc) fail(a + " needs a value");
      return std::string(argv[++i]);
    };
    if (a == "--rows") rows = std::atoll(next().c_str());
    else if (a == "--dim") dim = std::atoll(next().c_str());
    else if (a == "--shards") shards = std::atoll(next().c_str());
    else if (a == "--filler-gib") filler_gib = std::atof(next().c_str());
    else out = a;
  }
  if (out.empty() || shards < 2 || rows <= 0 || dim <= 0)
    fail("usage: qemb_make_sharded --rows R --dim D --shards N --filler-gib G OUT_FOLDER");
  const std::string dir = out + "/sharded";
  std::filesystem::create_directories(dir);
  write_embedding(out + "/lone.safetensors", rows, dim);
  std::string map;
  const int64_t filler_rows = static_cast<int64_t>(filler_gib * (1ull << 30) / (2.0 * 4096));
  for (int64_t s = 0; s < shards; ++s) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05lld-of-%05lld.safetensors", static_cast<long long>(s + 1),
                  static_cast<long long>(shards));
    const std::string path = dir + "/" + name;
    std::string tensor;
    if (s == 1) {
      std::filesystem::copy_file(out + "/lone.safetensors", path, std::filesystem::copy_options::overwrite_existing);
      tensor = "model.embed_tokens.weight";
    } else {
      tensor = "model.layers." + std::to_string(s) + ".mlp.weight";
      write_sparse(path, tensor, filler_rows, 4096);
    }
    map += std::string(map.empty() ? "" : ",") + "\"" + tensor + "\":\"" + name + "\"";
  }
  FILE* f = std::fopen((dir + "/model.safetensors.index.json").c_str(), "wb");
  if (!f) fail("cannot write the index");
  const std::string index = "{\"metadata\":{},\"weight_map\":{" + map + "}}\n";
  std::fwrite(index.data(), 1, index.size(), f);
  std::fclose(f);
  std::printf("wrote %s/sharded (%lld shards) and %s/lone.safetensors\n", out.c_str(), static_cast<long long>(shards),
              out.c_str());
  return 0;
}
