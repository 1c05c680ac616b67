#include "qemb/gguf.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/file.h"
#include "qemb/half.h"
#include "core/ir.h"
#include "kernels/half_kernels.h"

namespace qemb {
namespace {

std::string in_quotes(const std::string& s) { return "'" + s + "'"; }

// A bounds-checked little-endian cursor over the file; every failure names
// the byte offset and what was being read.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const std::string& file) : data_(data), size_(size), file_(file) {}
  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  Error error(const std::string& what) const {
    return make_error(ErrorCode::kParseError, "GGUF file " + in_quotes(file_) + ": " + what);
  }
  Error truncated(const std::string& what, uint64_t need) const {
    return error(what + " at byte " + std::to_string(pos_) + " needs " + std::to_string(need) + " bytes but only " +
                 std::to_string(remaining()) + " remain; the file is truncated or corrupt");
  }
  template <typename T>
  Result<T> get(const std::string& what) {
    if (remaining() < sizeof(T)) return truncated(what, sizeof(T));
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));  // the format is little-endian, as are the hosts qemb builds for
    pos_ += sizeof(T);
    return v;
  }
  Result<std::string> string(const std::string& what) {
    QEMB_ASSIGN_OR_RETURN(uint64_t n, get<uint64_t>(what + " length"));
    if (n > kGgufMaxStringBytes)
      return error(what + " at byte " + std::to_string(pos_ - 8) + " claims " + std::to_string(n) +
                   " bytes, over the " + std::to_string(kGgufMaxStringBytes) + "-byte limit; the file is corrupt");
    if (n > remaining()) return truncated(what, n);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(n));
    pos_ += n;
    return s;
  }
  // A string value, as a view of the file's bytes (no copy).
  Result<std::string_view> string_view(const std::string& what) {
    QEMB_ASSIGN_OR_RETURN(uint64_t n, get<uint64_t>(what + " length"));
    if (n > kGgufMaxStringBytes)
      return error(what + " at byte " + std::to_string(pos_ - 8) + " claims " + std::to_string(n) +
                   " bytes, over the " + std::to_string(kGgufMaxStringBytes) + "-byte limit; the file is corrupt");
    if (n > remaining()) return truncated(what, n);
    std::string_view s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(n));
    pos_ += n;
    return s;
  }
  Status skip(uint64_t n, const std::string& what) {
    if (n > remaining()) return truncated(what, n);
    pos_ += n;
    return Status::Ok();
  }

 private:
  const uint8_t* data_;
  size_t size_;
  const std::string& file_;
  uint64_t pos_ = 0;
};

// Bytes of one scalar of a metadata type; 0 for string, array and unknown.
uint64_t scalar_bytes(uint32_t t) {
  switch (t) {
    case 0: case 1: case 7: return 1;
    case 2: case 3: return 2;
    case 4: case 5: case 6: return 4;
    case 10: case 11: case 12: return 8;
    default: return 0;
  }
}

Status read_scalar(Cursor& c, GgufValue& v, const std::string& what) {
  switch (v.type) {
    case GgufValue::Type::kU8: { QEMB_ASSIGN_OR_RETURN(uint8_t x, c.get<uint8_t>(what)); v.u = x; break; }
    case GgufValue::Type::kI8: { QEMB_ASSIGN_OR_RETURN(int8_t x, c.get<int8_t>(what)); v.i = x; break; }
    case GgufValue::Type::kU16: { QEMB_ASSIGN_OR_RETURN(uint16_t x, c.get<uint16_t>(what)); v.u = x; break; }
    case GgufValue::Type::kI16: { QEMB_ASSIGN_OR_RETURN(int16_t x, c.get<int16_t>(what)); v.i = x; break; }
    case GgufValue::Type::kU32: { QEMB_ASSIGN_OR_RETURN(uint32_t x, c.get<uint32_t>(what)); v.u = x; break; }
    case GgufValue::Type::kI32: { QEMB_ASSIGN_OR_RETURN(int32_t x, c.get<int32_t>(what)); v.i = x; break; }
    case GgufValue::Type::kF32: { QEMB_ASSIGN_OR_RETURN(float x, c.get<float>(what)); v.f = x; break; }
    case GgufValue::Type::kBool: {
      QEMB_ASSIGN_OR_RETURN(uint8_t x, c.get<uint8_t>(what));
      if (x > 1) return c.error(what + " is a bool holding " + std::to_string(x) + "; a bool is 0 or 1");
      v.u = x;
      break;
    }
    case GgufValue::Type::kU64: { QEMB_ASSIGN_OR_RETURN(uint64_t x, c.get<uint64_t>(what)); v.u = x; break; }
    case GgufValue::Type::kI64: { QEMB_ASSIGN_OR_RETURN(int64_t x, c.get<int64_t>(what)); v.i = x; break; }
    case GgufValue::Type::kF64: { QEMB_ASSIGN_OR_RETURN(double x, c.get<double>(what)); v.f = x; break; }
    case GgufValue::Type::kString: { QEMB_ASSIGN_OR_RETURN(v.s, c.string_view(what)); break; }
    case GgufValue::Type::kArray: break;  // handled by the caller
  }
  return Status::Ok();
}

