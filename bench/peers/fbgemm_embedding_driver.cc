// FBGEMM's side of the side-by-side benchmark (fbgemm_side_by_side.sh).
//
// Times FBGEMM's rowwise-quantized embedding kernels on the shapes `qemb
// bench` measures, the way `qemb bench` measures them (src/runtime/bench.cc):
// the same ids (std::mt19937_64 seeded 42; hot cycles 1024 ids drawn over the
// table, cold draws fresh ids over the whole table, enough batches for
// min(4 x rows, 2^26) ids), the same paired turns (8 batches of a memcpy
// gather of the same records, then 8 of the kernel, until both have run
// --seconds), the same rates (rows/s for gathers, ids/s for bags).
//
//   4-bit: GenerateEmbeddingSpMDMNBit(4, D, ...): D/2 bytes then an fp16
//          scale and bias (68 B a row at D = 128; qemb's w4 record is 68 B).
//   8-bit: GenerateEmbeddingSpMDMWithStrides<uint8_t>(..., scale_bias_last =
//          false): an fp16 scale and bias then D bytes, TBE's layout (132 B
//          at D = 128, as qemb's w8 record); --layout8 fp32 gives the fused
//          8-bit rowwise layout (D bytes then an fp32 scale and bias).
// Gathers (--pooling 0) are bags of one id each, as the kernels have no
// JIT'd bag-less form; outputs are float32; prefetch distance FBGEMM's
// default (16). The table is anonymous memory, 2 MiB aligned, with
// MADV_HUGEPAGE (--pages huge) or MADV_NOHUGEPAGE (--pages small); the JSON
// reports how much of it the kernel gave huge pages (AnonHugePages).
//
// Our code, built by the script against the user's FBGEMM build; never part
// of qemb's CMake build:
//   g++ -std=c++20 -O2 -I$FBGEMM/include fbgemm_embedding_driver.cc \
//       $BUILD/libfbgemm.a ... -lpthread
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <fbgemm/FbgemmEmbedding.h>
#include <fbgemm/Utils.h>

namespace {

struct Options {
  int bits = 4;
  int64_t dim = 128;
  int64_t rows = 1 << 20;
  size_t batch = 2048;  // rows per call, or bags per call with --pooling
  size_t pooling = 0;   // 0: a gather (one id per bag)
  bool cold = false;
  double seconds = 0.5;
  bool huge = true;
  bool fp32_scale8 = false;
  int prefetch = 16;
  uint64_t seed = 42;
  size_t hot_set = 1024;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "fbgemm_embedding_driver: %s\n"
               "usage: fbgemm_embedding_driver --bits 4|8 [--dim D] [--rows N] [--batch B] [--pooling P]\n"
               "       [--cold] [--seconds S] [--pages huge|small] [--layout8 fp16|fp32] [--prefetch K]\n",
               why);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value of " + a).c_str());
      return argv[++i];
    };
    if (a == "--bits") o.bits = std::stoi(next());
    else if (a == "--dim") o.dim = std::stoll(next());
    else if (a == "--rows") o.rows = std::stoll(next());
    else if (a == "--batch") o.batch = std::stoull(next());
    else if (a == "--pooling") o.pooling = std::stoull(next());
    else if (a == "--cold") o.cold = true;
    else if (a == "--seconds") o.seconds = std::stod(next());
    else if (a == "--prefetch") o.prefetch = std::stoi(next());
    else if (a == "--pages") {
      const std::string v = next();
      if (v != "huge" && v != "small") usage("--pages takes huge or small");
      o.huge = v == "huge";
    } else if (a == "--layout8") {
      const std::string v = next();
      if (v != "fp16" && v != "fp32") usage("--layout8 takes fp16 or fp32");
      o.fp32_scale8 = v == "fp32";
    } else usage(("unknown argument " + a).c_str());
  }
  if (o.bits != 4 && o.bits != 8) usage("--bits takes 4 or 8");
  if (o.dim <= 0 || o.rows <= 0 || o.batch == 0 || o.dim % 2 != 0) usage("bad --dim, --rows or --batch");
  return o;
}

const char* isa_name(fbgemm::inst_set_t isa) {
  switch (isa) {
    case fbgemm::inst_set_t::anyarch: return "anyarch";
    case fbgemm::inst_set_t::avx2: return "AVX2";
    case fbgemm::inst_set_t::avx512: return "AVX512";
    case fbgemm::inst_set_t::avx512_ymm: return "AVX512_256";
    case fbgemm::inst_set_t::avx512_vnni: return "AVX512_E1";
    case fbgemm::inst_set_t::avx512_vnni_ymm: return "AVX512_E1_256";
    default: return "other";
  }
}

