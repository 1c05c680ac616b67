#include "qemb/scheme.h"

#include <array>

namespace qemb {

namespace {

struct SchemeRow {
  Scheme scheme;
  const char* name;
  int weight_bits;
  int activation_bits;
};

constexpr SchemeRow kSchemes[] = {
#define QEMB_SCHEME_ROW(id, name, wbits, abits) {Scheme::id, name, wbits, abits},
    QEMB_SCHEMES(QEMB_SCHEME_ROW)
#undef QEMB_SCHEME_ROW
};

constexpr std::array<Scheme, std::size(kSchemes)> kAll = [] {
  std::array<Scheme, std::size(kSchemes)> a{};
  for (size_t i = 0; i < std::size(kSchemes); ++i) a[i] = kSchemes[i].scheme;
  return a;
}();

const SchemeRow& row(Scheme s) { return kSchemes[static_cast<size_t>(s.id())]; }

}  // namespace

const char* Scheme::name() const { return row(*this).name; }
int Scheme::weight_bits() const { return row(*this).weight_bits; }
int Scheme::weight_qmax() const { return (1 << (weight_bits() - 1)) - 1; }
int Scheme::activation_bits() const { return row(*this).activation_bits; }
int32_t Scheme::activation_qmax() const {
  return weight_only() ? 0 : static_cast<int32_t>((int64_t{1} << activation_bits()) - 1);
}
size_t Scheme::packed_row_bytes(int64_t dim) const {
  return (static_cast<size_t>(dim) * static_cast<size_t>(weight_bits()) + 7) / 8;
}
double Scheme::bits_per_value(int64_t dim) const {
  if (dim <= 0) return 0.0;
  return static_cast<double>(packed_row_bytes(dim) * 8 + 32) / static_cast<double>(dim);
}

std::span<const Scheme> all_schemes() { return kAll; }
const char* to_string(Scheme s) { return s.name(); }
int weight_bits(Scheme s) { return s.weight_bits(); }
int weight_qmax(Scheme s) { return s.weight_qmax(); }

std::string scheme_names() {
  std::string out;
  for (const SchemeRow& r : kSchemes) out += (out.empty() ? "" : ", ") + std::string(r.name);
  return out;
}

Result<Scheme> parse_scheme(const std::string& s) {
  for (const SchemeRow& r : kSchemes)
    if (s == r.name) return r.scheme;
  std::string why;
  if (s.find("-g") != std::string::npos || s.find("-asym") != std::string::npos)
    why = " (group-wise scales (-g<B>) and asymmetric rows (-asym) are not served yet: every scheme here is per-row symmetric)";
  return make_error(ErrorCode::kInvalidArgument,
                    "unknown scheme '" + s + "'" + why + ": expected one of " + scheme_names());
}

Result<Scheme> find_scheme(int weight_bits, int activation_bits) {
  for (const SchemeRow& r : kSchemes)
    if (r.weight_bits == weight_bits && r.activation_bits == activation_bits) return r.scheme;
  return make_error(ErrorCode::kInvalidArgument,
                    "no scheme has " + std::to_string(weight_bits) + "-bit weights and " +
                        (activation_bits ? std::to_string(activation_bits) + "-bit activations"
                                         : std::string("float outputs")) +
                        "; the schemes are " + scheme_names());
}

}  // namespace qemb