Error unknown_value_type(const Cursor& c, uint32_t t, const std::string& what) {
  return c.error(what + " has value type " + std::to_string(t) + " at byte " + std::to_string(c.pos() - 4) +
                 "; GGUF value types are 0 to 12; the file is corrupt or from a newer GGUF");
}

Result<GgufValue> read_value(Cursor& c, const std::string& key) {
  const std::string what = "value of " + in_quotes(key);
  QEMB_ASSIGN_OR_RETURN(uint32_t type, c.get<uint32_t>("type of " + in_quotes(key)));
  if (type > 12) return unknown_value_type(c, type, what);
  GgufValue v;
  v.type = static_cast<GgufValue::Type>(type);
  if (v.type != GgufValue::Type::kArray) {
    QEMB_RETURN_IF_ERROR(read_scalar(c, v, what));
    return v;
  }
  QEMB_ASSIGN_OR_RETURN(uint32_t elem, c.get<uint32_t>("element type of " + in_quotes(key)));
  if (elem > 12) return unknown_value_type(c, elem, "an element of " + in_quotes(key));
  if (elem == static_cast<uint32_t>(GgufValue::Type::kArray))
    return c.error("array " + in_quotes(key) + " holds arrays; qemb reads arrays of scalars and strings only");
  QEMB_ASSIGN_OR_RETURN(uint64_t n, c.get<uint64_t>("length of " + in_quotes(key)));
  v.array_type = static_cast<GgufValue::Type>(elem);
  v.array_size = n;
  const uint64_t min_bytes = elem == 8 ? 8 : scalar_bytes(elem);  // a string is at least its length
  if (n > c.remaining() / min_bytes)
    return c.error("array " + in_quotes(key) + " claims " + std::to_string(n) + " elements of at least " +
                   std::to_string(min_bytes) + " bytes, more than the " + std::to_string(c.remaining()) +
                   " bytes left; the file is truncated or corrupt");
  if (elem == 8) {
    for (uint64_t k = 0; k < n; ++k) {
      QEMB_ASSIGN_OR_RETURN(uint64_t len, c.get<uint64_t>("string length in " + in_quotes(key)));
      if (len > kGgufMaxStringBytes)
        return c.error("string " + std::to_string(k) + " of " + in_quotes(key) + " claims " + std::to_string(len) +
                       " bytes, over the limit; the file is corrupt");
      QEMB_RETURN_IF_ERROR(c.skip(len, "string " + std::to_string(k) + " of " + in_quotes(key)));
    }
  } else {
    QEMB_RETURN_IF_ERROR(c.skip(n * min_bytes, "array " + in_quotes(key)));
  }
  return v;
}

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// ---- ggml's block types as float ----------------------------------------------
//
// Each function converts whole blocks exactly as ggml's reference
// dequantize_row_<type> (ggml-quants.c): every value is the same float32
// products and sums in the same order, each rounded on its own (the project
// builds with -ffp-contract=off, so no a * b + c is fused). Integers (codes,
// scales) convert to float exactly. Layouts are ggml's block structs; fp16
// fields are little-endian IEEE binary16.

float half_at(const uint8_t* p) { return f16_to_float(static_cast<uint16_t>(p[0] | (p[1] << 8))); }

void f32_to_float(const uint8_t* src, size_t n, float* out) { std::memcpy(out, src, n * sizeof(float)); }
void f16_blocks_to_float(const uint8_t* src, size_t n, float* out) { best_half_kernels().decode_f16(src, n, out); }
void bf16_blocks_to_float(const uint8_t* src, size_t n, float* out) { best_half_kernels().decode_bf16(src, n, out); }

// Q8_0 {f16 d; i8 qs[32]}: d * q.
void q8_0_to_float(const uint8_t* src, size_t blocks, float* out) {
  for (size_t b = 0; b < blocks; ++b, src += 34, out += 32) {
    const float d = half_at(src);
    for (int j = 0; j < 32; ++j) out[j] = static_cast<float>(static_cast<int8_t>(src[2 + j])) * d;
  }
}