// kB of AnonHugePages in the mapping that starts at `p` (/proc/self/smaps).
long huge_kb(const void* p) {
  std::ifstream f("/proc/self/smaps");
  char start[32];
  std::snprintf(start, sizeof start, "%" PRIxPTR "-", reinterpret_cast<uintptr_t>(p));
  std::string line;
  bool in = false;
  while (std::getline(f, line)) {
    if (line.rfind(start, 0) == 0) in = true;
    else if (in && line.rfind("AnonHugePages:", 0) == 0) return std::atol(line.c_str() + 14);
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  const int64_t D = o.dim;
  const bool four = o.bits == 4;
  const size_t row_bytes = four ? static_cast<size_t>(D / 2 + 4) : static_cast<size_t>(D + (o.fp32_scale8 ? 8 : 4));
  const size_t table_bytes = row_bytes * static_cast<size_t>(o.rows);

  // The table: 2 MiB aligned anonymous memory, huge pages asked for or refused.
  const size_t kHuge = size_t{2} << 20;
  const size_t mapped = (table_bytes + 2 * kHuge) & ~(kHuge - 1);
  void* raw = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) {
    std::perror("mmap");
    return 1;
  }
  auto* table = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + kHuge - 1) & ~(kHuge - 1));
  madvise(raw, mapped, o.huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  {
    // Random codes; a small positive scale and zero bias (fp16 0x2000 = 2^-7).
    std::mt19937_64 fill(7);
    for (size_t off = 0; off + 8 <= table_bytes; off += 8) {
      const uint64_t v = fill();
      std::memcpy(table + off, &v, 8);
    }
    for (int64_t r = 0; r < o.rows; ++r) {
      uint8_t* row = table + static_cast<size_t>(r) * row_bytes;
      if (four) {  // scale and bias last
        const uint16_t sb[2] = {0x2000, 0};
        std::memcpy(row + D / 2, sb, 4);
      } else if (o.fp32_scale8) {  // fp32 scale and bias last
        const float sb[2] = {0.0078125f, 0.f};
        std::memcpy(row + D, sb, 8);
      } else {  // fp16 scale and bias first
        const uint16_t sb[2] = {0x2000, 0};
        std::memcpy(row, sb, 4);
      }
    }
  }

  // The ids, as qemb bench draws them.
  const size_t ids_per_call = o.pooling > 0 ? o.batch * o.pooling : o.batch;
  const size_t bags = o.batch;  // one id a bag for gathers
  std::mt19937_64 rng(o.seed);
  std::vector<int64_t> hot_ids(std::min<size_t>(o.hot_set, static_cast<size_t>(o.rows)));
  for (auto& id : hot_ids) id = static_cast<int64_t>(rng() % static_cast<uint64_t>(o.rows));
  size_t batches = 1;
  if (o.cold) {
    const size_t touch = std::min<size_t>(4 * static_cast<size_t>(o.rows), size_t{1} << 26);
    batches = std::max<size_t>(1, touch / ids_per_call);
  }
  std::vector<int64_t> ids(batches * ids_per_call);
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = o.cold ? static_cast<int64_t>(rng() % static_cast<uint64_t>(o.rows)) : hot_ids[i % hot_ids.size()];
  const size_t per_bag = o.pooling > 0 ? o.pooling : 1;
  std::vector<int64_t> offsets(bags + 1);
  for (size_t b = 0; b <= bags; ++b) offsets[b] = static_cast<int64_t>(b * per_bag);
  std::vector<float> out(bags * static_cast<size_t>(D));
  std::vector<uint8_t> copy(ids_per_call * row_bytes);

  using Kernel = std::function<bool(int64_t, int64_t, int64_t, const uint8_t*, const int64_t*, const int64_t*,
                                    const float*, float*)>;
  Kernel kernel;
  if (four) {
    kernel = fbgemm::GenerateEmbeddingSpMDMNBit<int64_t, int64_t, float>(
        4, D, /*has_weight=*/false, /*normalize_by_lengths=*/false, o.prefetch,
        /*is_weight_positional=*/false, /*use_offsets=*/true);
  } else {
    kernel = fbgemm::GenerateEmbeddingSpMDMWithStrides<uint8_t, int64_t, int64_t, float>(
        D, /*has_weight=*/false, /*normalize_by_lengths=*/false, o.prefetch,
        /*is_weight_positional=*/false, /*use_offsets=*/true, /*output_stride=*/-1,
        /*input_stride=*/-1, /*scale_bias_last=*/o.fp32_scale8);
  }

  // Fault the whole table in (it was written above; this reads it once more,
  // as qemb bench touches its mapped artifact before timing).
  uint8_t touched = 0;
  for (size_t off = 0; off < table_bytes; off += 4096) touched ^= table[off];
  volatile uint8_t sink = touched;
  (void)sink;

  bool ok = true;
  auto kernel_step = [&](size_t b) {
    ok = kernel(static_cast<int64_t>(bags), static_cast<int64_t>(ids_per_call), o.rows, table,
                ids.data() + b * ids_per_call, offsets.data(), nullptr, out.data()) && ok;
  };
  const bool discard = o.pooling > 0;
  auto baseline_step = [&](size_t b) {
    const int64_t* batch_ids = ids.data() + b * ids_per_call;
    for (size_t i = 0; i < ids_per_call; ++i) {
      uint8_t* dst = copy.data() + (discard ? i % 16 : i) * row_bytes;
      std::memcpy(dst, table + static_cast<size_t>(batch_ids[i]) * row_bytes, row_bytes);
    }
  };

  // qemb's measure_pairs: warm up, then turns of 8 baseline and 8 kernel batches.
  using clock = std::chrono::steady_clock;
  constexpr size_t kBatchesPerTurn = 8;
  for (size_t b = 0; b < std::min<size_t>(batches, 4); ++b) {
    baseline_step(b);
    kernel_step(b);
  }
  size_t next = 0, turns = 0;
  double kernel_s = 0, baseline_s = 0;
  do {
    const auto t0 = clock::now();
    for (size_t k = 0; k < kBatchesPerTurn; ++k) baseline_step(next++ % batches);
    const auto t1 = clock::now();
    for (size_t k = 0; k < kBatchesPerTurn; ++k) kernel_step(next++ % batches);
    const auto t2 = clock::now();
    baseline_s += std::chrono::duration<double>(t1 - t0).count();
    kernel_s += std::chrono::duration<double>(t2 - t1).count();
    ++turns;
  } while (kernel_s + baseline_s < 2 * o.seconds);
  if (!ok) {
    std::fprintf(stderr, "fbgemm_embedding_driver: the kernel returned false (ids out of range?)\n");
    return 1;
  }
  // Check the last call's first bags against a plain dequantization, so a
  // misread layout cannot pass for speed.
  double worst = 0;
  {
    const size_t b = (next - 1) % batches;
    const int64_t* batch_ids = ids.data() + b * ids_per_call;
    for (size_t bag = 0; bag < std::min<size_t>(bags, 8); ++bag) {
      for (int64_t c = 0; c < D; ++c) {
        double want = 0;
        for (size_t k = 0; k < per_bag; ++k) {
          const uint8_t* row = table + static_cast<size_t>(batch_ids[bag * per_bag + k]) * row_bytes;
          double scale = 0.0078125, q = 0;  // bias 0
          if (four) q = (row[c / 2] >> (4 * (c % 2))) & 15;
          else if (o.fp32_scale8) q = row[c];
          else q = row[4 + c];
          want += scale * q;
        }
        worst = std::max(worst, std::abs(want - out[bag * static_cast<size_t>(D) + c]));
      }
    }
  }
  if (worst > 1e-3) {
    std::fprintf(stderr, "fbgemm_embedding_driver: the output differs from a plain dequantization by %g\n", worst);
    return 1;
  }
  const double n = static_cast<double>(turns * kBatchesPerTurn) * static_cast<double>(ids_per_call);
  const double rate = n / kernel_s, base = n / baseline_s;
  std::printf(
      "{\"system\": \"fbgemm\", \"isa\": \"%s\", \"bits\": %d, \"dim\": %" PRId64 ", \"rows\": %" PRId64
      ", \"batch\": %zu, \"pooling\": %zu, \"cold\": %s, \"row_bytes\": %zu, \"rows_per_s\": %.6g, "
      "\"baseline_rows_per_s\": %.6g, \"ratio\": %.4f, \"table_bytes\": %zu, \"huge_kb\": %ld}\n",
      isa_name(fbgemm::fbgemmInstructionSet()), o.bits, D, o.rows, o.batch, o.pooling, o.cold ? "true" : "false",
      row_bytes, rate, base, rate / base, table_bytes, huge_kb(raw));
  return 0;
}
