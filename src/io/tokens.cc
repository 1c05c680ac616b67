#include "qemb/tokens.h"

#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <limits>
#include <memory>

#include "core/file.h"
#include "qemb/npy.h"

namespace qemb {
namespace {

std::string in_quotes(const std::string& s) { return "'" + s + "'"; }

// Long garbage (a binary file read as text) must not flood the message.
std::string excerpt(const std::string& s) {
  constexpr size_t kMax = 40;
  return s.size() <= kMax ? s : s.substr(0, kMax) + "...";
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

}  // namespace

Result<std::vector<int64_t>> parse_token_list(const std::string& text) {
  std::vector<int64_t> ids;
  const bool multi_line = text.find('\n') != std::string::npos;
  size_t line = 1;
  bool last_was_item = false;  // an empty item is a comma not preceded by an item
  bool pending_comma = false;  // a comma still waiting for its item
  auto where = [&](size_t position) {
    std::string w = "token list item " + std::to_string(position);
    if (multi_line) w += " (line " + std::to_string(line) + ")";
    return w;
  };
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '\n') ++line;
    if (is_space(c)) {
      ++i;
    } else if (c == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (c == ',') {
      if (!last_was_item) {
        return make_error(ErrorCode::kParseError,
                          where(ids.size()) +
                              " is empty (a comma with no number before it); separate ids with one "
                              "comma or with whitespace");
      }
      last_was_item = false;
      pending_comma = true;
      ++i;
    } else {
      const size_t start = i;
      while (i < text.size() && !is_space(text[i]) && text[i] != ',' && text[i] != '#') ++i;
      const std::string item = text.substr(start, i - start);
      const char* first = item.data();
      const char* last = item.data() + item.size();
      if (first != last && *first == '+') ++first;  // from_chars takes '-' but not '+'
      int64_t value = 0;
      auto [end, ec] = std::from_chars(first, last, value);
      if (ec == std::errc::result_out_of_range) {
        return make_error(ErrorCode::kParseError,
                          where(ids.size()) + " " + in_quotes(excerpt(item)) + " does not fit in a 64-bit integer");
      }
      if (ec != std::errc() || end != last || (first != item.data() && first != last && *first == '-')) {
        return make_error(ErrorCode::kParseError, where(ids.size()) + " " + in_quotes(excerpt(item)) +
                                                      " is not an integer; token ids are whole numbers separated "
                                                      "by commas or whitespace");
      }
      ids.push_back(value);
      last_was_item = true;
      pending_comma = false;
    }
  }
  if (pending_comma) {
    return make_error(ErrorCode::kParseError,
                      where(ids.size()) + " is empty (the list ends with a comma); remove the trailing comma");
  }
  return ids;
}

Result<std::vector<int64_t>> tokens_from_npy(const NpyArray& array, const std::string& name) {
  QEMB_ASSIGN_OR_RETURN(NpyDtype dtype, parse_npy_dtype(array.dtype));
  if (dtype.kind != 'i' && dtype.kind != 'u') {
    return make_error(ErrorCode::kUnsupported,
                      "token file " + in_quotes(name) + " holds dtype " + in_quotes(array.dtype) +
                          "; token ids must be integers (save them with arr.astype(numpy.int64))");
  }
  if (array.shape.size() > 2) {  // ids are [N] or [batch, sequence]; more is some other array
    return make_error(ErrorCode::kUnsupported,
                      "token file " + in_quotes(name) + " holds a " + std::to_string(array.shape.size()) +
                          "-D array; token ids must be a 1-D or 2-D array ([N] or [batch, sequence])");
  }
  const std::vector<uint8_t> bytes = npy_c_order_data(array);
  const size_t item = static_cast<size_t>(dtype.item_size);
  const size_t count = bytes.size() / item;
  std::vector<int64_t> ids(count);
  for (size_t i = 0; i < count; ++i) {
    const uint8_t* p = bytes.data() + i * item;
    uint64_t raw = 0;
    for (size_t b = 0; b < item; ++b) {
      const size_t shift = dtype.byte_order == '>' ? (item - 1 - b) : b;
      raw |= static_cast<uint64_t>(p[b]) << (8 * shift);
    }
    if (dtype.kind == 'i') {
      // Sign-extend from the item width.
      const unsigned bits = static_cast<unsigned>(item * 8);
      if (bits < 64 && (raw >> (bits - 1)) & 1u) raw |= ~uint64_t{0} << bits;
      ids[i] = static_cast<int64_t>(raw);
    } else {
      if (raw > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return make_error(ErrorCode::kOutOfRange, "token file " + in_quotes(name) + ": id " + std::to_string(raw) +
                                                      " at position " + std::to_string(i) +
                                                      " does not fit in a 64-bit signed integer");
      }
      ids[i] = static_cast<int64_t>(raw);
    }
  }
  return ids;
}

Result<TokenBatch> read_token_batch(const std::string& path) {
  const std::string name = path == kStdioPath ? "standard input" : path;
  QEMB_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, read_input(path));
  TokenBatch batch;
  if (has_npy_magic(bytes.data(), bytes.size())) {
    QEMB_ASSIGN_OR_RETURN(NpyArray array, parse_npy(bytes.data(), bytes.size(), name));
    QEMB_ASSIGN_OR_RETURN(batch.ids, tokens_from_npy(array, name));
    batch.shape = array.shape;
    return batch;
  }
  const std::string text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  auto ids = parse_token_list(text);
  if (!ids.ok()) {
    return make_error(ids.error().code, "token file " + in_quotes(name) + ": " + ids.error().message);
  }
  batch.ids = std::move(*ids);
  batch.shape = {static_cast<int64_t>(batch.ids.size())};
  return batch;
}