// Q4_0 {f16 d; u8 qs[16]}: (nibble - 8) * d; low nibbles are values 0-15,
// high nibbles 16-31.
void q4_0_to_float(const uint8_t* src, size_t blocks, float* out) {
  for (size_t b = 0; b < blocks; ++b, src += 18, out += 32) {
    const float d = half_at(src);
    const uint8_t* qs = src + 2;
    for (int j = 0; j < 16; ++j) {
      out[j] = static_cast<float>((qs[j] & 0x0F) - 8) * d;
      out[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
    }
  }
}

// Q4_1 {f16 d, m; u8 qs[16]}: nibble * d + m.
void q4_1_to_float(const uint8_t* src, size_t blocks, float* out) {
  for (size_t b = 0; b < blocks; ++b, src += 20, out += 32) {
    const float d = half_at(src), m = half_at(src + 2);
    const uint8_t* qs = src + 4;
    for (int j = 0; j < 16; ++j) {
      out[j] = static_cast<float>(qs[j] & 0x0F) * d + m;
      out[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
    }
  }
}

// Q5_0 {f16 d; u8 qh[4]; u8 qs[16]}: value j's fifth bit is bit j of the
// 32-bit qh; (5-bit code - 16) * d.
void q5_0_to_float(const uint8_t* src, size_t blocks, float* out) {
  for (size_t b = 0; b < blocks; ++b, src += 22, out += 32) {
    const float d = half_at(src);
    uint32_t qh;
    std::memcpy(&qh, src + 2, 4);
    const uint8_t* qs = src + 6;
    for (int j = 0; j < 16; ++j) {
      const int hi0 = static_cast<int>((qh >> j) & 1u) << 4, hi1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
      out[j] = static_cast<float>(((qs[j] & 0x0F) | hi0) - 16) * d;
      out[j + 16] = static_cast<float>(((qs[j] >> 4) | hi1) - 16) * d;
    }
  }
}

// Q5_1 {f16 d, m; u8 qh[4]; u8 qs[16]}: 5-bit code * d + m.
void q5_1_to_float(const uint8_t* src, size_t blocks, float* out) {
  for (size_t b = 0; b < blocks; ++b, src += 24, out += 32) {
    const float d = half_at(src), m = half_at(src + 2);
    uint32_t qh;
    std::memcpy(&qh, src + 4, 4);
    const uint8_t* qs = src + 8;
    for (int j = 0; j < 16; ++j) {
      const int hi0 = static_cast<int>((qh >> j) & 1u) << 4, hi1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
      out[j] = static_cast<float>((qs[j] & 0x0F) | hi0) * d + m;
      out[j + 16] = static_cast<float>((qs[j] >> 4) | hi1) * d + m;
    }
  }
}

// The K-quants: 256-value super-blocks of 16- or 32-value sub-blocks.
constexpr size_t kQK = 256;

// Q2_K {u8 scales[16]; u8 qs[64]; f16 d, dmin}: sub-block s of 16 values has
// scale d * (scales[s] & 15) and min dmin * (scales[s] >> 4); value =
// scale * q - min, q the 2-bit code. Each 128-value half uses 32 bytes of qs:
// bit pair k (shift 2k) of byte l holds value 32k + l.
void q2_k_to_float(const uint8_t* src, size_t blocks, float* out) {
  for (size_t b = 0; b < blocks; ++b, src += 84) {
    const uint8_t* scales = src;
    const uint8_t* q = src + 16;
    const float d = half_at(src + 80), dmin = half_at(src + 82);
    int is = 0;
    for (size_t n = 0; n < kQK; n += 128, q += 32) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int part = 0; part < 2; ++part) {
          const uint8_t sc = scales[is++];
          const float dl = d * static_cast<float>(sc & 0x0F), ml = dmin * static_cast<float>(sc >> 4);
          const uint8_t* qp = q + 16 * part;
          for (int l = 0; l < 16; ++l) *out++ = dl * static_cast<float>((qp[l] >> shift) & 3) - ml;
        }
      }
    }
  }
}

