// Token ids from the command line ("1, 2, 3"), a text file, or a .npy array.
// Range checks against the vocabulary happen later, at lookup.
#pragma once

#include <cstdint>
#include <string>
#include <memory>
#include <vector>

#include "qemb/npy.h"
#include "qemb/status.h"

namespace qemb {

// Integers separated by commas and/or whitespace (newlines included); '#'
// starts a comment that runs to the end of the line; negative values and a
// leading '+' are accepted. Empty items (",,", a leading or trailing comma),
// non-numeric text and values outside int64 are kParseError naming the
// 0-based item position and the offending text. Empty text gives no ids.
Result<std::vector<int64_t>> parse_token_list(const std::string& text);

// A .npy file (recognised by its magic bytes; any integer dtype, rank 0 to 2,
// flattened in C order; float/bool dtypes and rank > 2 are kUnsupported),
// else a text file read with parse_token_list. `path` may be a pipe or FIFO
// (process substitution), or "-" for standard input.
Result<std::vector<int64_t>> read_token_file(const std::string& path);

// Ids with the shape they came in: [N] for a text list, the array's own
// shape for a .npy ([] for a 0-d id, [batch, sequence] for a 2-D array), so
// that lookups come out as shape + [dim].
struct TokenBatch {
  std::vector<int64_t> ids;
  std::vector<int64_t> shape;
};
Result<TokenBatch> read_token_batch(const std::string& path);

// The ids of a token file read a piece at a time, so that any number of ids
// needs bounded memory: a regular-file .npy of integers in C order is
// memory-mapped and converted as it is read; anything else (a text list, a
// pipe, standard input, a Fortran-ordered array) is read whole, as
// read_token_batch does.
class TokenStream {
 public:
  static Result<std::unique_ptr<TokenStream>> open(const std::string& path);
  // Ids already in memory.
  static std::unique_ptr<TokenStream> from_batch(TokenBatch batch);
  virtual ~TokenStream() = default;
  size_t size() const { return size_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  // Ids [first, first + count) into out; the error names an id that does not
  // fit int64 by its position in the whole file.
  virtual Status read(size_t first, size_t count, int64_t* out) const = 0;

 protected:
  size_t size_ = 0;
  std::vector<int64_t> shape_;
};

// The ids of an integer .npy array of rank 0 to 2, flattened in C order. `name` appears in
// errors.
Result<std::vector<int64_t>> tokens_from_npy(const NpyArray& array, const std::string& name);

}  // namespace qemb
