// The scheme descriptor: what a table stores and what a lookup returns
// (docs/numeric-contract.md, "Schemes"). Every layer asks it — parsing, the
// compiler, lowering, the artifact, the runtime's choice of kernel, eval and
// export — so that no other file compares bit widths, writes a qmax or
// assumes a uint16 output. A scheme is one row of the table below:
//
//   [<A>a]<b>w     b in {8, 4, 2}: per-row symmetric weights, range [-qmax, qmax]
//                  A in {16, 8}: activation-quantized (QNN-style) uint16 / uint8
//                  outputs; no A: weight-only, the lookup returns y = s_r * q
//                  as float (no activation step)
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "qemb/status.h"

namespace qemb {

// The schemes, one row each, in the order `eval --scheme all` lists them
// (16a4w, 16a8w first, as before the others existed):
//   X(enumerator, name, weight bits, activation bits (0: weight-only))
#define QEMB_SCHEMES(X)        \
  X(k16a4w, "16a4w", 4, 16)    \
  X(k16a8w, "16a8w", 8, 16)    \
  X(k16a2w, "16a2w", 2, 16)    \
  X(k8a4w, "8a4w", 4, 8)       \
  X(k8a8w, "8a8w", 8, 8)       \
  X(k8a2w, "8a2w", 2, 8)       \
  X(kW4, "w4", 4, 0)           \
  X(kW8, "w8", 8, 0)           \
  X(kW2, "w2", 2, 0)

class Scheme {
 public:
  enum class Id : uint8_t {
#define QEMB_SCHEME_ID(id, ...) id,
    QEMB_SCHEMES(QEMB_SCHEME_ID)
#undef QEMB_SCHEME_ID
  };
#define QEMB_SCHEME_CONSTANT(id, ...) static const Scheme id;
  QEMB_SCHEMES(QEMB_SCHEME_CONSTANT)
#undef QEMB_SCHEME_CONSTANT

  constexpr Scheme() = default;
  constexpr explicit Scheme(Id id) : id_(id) {}
  constexpr Id id() const { return id_; }

  const char* name() const;            // "16a4w", "w2", ...
  int weight_bits() const;             // 8 | 4 | 2
  int weight_qmax() const;             // 2^(b-1) - 1: 127 | 7 | 1 (range [-qmax, qmax])
  int activation_bits() const;         // 16 | 8, or 0 for weight-only
  bool weight_only() const { return activation_bits() == 0; }
  int32_t activation_qmax() const;     // 2^A - 1: 65535 | 255 (0 for weight-only)
  // Bytes one row of `dim` weights occupies packed: ceil(dim * bits / 8).
  size_t packed_row_bytes(int64_t dim) const;
  // Stored bits per value, the row's float32 scale included: the figure
  // schemes are compared by at equal bytes.
  double bits_per_value(int64_t dim) const;

  friend constexpr bool operator==(Scheme a, Scheme b) { return a.id_ == b.id_; }

 private:
  Id id_ = Id::k16a4w;
};

#define QEMB_SCHEME_DEFINE(id, ...) inline constexpr Scheme Scheme::id{Scheme::Id::id};
QEMB_SCHEMES(QEMB_SCHEME_DEFINE)
#undef QEMB_SCHEME_DEFINE

// Every scheme, in table order.
std::span<const Scheme> all_schemes();
const char* to_string(Scheme s);  // s.name()
// A name from the table; anything else is kInvalidArgument listing them
// (and saying which part of the grammar is not served yet).
Result<Scheme> parse_scheme(const std::string& s);
// The scheme whose weights are `weight_bits` wide and whose outputs are
// `activation_bits` wide (0: float); kInvalidArgument when none is.
Result<Scheme> find_scheme(int weight_bits, int activation_bits);
// "16a8w, 16a4w, ..., w2": for messages.
std::string scheme_names();

int weight_bits(Scheme s);  // s.weight_bits()
int weight_qmax(Scheme s);  // s.weight_qmax()

}  // namespace qemb