// Q3_K {u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d}: sixteen 6-bit
// scales (low 4 bits from the first 8 bytes' nibbles, high 2 bits from the
// last 4 bytes), each minus 32; value = (d * scale) * (q - 4 * (hmask bit
// clear)), q the 2-bit code laid out as in Q2_K, hmask bit k of byte l the
// high bit of value 32k + l.
void q3_k_to_float(const uint8_t* src, size_t blocks, float* out) {
  for (size_t b = 0; b < blocks; ++b, src += 110) {
    const uint8_t* hm = src;
    const uint8_t* q = src + 32;
    const uint8_t* packed = src + 96;
    const float d = half_at(src + 108);
    int scales[16];
    for (int s = 0; s < 16; ++s) {
      const int low = (packed[s % 8] >> (4 * (s / 8))) & 0x0F;
      const int high = (packed[8 + s % 4] >> (2 * (s / 4))) & 3;
      scales[s] = (low | (high << 4)) - 32;
    }
    int is = 0;
    uint8_t m = 1;
    for (size_t n = 0; n < kQK; n += 128, q += 32) {
      for (int shift = 0; shift < 8; shift += 2, m = static_cast<uint8_t>(m << 1)) {
        for (int part = 0; part < 2; ++part) {
          const float dl = d * static_cast<float>(scales[is++]);
          const uint8_t* qp = q + 16 * part;
          const uint8_t* hp = hm + 16 * part;
          for (int l = 0; l < 16; ++l)
            *out++ = dl * static_cast<float>(((qp[l] >> shift) & 3) - ((hp[l] & m) ? 0 : 4));
        }
      }
    }
  }
}

