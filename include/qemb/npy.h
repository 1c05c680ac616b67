// NumPy .npy arrays (format versions 1.0, 2.0 and 3.0): token ids in,
// lookup results out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "qemb/status.h"

namespace qemb {

struct NpyArray {
  std::string dtype;  // NumPy descr, e.g. "<i4", "|u1", "<f4"
  std::vector<int64_t> shape;
  bool fortran_order = false;
  std::vector<uint8_t> data;  // exactly num_elements() * item_size() bytes

  int64_t num_elements() const;
  int item_size() const;  // bytes per element, from dtype
};

inline constexpr uint8_t kNpyMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

// True when `size` bytes at `data` start with the .npy magic.
bool has_npy_magic(const uint8_t* data, size_t size);

// Parses a simple descr ("<i4", "|b1", ">f8"): byte order '<' '>' '|' '='
// ('=' means native, i.e. little-endian here), kind one of b i u f c, and the
// item size. Structured or object dtypes are kUnsupported.
struct NpyDtype {
  char byte_order = '<';
  char kind = 'i';
  int item_size = 4;
};
Result<NpyDtype> parse_npy_dtype(const std::string& descr);

Result<NpyArray> read_npy(const std::string& path);
// `name` appears in error messages.
Result<NpyArray> parse_npy(const uint8_t* data, size_t size, const std::string& name = "<memory>");
// The same checks, without copying the data: the array's dtype, shape and
// order with `data` left empty, and where the data starts (data_offset).
Result<NpyArray> parse_npy_header(const uint8_t* data, size_t size, const std::string& name, size_t& data_offset);

// The array's elements in C (row-major) order; a Fortran-ordered array is
// transposed, others are returned as they are.
std::vector<uint8_t> npy_c_order_data(const NpyArray& array);

// Writers (atomic: temp file then rename). Version 1.0 headers unless the
// header does not fit, then 2.0; header padded to a 64-byte boundary.
Status write_npy(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape,
                 const std::vector<uint8_t>& bytes);
Status write_npy(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape,
                 const void* bytes, size_t byte_count);
Status write_npy_u16(const std::string& path, const uint16_t* data, int64_t rows, int64_t cols);
Status write_npy_f32(const std::string& path, const float* data, int64_t rows, int64_t cols);

class AtomicFileWriter;
// A .npy written as it is produced: the header first, then the data in any
// number of pieces, so an output of any size needs bounded memory. finish()
// checks that exactly the shape's bytes came and publishes the file; a writer
// destroyed before that leaves nothing (a stream keeps what it was sent).
class NpyWriter {
 public:
  // `path` as for AtomicFileWriter ("-" is standard output).
  static Result<std::unique_ptr<NpyWriter>> create(const std::string& path, const std::string& descr,
                                                   const std::vector<int64_t>& shape);
  ~NpyWriter();
  Status write(const void* bytes, size_t size);
  Status finish();

 private:
  NpyWriter() = default;
  std::unique_ptr<AtomicFileWriter> out_;
  std::string path_;
  uint64_t expected_ = 0, written_ = 0;
};

// Serialized form, as write_npy would write it.
Result<std::vector<uint8_t>> encode_npy(const std::string& descr, const std::vector<int64_t>& shape, const void* bytes,
                                        size_t byte_count);

}  // namespace qemb