namespace {

class InMemoryTokens : public TokenStream {
 public:
  explicit InMemoryTokens(TokenBatch batch) : ids_(std::move(batch.ids)) {
    size_ = ids_.size();
    shape_ = std::move(batch.shape);
  }
  Status read(size_t first, size_t count, int64_t* out) const override {
    std::copy(ids_.begin() + static_cast<std::ptrdiff_t>(first),
              ids_.begin() + static_cast<std::ptrdiff_t>(first + count), out);
    return Status::Ok();
  }

 private:
  std::vector<int64_t> ids_;
};

// A C-ordered integer .npy read through its mapping, element by element as
// tokens_from_npy converts it.
class MappedNpyTokens : public TokenStream {
 public:
  MappedNpyTokens(std::shared_ptr<const MappedFile> file, const uint8_t* data, NpyDtype dtype,
                  std::vector<int64_t> shape, size_t count)
      : file_(std::move(file)), data_(data), dtype_(dtype) {
    size_ = count;
    shape_ = std::move(shape);
  }
  Status read(size_t first, size_t count, int64_t* out) const override {
    const size_t item = static_cast<size_t>(dtype_.item_size);
    for (size_t i = 0; i < count; ++i) {
      const uint8_t* p = data_ + (first + i) * item;
      uint64_t raw = 0;
      for (size_t b = 0; b < item; ++b) {
        const size_t shift = dtype_.byte_order == '>' ? (item - 1 - b) : b;
        raw |= static_cast<uint64_t>(p[b]) << (8 * shift);
      }
      if (dtype_.kind == 'i') {
        const unsigned bits = static_cast<unsigned>(item * 8);
        if (bits < 64 && (raw >> (bits - 1)) & 1u) raw |= ~uint64_t{0} << bits;
      } else if (raw > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return make_error(ErrorCode::kOutOfRange, "token file " + in_quotes(file_->path()) + ": id " +
                                                      std::to_string(raw) + " at position " +
                                                      std::to_string(first + i) +
                                                      " does not fit in a 64-bit signed integer");
      }
      out[i] = static_cast<int64_t>(raw);
    }
    return Status::Ok();
  }

 private:
  std::shared_ptr<const MappedFile> file_;
  const uint8_t* data_;
  NpyDtype dtype_;
};

}  // namespace

Result<std::unique_ptr<TokenStream>> TokenStream::open(const std::string& path) {
  struct stat st {};
  if (path != kStdioPath && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    QEMB_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> file, MappedFile::open(path));
    if (has_npy_magic(file->data(), file->size())) {
      QEMB_ASSIGN_OR_RETURN(NpyHeader header, parse_npy_header(file->data(), file->size(), path));
      QEMB_ASSIGN_OR_RETURN(NpyDtype dtype, parse_npy_dtype(header.dtype));
      NpyArray shape_only;  // the element count, as an array of that shape counts it
      shape_only.shape = header.shape;
      const size_t count = static_cast<size_t>(shape_only.num_elements());
      const size_t offset = static_cast<size_t>(header.data_offset);
      if ((dtype.kind == 'i' || dtype.kind == 'u') && header.shape.size() <= 2 &&
          (!header.fortran_order || header.shape.size() < 2)) {
        return std::unique_ptr<TokenStream>(
            new MappedNpyTokens(file, file->data() + offset, dtype, header.shape, count));
      }
    }
  }
  QEMB_ASSIGN_OR_RETURN(TokenBatch batch, read_token_batch(path));  // its checks and messages
  return std::unique_ptr<TokenStream>(new InMemoryTokens(std::move(batch)));
}

std::unique_ptr<TokenStream> TokenStream::from_batch(TokenBatch batch) {
  return std::unique_ptr<TokenStream>(new InMemoryTokens(std::move(batch)));
}

Result<std::vector<int64_t>> read_token_file(const std::string& path) {
  QEMB_ASSIGN_OR_RETURN(TokenBatch batch, read_token_batch(path));
  return std::move(batch.ids);
}

}  // namespace qemb