// Q4_K and Q5_K's eight 6-bit (scale, min) pairs in 12 bytes (ggml's
// get_scale_min_k4): pairs 0-3 are the low 6 bits of bytes 0-3 and 4-7;
// pairs 4-7 take their low 4 bits from the nibbles of bytes 8-11 and their
// high 2 bits from the top bits of bytes 0-3 and 4-7.
void k4_scale_min(int j, const uint8_t* q, uint8_t& scale, uint8_t& min) {
  if (j < 4) {
    scale = q[j] & 63;
    min = q[j + 4] & 63;
  } else {
    scale = static_cast<uint8_t>((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4));
    min = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Q4_K {f16 d, dmin; u8 scales[12]; u8 qs[128]}: eight 32-value sub-blocks;
// each 64 values use 32 bytes, low nibbles first; value = (d * scale) * q -
// (dmin * min).
void q4_k_to_float(const uint8_t* src, size_t blocks, float* out) {
  for (size_t b = 0; b < blocks; ++b, src += 144) {
    const float d = half_at(src), dmin = half_at(src + 2);
    const uint8_t* scales = src + 4;
    const uint8_t* q = src + 16;
    for (int is = 0; is < 8; is += 2, q += 32) {
      uint8_t sc, m;
      k4_scale_min(is, scales, sc, m);
      const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
      k4_scale_min(is + 1, scales, sc, m);
      const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l) *out++ = d1 * static_cast<float>(q[l] & 0x0F) - m1;
      for (int l = 0; l < 32; ++l) *out++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
  }
}

// Q5_K {f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}: Q4_K plus a fifth
// bit, bit k of qh[l] for value 32k + l.
void q5_k_to_float(const uint8_t* src, size_t blocks, float* out) {
  for (size_t b = 0; b < blocks; ++b, src += 176) {
    const float d = half_at(src), dmin = half_at(src + 2);
    const uint8_t* scales = src + 4;
    const uint8_t* qh = src + 16;
    const uint8_t* ql = src + 48;
    uint8_t u1 = 1, u2 = 2;
    for (int is = 0; is < 8; is += 2, ql += 32, u1 = static_cast<uint8_t>(u1 << 2), u2 = static_cast<uint8_t>(u2 << 2)) {
      uint8_t sc, m;
      k4_scale_min(is, scales, sc, m);
      const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
      k4_scale_min(is + 1, scales, sc, m);
      const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l) *out++ = d1 * static_cast<float>((ql[l] & 0x0F) + ((qh[l] & u1) ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *out++ = d2 * static_cast<float>((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
    }
  }
}

// Q6_K {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d}: per 128 values, 64
// bytes of low nibbles and 32 of high bit pairs; value = (d * scale) *
// (6-bit code - 32), scale the int8 of its 16-value sub-block.
void q6_k_to_float(const uint8_t* src, size_t blocks, float* out) {
  for (size_t b = 0; b < blocks; ++b, src += 210) {
    const uint8_t* ql = src;
    const uint8_t* qh = src + 128;
    const int8_t* sc = reinterpret_cast<const int8_t*>(src + 192);
    const float d = half_at(src + 208);
    for (size_t n = 0; n < kQK; n += 128, out += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        out[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
        out[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
        out[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
        out[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
      }
    }
  }
}

// IQ4's non-linear 4-bit code book (ggml-common.h's kvalues_iq4nl; the
// fixtures ggml wrote in tests/data/gguf check every entry).
constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// IQ4_NL {f16 d; u8 qs[16]}: d * table[nibble], nibbles as in Q4_0.
void iq4_nl_to_float(const uint8_t* src, size_t blocks, float* out) {
  for (size_t b = 0; b < blocks; ++b, src += 18, out += 32) {
    const float d = half_at(src);
    const uint8_t* qs = src + 2;
    for (int j = 0; j < 16; ++j) {
      out[j] = d * static_cast<float>(kIq4Values[qs[j] & 0x0F]);
      out[j + 16] = d * static_cast<float>(kIq4Values[qs[j] >> 4]);
    }
  }
}

// IQ4_XS {f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128]}: eight 32-value
// sub-blocks, each with a 6-bit scale (low 4 bits: nibble ib of scales_l,
// high 2 bits: bit pair ib of scales_h) minus 32; value = (d * scale) *
// table[nibble], nibbles as in IQ4_NL.
void iq4_xs_to_float(const uint8_t* src, size_t blocks, float* out) {
  for (size_t b = 0; b < blocks; ++b, src += 136) {
    const float d = half_at(src);
    const unsigned scales_h = static_cast<unsigned>(src[2] | (src[3] << 8));
    const uint8_t* scales_l = src + 4;
    const uint8_t* qs = src + 8;
    for (int ib = 0; ib < 8; ++ib, qs += 16, out += 32) {
      const int ls = ((scales_l[ib / 2] >> (4 * (ib % 2))) & 0x0F) | (((scales_h >> (2 * ib)) & 3) << 4);
      const float dl = d * static_cast<float>(ls - 32);
      for (int j = 0; j < 16; ++j) {
        out[j] = dl * static_cast<float>(kIq4Values[qs[j] & 0x0F]);
        out[j + 16] = dl * static_cast<float>(kIq4Values[qs[j] >> 4]);
      }
    }
  }
}

// ggml's types with their block geometry (ggml.c's type traits) and, where
// qemb reads the type, its conversion to float: adding a type is one row and
// its function. Ordered by id, except BF16 listed with the float types (the
// order messages name them in). Types removed from ggml (4, 5, 36-38) are
// unknown.
constexpr GgufTypeInfo kTypes[] = {
    {0, "F32", 1, 4, f32_to_float},
    {1, "F16", 1, 2, f16_blocks_to_float},
    {30, "BF16", 1, 2, bf16_blocks_to_float},
    {8, "Q8_0", 32, 34, q8_0_to_float},
    {2, "Q4_0", 32, 18, q4_0_to_float},
    {3, "Q4_1", 32, 20, q4_1_to_float},
    {6, "Q5_0", 32, 22, q5_0_to_float},
    {7, "Q5_1", 32, 24, q5_1_to_float},
    {9, "Q8_1", 32, 36},
    {10, "Q2_K", 256, 84, q2_k_to_float},
    {11, "Q3_K", 256, 110, q3_k_to_float},
    {12, "Q4_K", 256, 144, q4_k_to_float},
    {13, "Q5_K", 256, 176, q5_k_to_float},
    {14, "Q6_K", 256, 210, q6_k_to_float},
    {15, "Q8_K", 256, 292},
    {16, "IQ2_XXS", 256, 66},
    {17, "IQ2_XS", 256, 74},
    {18, "IQ3_XXS", 256, 98},
    {19, "IQ1_S", 256, 50},
    {20, "IQ4_NL", 32, 18, iq4_nl_to_float},
    {21, "IQ3_S", 256, 110},
    {22, "IQ2_S", 256, 82},
    {23, "IQ4_XS", 256, 136, iq4_xs_to_float},
    {24, "I8", 1, 1},
    {25, "I16", 1, 2},
    {26, "I32", 1, 4},
    {27, "I64", 1, 8},
    {28, "F64", 1, 8},
    {29, "IQ1_M", 256, 56},
    {31, "Q4_0_4_4", 32, 18},
    {32, "Q4_0_4_8", 32, 18},
    {33, "Q4_0_8_8", 32, 18},
    {34, "TQ1_0", 256, 54},
    {35, "TQ2_0", 256, 66},
    {39, "MXFP4", 32, 17},
};

const GgufTypeInfo* type_named(const std::string& name) {
  for (const GgufTypeInfo& t : kTypes)
    if (name == t.name) return &t;
  return nullptr;
}

}  // namespace

const GgufTypeInfo* gguf_type_info(uint32_t id) {
  for (const GgufTypeInfo& t : kTypes)
    if (t.id == id) return &t;
  return nullptr;
}

bool is_gguf_float_readable(const std::string& type_name) {
  const GgufTypeInfo* t = type_named(type_name);
  return t != nullptr && t->to_float != nullptr;
}

const std::string& gguf_readable_types() {
  static const std::string text = [] {
    std::vector<std::string> names;
    for (const GgufTypeInfo& t : kTypes)
      if (t.to_float != nullptr) names.push_back(t.name);
    std::string s;
    for (size_t i = 0; i < names.size(); ++i) s += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
    return s;
  }();
  return text;
}

bool is_gguf_quantized(const std::string& type_name) {
  const GgufTypeInfo* t = type_named(type_name);
  return t != nullptr && t->block_elements > 1;
}

const char* to_string(GgufValue::Type type) {
  static const char* const names[] = {"u8",  "i8",   "u16",    "i16",   "u32", "i32", "f32",
                                      "bool", "string", "array", "u64", "i64", "f64"};
  const auto i = static_cast<uint32_t>(type);
  return i < 13 ? names[i] : "?";
}

Result<GgufFile> GgufFile::open(const std::string& path) {
  QEMB_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> mapped, MappedFile::open(path));
  const uint8_t* data = mapped->data();
  const size_t size = mapped->size();
  return from_memory(data, size, std::move(mapped), path);
}

Result<GgufFile> GgufFile::from_bytes(std::vector<uint8_t> bytes, std::string name) {
  auto owned = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  return from_memory(owned->data(), owned->size(), owned, std::move(name));
}

Result<GgufFile> GgufFile::from_memory(const uint8_t* data, size_t size, std::shared_ptr<const void> keep_alive,
                                       std::string name) {
  GgufFile f;
  f.owner_ = std::move(keep_alive);
  f.data_ = data;
  f.size_ = size;
  f.path_ = std::move(name);
  Cursor c(data, size, f.path_);
  if (size < 4 || std::memcmp(data, "GGUF", 4) != 0)
    return c.error("does not start with the magic \"GGUF\"; not a GGUF file");
  QEMB_RETURN_IF_ERROR(c.skip(4, "magic"));
  QEMB_ASSIGN_OR_RETURN(f.version_, c.get<uint32_t>("version"));
  // A big-endian GGUF (llama.cpp's --bigendian) stores the version, like
  // every number, byte-swapped: 2 and 3 read as 0x02000000 and 0x03000000.
  if (f.version_ == (2u << 24) || f.version_ == (3u << 24))
    return make_error(ErrorCode::kUnsupported,
                      "GGUF file " + in_quotes(f.path_) + " is big-endian (version " +
                          std::to_string(f.version_ >> 24) +
                          " stored byte-swapped); qemb reads little-endian GGUF only (convert it without "
                          "--bigendian)");
  if (f.version_ < 2 || f.version_ > 3)
    return make_error(ErrorCode::kUnsupported,
                      "GGUF file " + in_quotes(f.path_) + " has version " + std::to_string(f.version_) +
                          "; qemb reads GGUF versions 2 and 3 (convert it with a current llama.cpp)");
  QEMB_ASSIGN_OR_RETURN(uint64_t tensor_count, c.get<uint64_t>("tensor count"));
  QEMB_ASSIGN_OR_RETURN(uint64_t kv_count, c.get<uint64_t>("key/value count"));
  // Each pair takes at least 12 bytes (key length, type) and each tensor info
  // at least 24 (name length, rank, type, offset): counts that cannot fit are lies.
  if (kv_count > c.remaining() / 12)
    return c.error("claims " + std::to_string(kv_count) + " key/value pairs, more than its " +
                   std::to_string(c.remaining()) + " remaining bytes can hold; the file is corrupt");
  if (tensor_count > c.remaining() / 24)
    return c.error("claims " + std::to_string(tensor_count) + " tensors, more than its " +
                   std::to_string(c.remaining()) + " remaining bytes can hold; the file is corrupt");

  for (uint64_t k = 0; k < kv_count; ++k) {
    QEMB_ASSIGN_OR_RETURN(std::string key, c.string("key " + std::to_string(k)));
    QEMB_ASSIGN_OR_RETURN(GgufValue v, read_value(c, key));
    if (!f.metadata_.emplace(key, std::move(v)).second)
      return c.error("key " + in_quotes(key) + " appears twice");
  }
  if (auto it = f.metadata_.find("general.alignment"); it != f.metadata_.end()) {
    const GgufValue& a = it->second;
    if (a.type != GgufValue::Type::kU32)
      return c.error("general.alignment has type " + std::string(to_string(a.type)) + "; it must be u32");
    if (a.u == 0 || (a.u & (a.u - 1)) != 0)
      return c.error("general.alignment is " + std::to_string(a.u) + "; it must be a power of two");
    f.alignment_ = static_cast<uint32_t>(a.u);
  }

  for (uint64_t k = 0; k < tensor_count; ++k) {
    GgufTensor t;
    QEMB_ASSIGN_OR_RETURN(t.name, c.string("name of tensor " + std::to_string(k)));
    const std::string what = "tensor " + in_quotes(t.name);
    QEMB_ASSIGN_OR_RETURN(uint32_t rank, c.get<uint32_t>("rank of " + what));
    if (rank == 0 || rank > kGgufMaxDims)
      return c.error(what + " has " + std::to_string(rank) + " dimensions; GGUF tensors have 1 to " +
                     std::to_string(kGgufMaxDims));
    for (uint32_t d = 0; d < rank; ++d) {
      QEMB_ASSIGN_OR_RETURN(uint64_t n, c.get<uint64_t>("dimension of " + what));
      if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return c.error(what + " has dimension " + std::to_string(n) + ", too large");
      t.dims.push_back(static_cast<int64_t>(n));
    }
    t.shape.assign(t.dims.rbegin(), t.dims.rend());
    QEMB_ASSIGN_OR_RETURN(t.type_id, c.get<uint32_t>("type of " + what));
    const GgufTypeInfo* info = gguf_type_info(t.type_id);
    if (info == nullptr)
      return c.error(what + " has ggml type " + std::to_string(t.type_id) +
                     ", which qemb does not know; the file is corrupt or from a newer ggml");
    t.type = info->name;
    QEMB_ASSIGN_OR_RETURN(uint64_t offset, c.get<uint64_t>("offset of " + what));
    const int64_t elements = checked_element_count(t.shape);
    if (elements < 0) return c.error(what + " has " + std::to_string(rank) + " dimensions whose product overflows");
    if (t.dims[0] % info->block_elements != 0)
      return c.error(what + " has " + std::to_string(t.dims[0]) + " values a row, not a multiple of the " +
                     std::to_string(info->block_elements) + "-value blocks of " + info->name);
    const uint64_t blocks = static_cast<uint64_t>(elements) / info->block_elements;
    if (blocks > std::numeric_limits<uint64_t>::max() / info->block_bytes)
      return c.error(what + " is too large");
    if (offset % f.alignment_ != 0)
      return c.error(what + " starts at data offset " + std::to_string(offset) + ", not a multiple of the alignment " +
                     std::to_string(f.alignment_) + "; the file is corrupt");
    t.begin = offset;  // relative until the data region is known
    t.end = blocks * info->block_bytes;  // size, for now
    if (!f.index_.emplace(t.name, f.tensors_.size()).second) return c.error(what + " appears twice");
    f.tensors_.push_back(std::move(t));
  }
  f.data_offset_ = align_up(c.pos(), f.alignment_);
  if (f.data_offset_ > size && !f.tensors_.empty())
    return c.error("the data region would start at byte " + std::to_string(f.data_offset_) + ", past the end of the " +
                   std::to_string(size) + "-byte file; the file is truncated");
  const uint64_t data_size = f.data_offset_ <= size ? size - f.data_offset_ : 0;
  for (GgufTensor& t : f.tensors_) {
    const uint64_t bytes = t.end;
    if (t.begin > data_size || bytes > data_size - t.begin)
      return c.error("tensor " + in_quotes(t.name) + " occupies data bytes [" + std::to_string(t.begin) + ", " +
                     (bytes > std::numeric_limits<uint64_t>::max() - t.begin ? std::string("overflow")
                                                                             : std::to_string(t.begin + bytes)) +
                     "), past the end of the " + std::to_string(data_size) +
                     "-byte data region; the file is truncated or corrupt");
    t.begin += f.data_offset_;
    t.end = t.begin + bytes;
  }
  std::vector<const GgufTensor*> by_offset;
  for (const GgufTensor& t : f.tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensor* a, const GgufTensor* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i]->begin < by_offset[i - 1]->end)
      return c.error("tensors " + in_quotes(by_offset[i - 1]->name) + " and " + in_quotes(by_offset[i]->name) +
                     " overlap");
  return f;
}

const GgufTensor* GgufFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

Status GgufFile::read_rows_float(const GgufTensor& t, int64_t row_begin, int64_t row_end, float* out) const {
  const GgufTypeInfo* info = gguf_type_info(t.type_id);
  if (info == nullptr || info->to_float == nullptr)
    return make_error(ErrorCode::kUnsupported, "tensor " + in_quotes(t.name) + " in " + in_quotes(path_) +
                                                   " has GGUF type " + t.type + "; qemb reads " +
                                                   gguf_readable_types());
  if (t.shape.size() != 2)
    return make_error(ErrorCode::kUnsupported, "tensor " + in_quotes(t.name) + " has " +
                                                   std::to_string(t.shape.size()) +
                                                   " dimensions; reading rows needs a 2-D tensor");
  const int64_t rows = t.shape[0], cols = t.shape[1];
  if (row_begin < 0 || row_begin > row_end || row_end > rows)
    return make_error(ErrorCode::kOutOfRange, "rows [" + std::to_string(row_begin) + ", " + std::to_string(row_end) +
                                                  ") are outside tensor " + in_quotes(t.name) + " with " +
                                                  std::to_string(rows) + " rows");
  // Rows hold whole blocks (checked at parse), so a row range is whole blocks.
  const uint64_t row_blocks = static_cast<uint64_t>(cols) / info->block_elements;
  const uint64_t row_bytes = row_blocks * info->block_bytes;
  if (row_end > row_begin)
    info->to_float(raw(t) + static_cast<uint64_t>(row_begin) * row_bytes,
                   static_cast<size_t>(row_end - row_begin) * static_cast<size_t>(row_blocks), out);
  return Status::Ok();
}

// ---- writing ------------------------------------------------------------------

namespace {
void put_u32(std::vector<uint8_t>& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_u64(std::vector<uint8_t>& b, uint64_t v) {
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_string(std::vector<uint8_t>& b, const std::string& s) {
  put_u64(b, s.size());
  b.insert(b.end(), s.begin(), s.end());
}
}  // namespace

Status write_gguf(const std::string& path, const std::vector<std::pair<std::string, std::string>>& metadata,
                  const std::vector<GgufTensorData>& tensors, uint32_t alignment, uint32_t version) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    return make_error(ErrorCode::kInvalidArgument, "GGUF alignment must be a power of two");
  std::vector<uint8_t> b = {'G', 'G', 'U', 'F'};
  put_u32(b, version);
  put_u64(b, tensors.size());
  put_u64(b, metadata.size() + (alignment != kGgufDefaultAlignment ? 1 : 0));
  for (const auto& [k, v] : metadata) {
    put_string(b, k);
    put_u32(b, static_cast<uint32_t>(GgufValue::Type::kString));
    put_string(b, v);
  }
  if (alignment != kGgufDefaultAlignment) {
    put_string(b, "general.alignment");
    put_u32(b, static_cast<uint32_t>(GgufValue::Type::kU32));
    put_u32(b, alignment);
  }
  uint64_t offset = 0;
  std::vector<uint64_t> offsets;
  for (const GgufTensorData& t : tensors) {
    put_string(b, t.name);
    put_u32(b, static_cast<uint32_t>(t.shape.size()));
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) put_u64(b, static_cast<uint64_t>(*it));
    put_u32(b, t.type_id);
    put_u64(b, offset);
    offsets.push_back(offset);
    offset = align_up(offset + t.bytes.size(), alignment);
  }
  b.resize(align_up(b.size(), alignment), 0);
  const size_t data_start = b.size();
  for (size_t i = 0; i < tensors.size(); ++i) {
    b.resize(data_start + offsets[i], 0);
    b.insert(b.end(), tensors[i].bytes.begin(), tensors[i].bytes.end());
  }
  QEMB_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> w, AtomicFileWriter::create(path));
  QEMB_RETURN_IF_ERROR(w->write(b.data(), b.size()));
  return w->commit();
}

std::vector<uint8_t> gguf_quantize_q8_0(const float* x, size_t count) {
  std::vector<uint8_t> out;
  for (size_t b = 0; b + 32 <= count; b += 32) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b + j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t h = float_to_f16(d);
    out.push_back(static_cast<uint8_t>(h & 0xFF));
    out.push_back(static_cast<uint8_t>(h >> 8));
    for (int j = 0; j < 32; ++j) out.push_back(static_cast<uint8_t>(static_cast<int8_t>(std::round(x[b + j] * id))));
  }
  return out;
}

std::vector<uint8_t> gguf_quantize_q4_0(const float* x, size_t count) {
  std::vector<uint8_t> out;
  for (size_t b = 0; b + 32 <= count; b += 32) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; ++j)
      if (amax < std::fabs(x[b + j])) {
        amax = std::fabs(x[b + j]);
        max = x[b + j];
      }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t h = float_to_f16(d);
    out.push_back(static_cast<uint8_t>(h & 0xFF));
    out.push_back(static_cast<uint8_t>(h >> 8));
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>(x[b + j] * id + 8.5f)));
      const int q1 = std::min(15, static_cast<int>(static_cast<int8_t>(x[b + 16 + j] * id + 8.5f)));
      out.push_back(static_cast<uint8_t>(q0 | (q1 << 4)));
    }
  }
  return out;
}

}  // namespace qemb
