// The Python extension qemb._qemb: a thin layer over the public C++ API.
// It converts arguments, releases the GIL around the library's work, and
// turns a failed Status into the qemb exception for its ErrorCode carrying
// the library's message unchanged. The numerics all live in the library.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "qemb/checkpoint.h"
#include "qemb/compiler.h"
#include "qemb/embedding_bag.h"
#include "qemb/eval.h"
#include "qemb/inspect.h"
#include "qemb/runtime.h"
#include "qemb/tokens.h"
#include "qemb/version.h"

namespace py = pybind11;

namespace qemb::python {
namespace {

constexpr int kNumCodes = static_cast<int>(ErrorCode::kInternal) + 1;
// Exception classes by ErrorCode; owned by the module (leaked on purpose:
// they live as long as the interpreter).
PyObject* g_error_classes[kNumCodes] = {};
PyObject* g_error_base = nullptr;

[[noreturn]] void throw_error(const Error& e) {
  const int code = static_cast<int>(e.code);
  PyObject* cls = code > 0 && code < kNumCodes && g_error_classes[code] ? g_error_classes[code] : g_error_base;
  PyErr_SetString(cls, e.message.c_str());
  throw py::error_already_set();
}
[[noreturn]] void throw_error(ErrorCode code, std::string message) { throw_error(Error(code, std::move(message))); }
void check(const Status& s) {
  if (!s.ok()) throw_error(s.error());
}
template <typename T>
T take(Result<T> r) {
  if (!r.ok()) throw_error(r.error());
  return std::move(r).value();
}

// Text from a file (a section or tensor name) may hold bytes that are not
// UTF-8: they become U+FFFD, as the CLI prints them, instead of nlohmann's
// bare exception.
template <typename Json>
py::object json_to_py(const Json& j) {
  static py::handle loads = py::object(py::module_::import("json").attr("loads")).release();
  std::string text;
  try {
    text = j.dump(-1, ' ', false, Json::error_handler_t::replace);
  } catch (const std::exception& e) {
    throw_error(ErrorCode::kInternal, std::string("cannot describe the artifact as JSON: ") + e.what());
  }
  return loads(text);
}

py::handle numpy() {
  static py::handle np = py::module_::import("numpy").release();
  return np;
}

std::string fspath(const py::handle& path) {
  static py::handle os_fspath = py::object(py::module_::import("os").attr("fspath")).release();
  py::object p = os_fspath(path);
  if (!py::isinstance<py::str>(p)) throw_error(ErrorCode::kInvalidArgument, "paths must be str or os.PathLike of str");
  return p.cast<std::string>();
}

bool is_path(const py::handle& obj) {
  static py::handle pathlike = py::object(py::module_::import("os").attr("PathLike")).release();
  return py::isinstance<py::str>(obj) || py::isinstance(obj, pathlike);
}

std::string dtype_name(const py::dtype& dt) {
  return py::reinterpret_steal<py::str>(PyObject_Str(dt.ptr())).cast<std::string>();
}

bool native_order(const py::dtype& dt) {
  const char order = dt.byteorder();
  return order == '=' || order == '|' || order == '<';  // the library is little-endian only
}


// ---- ids ------------------------------------------------------------------

// Token ids as the runtime reads them: int32 or int64, C-contiguous, native
// byte order. Such an array is used in place; anything else is converted.
struct Ids {
  py::array array;
  bool is32 = false;
  std::vector<py::ssize_t> shape;
  size_t count = 0;
  const void* data = nullptr;
};

// numpy's own structs, read directly: the fast path of a lookup creates no
// Python objects for its checks.
const py::detail::PyArray_Proxy* array_of(const py::handle& a) { return py::detail::array_proxy(a.ptr()); }
const py::detail::PyArrayDescr_Proxy* descr_of(const py::handle& a) {
  return py::detail::array_descriptor_proxy(array_of(a)->descr);
}
bool native_order(char order) { return order == '=' || order == '|' || order == '<'; }
constexpr int kCContiguous = py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_;
constexpr int kWriteable = py::detail::npy_api::NPY_ARRAY_WRITEABLE_;

Ids as_ids(const py::handle& obj, const char* what = "ids") {
  Ids ids;
  const bool given_array = py::isinstance<py::array>(obj);
  if (given_array) {
    const auto* a = array_of(obj);
    const auto* d = descr_of(obj);
    if (d->kind == 'i' && (d->elsize == 4 || d->elsize == 8) && native_order(d->byteorder) &&
        (a->flags & kCContiguous)) {  // read in place
      ids.array = py::reinterpret_borrow<py::array>(obj);
      ids.is32 = d->elsize == 4;
      ids.shape.reserve(a->nd + 1);
      ids.shape.assign(a->dimensions, a->dimensions + a->nd);
      ids.count = 1;
      for (int i = 0; i < a->nd; ++i) ids.count *= static_cast<size_t>(a->dimensions[i]);
      ids.data = a->data;
      return ids;
    }
  }
  py::array a = given_array ? py::reinterpret_borrow<py::array>(obj) : py::array(numpy().attr("asarray")(obj));
  py::dtype dt = a.dtype();
  const char kind = dt.kind();
  const auto itemsize = dt.itemsize();
  if (!given_array && a.size() == 0) {  // [] is an empty list of ids, not of floats
    a = numpy().attr("empty")(a.attr("shape"), "int64");
  } else if (kind != 'i' && kind != 'u') {
    throw_error(ErrorCode::kInvalidArgument,
                std::string(what) + " must be integers (int32 or int64); got " + dtype_name(dt));
  } else if (kind == 'u' && itemsize == 8) {
    throw_error(ErrorCode::kInvalidArgument,
                std::string(what) + " of dtype uint64 may not fit int64; pass int64 or int32 " + what);
  }
  dt = a.dtype();
  const bool in_place = dt.kind() == 'i' && (dt.itemsize() == 4 || dt.itemsize() == 8) && native_order(dt) &&
                        (a.flags() & py::array::c_style);
  if (!in_place) {
    const char* want = dt.kind() == 'i' && dt.itemsize() == 4 ? "int32" : "int64";
    a = numpy().attr("ascontiguousarray")(a, want);
    dt = a.dtype();
  }
  ids.is32 = dt.itemsize() == 4;
  ids.shape.assign(a.shape(), a.shape() + a.ndim());
  ids.count = static_cast<size_t>(a.size());
  ids.data = a.data();
  ids.array = std::move(a);
  return ids;
}

std::string shape_text(const std::vector<py::ssize_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

IntSpan int_span(const Ids& ids) {
  if (ids.is32) return std::span<const int32_t>(static_cast<const int32_t*>(ids.data), ids.count);
  return std::span<const int64_t>(static_cast<const int64_t*>(ids.data), ids.count);
}

// ---- the runtime ----------------------------------------------------------

Verify parse_verify(const std::string& s) {
  if (s == "full") return Verify::kFull;
  if (s == "header") return Verify::kHeader;
  throw_error(ErrorCode::kInvalidArgument, "unknown verify '" + s + "': expected full or header");
}

// Lookups of fewer values than this keep the GIL: they take less time than
// handing it over and back, and the Python call around them holds it anyway.
constexpr size_t kKeepGilValues = 4096;

class Runtime {
 public:
  Runtime(const py::object& path, int threads, const std::string& verify, bool reference) : path_(fspath(path)) {
    if (threads < 0)
      throw_error(ErrorCode::kInvalidArgument,
            "threads is " + std::to_string(threads) + ": expected 0 (one per core) or more");
    RuntimeOptions o;
    o.verify = parse_verify(verify);
    o.threads = threads;
    o.reference = reference;
    Result<std::unique_ptr<EmbeddingRuntime>> r = Error();
    {
      py::gil_scoped_release release;
      r = EmbeddingRuntime::load(path_, o);
    }
    rt_ = take(std::move(r));
  }

  // The table a lookup reads: `name`, or the only one (an artifact of
  // several needs table=, and the error lists them).
  const EmbeddingTable& table_named(const std::optional<std::string>& name) const {
    if (name) return *take(rt_->find_table(*name));
    if (rt_->table_count() == 1) return rt_->table(0);
    throw_error(several_tables_error(*rt_, "pass table=NAME (see Runtime.tables)"));
  }

  template <typename T>
  py::array lookup(const py::handle& ids_obj, const py::object& out_obj,
                   const std::optional<std::string>& table = std::nullopt) const {
    const EmbeddingTable& t = table_named(table);
    Ids ids = as_ids(ids_obj);
    std::vector<py::ssize_t>& shape = ids.shape;  // becomes the output's: ids.shape + (dim,)
    shape.push_back(static_cast<py::ssize_t>(t.dim()));
    py::array out = out_obj.is_none() ? py::array(py::array_t<T>(shape)) : checked_out<T>(out_obj, shape);
    T* dst = static_cast<T*>(out.mutable_data());
    Status s;
    if (ids.count * static_cast<size_t>(t.dim()) < kKeepGilValues) {
      s = run<T>(t, ids, dst);
    } else {
      py::gil_scoped_release release;
      s = run<T>(t, ids, dst);
    }
    check(s);
    return out;
  }
  // The table's own output: uint16 or uint8 activations, or a weight-only
  // table's float32 rows.
  py::array lookup_native(const py::handle& ids_obj, const py::object& out_obj,
                          const std::optional<std::string>& table) const {
    switch (table_named(table).activation_bits()) {
      case 8: return lookup<uint8_t>(ids_obj, out_obj, table);
      case 0: return lookup<float>(ids_obj, out_obj, table);
      default: return lookup<uint16_t>(ids_obj, out_obj, table);
    }
  }

  // Dequantized rows in `dtype_name` ("f32", "f16" or "bf16"): float32,
  // numpy.float16, or for bfloat16 (which NumPy lacks) uint16 bit patterns.
  py::array lookup_dequantized(const py::handle& ids_obj, const py::object& out_obj,
                               const std::string& dtype_name, const std::optional<std::string>& table) const {
    const FloatDtype dtype = take(parse_float_dtype(dtype_name));
    if (dtype == FloatDtype::kF32) return lookup<float>(ids_obj, out_obj, table);
    const EmbeddingTable& t = table_named(table);
    const bool f16 = dtype == FloatDtype::kF16;
    const py::dtype want = f16 ? py::dtype("float16") : py::dtype::of<uint16_t>();
    Ids ids = as_ids(ids_obj);
    std::vector<py::ssize_t>& shape = ids.shape;
    shape.push_back(static_cast<py::ssize_t>(t.dim()));
    py::array out = out_obj.is_none() ? py::array(want, shape)
                                      : checked_out_as(out_obj, shape, want, f16 ? "float16" : "uint16 (bfloat16 bits)");
    void* dst = out.mutable_data();
    auto run_half = [&] {
      if (ids.is32)
        return t.lookup_dequantized(std::span<const int32_t>(static_cast<const int32_t*>(ids.data), ids.count),
                                    dtype, dst);
      return t.lookup_dequantized(std::span<const int64_t>(static_cast<const int64_t*>(ids.data), ids.count),
                                  dtype, dst);
    };
    Status s;
    if (ids.count * static_cast<size_t>(t.dim()) < kKeepGilValues) {
      s = run_half();
    } else {
      py::gil_scoped_release release;
      s = run_half();
    }
    check(s);
    return out;
  }

  // Seconds for `repeats` back-to-back C++ calls on the same buffers, with
  // no Python in between: the baseline bench/python_overhead.py compares with.
  double time_cpp_lookup(const py::handle& ids_obj, const py::object& out_obj, int repeats) const {
    const EmbeddingTable& t = table_named(std::nullopt);
    const Ids ids = as_ids(ids_obj);
    std::vector<py::ssize_t> shape = ids.shape;
    shape.push_back(static_cast<py::ssize_t>(t.dim()));
    py::array out = checked_out<uint16_t>(out_obj, shape);
    uint16_t* dst = static_cast<uint16_t*>(out.mutable_data());
    py::gil_scoped_release release;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < repeats; ++i) {
      Status s = run<uint16_t>(t, ids, dst);
      if (!s.ok()) break;
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  py::object describe() const { return json_to_py(describe_artifact(*rt_)); }
  const EmbeddingRuntime& runtime() const { return *rt_; }
  std::string bag_kernel() const { return bag_kernel_name(*rt_); }
  py::list tables() const {
    py::list out;
    for (size_t i = 0; i < rt_->table_count(); ++i) {
      const EmbeddingTable& t = rt_->table(i);
      py::dict d;
      d["name"] = t.name();
      d["vocab_size"] = t.vocab_size();
      d["dim"] = t.dim();
      out.append(d);
    }
    return out;
  }
  int64_t vocab_size() const { return rt_->vocab_size(); }
  int64_t dim() const { return rt_->dim(); }
  py::tuple activation() const { return py::make_tuple(rt_->activation().scale, rt_->activation().offset()); }
  int activation_bits() const { return rt_->activation_bits(); }
  const std::string& kernel() const { return rt_->kernel_name(); }
  const std::string& isa() const { return rt_->isa(); }
  int threads() const { return rt_->threads(); }
  const std::string& path() const { return path_; }

 private:
  template <typename T>
  static Status run(const EmbeddingTable& t, const Ids& ids, T* dst) {
    if (ids.is32) {
      std::span<const int32_t> span(static_cast<const int32_t*>(ids.data), ids.count);
      if constexpr (std::is_same_v<T, float>) return t.lookup_dequantized(span, dst);
      else return t.lookup(span, dst);
    }
    std::span<const int64_t> span(static_cast<const int64_t*>(ids.data), ids.count);
    if constexpr (std::is_same_v<T, float>) return t.lookup_dequantized(span, dst);
    else return t.lookup(span, dst);
  }

  // `out=` is written in place, so it must be exactly what the lookup writes.
  template <typename T>
  static py::array checked_out(const py::object& obj, const std::vector<py::ssize_t>& shape) {
    return checked_out_as(obj, shape, py::dtype::of<T>(),
                          std::is_same_v<T, uint16_t> ? "uint16" : std::is_same_v<T, uint8_t> ? "uint8" : "float32");
  }
  static py::array checked_out_as(const py::object& obj, const std::vector<py::ssize_t>& shape,
                                  const py::dtype& want_dtype, const char* want) {
    if (!py::isinstance<py::array>(obj))
      throw_error(ErrorCode::kInvalidArgument,
            std::string("out must be a numpy.ndarray of ") + want + "; got " +
                py::type::handle_of(obj).attr("__name__").cast<std::string>());
    py::array out = py::reinterpret_borrow<py::array>(obj);
    const auto* a = array_of(out);
    const auto* d = descr_of(out);
    const bool fits = d->kind == want_dtype.kind() && d->elsize == want_dtype.itemsize() &&
                      native_order(d->byteorder) && a->nd == static_cast<int>(shape.size()) &&
                      std::equal(shape.begin(), shape.end(), a->dimensions) &&
                      (a->flags & kCContiguous) && (a->flags & kWriteable);
    if (fits) return out;
    // What is wrong, in the order a user fixes it.
    if (!out.dtype().equal(want_dtype))  // equal types of the same byte order
      throw_error(ErrorCode::kInvalidArgument,
            "out has dtype " + dtype_name(out.dtype()) + "; this lookup writes " + want);
    std::vector<py::ssize_t> got(out.shape(), out.shape() + out.ndim());
    if (got != shape)
      throw_error(ErrorCode::kInvalidArgument,
            "out has shape " + shape_text(got) + "; ids of shape " +
                shape_text(std::vector<py::ssize_t>(shape.begin(), shape.end() - 1)) + " need " + shape_text(shape));
    if (!(out.flags() & py::array::c_style))
      throw_error(ErrorCode::kInvalidArgument, "out is not C-contiguous; pass a contiguous array (numpy.empty(shape, dtype))");
    if (!out.writeable()) throw_error(ErrorCode::kInvalidArgument, "out is read-only; pass a writable array");
    return out;
  }

  std::string path_;
  std::unique_ptr<EmbeddingRuntime> rt_;
};


// ---- pooled lookups (EmbeddingBag) ---------------------------------------------

// One table's share of a pooled call, with the arrays it reads kept alive.
struct BagSpec {
  Ids ids, bounds;
  py::array weights;
  std::vector<int64_t> fixed_lengths;  // 2-D ids: B bags of one row each
  TableBags bags;
};

void fill_bag_spec(BagSpec& spec, const Runtime& rt, const std::string& label, const py::handle& ids,
                   const py::object& offsets, bool include_last_offset, const py::object& lengths,
                   const py::object& per_sample_weights, const std::string& mode,
                   const std::optional<int64_t>& padding_idx, const std::optional<std::string>& table) {
  const std::string where = label.empty() ? "" : label + ": ";
  auto fail = [&](const std::string& message) { throw_error(ErrorCode::kInvalidArgument, where + message); };
  spec.bags.table = &rt.runtime();
  if (table) {
    Result<const EmbeddingTable*> found = rt.runtime().find_table(*table);
    if (!found.ok()) throw_error(found.error().code, where + found.error().message);
    spec.bags.embedding_table = *found;
  } else if (rt.runtime().table_count() > 1) {
    throw_error(ErrorCode::kInvalidArgument,
                where + several_tables_error(rt.runtime(), "pass table=NAME (see Runtime.tables)").message);
  }
  spec.ids = as_ids(ids);
  spec.bags.indices = int_span(spec.ids);
  const size_t ndim = spec.ids.shape.size();
  if (!offsets.is_none() && !lengths.is_none()) fail("give offsets= or lengths=, not both");
  if (include_last_offset && offsets.is_none())
    fail("include_last_offset=True describes offsets=; " +
         std::string(lengths.is_none() ? "give offsets" : "lengths take no last offset"));
  if (ndim == 2) {
    if (!offsets.is_none() || !lengths.is_none())
      fail("2-D ids are bags of fixed length, one per row; offsets= and lengths= are for 1-D ids");
    spec.fixed_lengths.assign(static_cast<size_t>(spec.ids.shape[0]), spec.ids.shape[1]);
    spec.bags.boundaries = std::span<const int64_t>(spec.fixed_lengths);
    spec.bags.kind = BagBoundaries::kLengths;
  } else if (ndim == 1) {
    if (offsets.is_none() && lengths.is_none())
      fail("1-D ids need offsets= or lengths= to split them into bags (or pass 2-D ids, one bag per row)");
    const bool given_offsets = !offsets.is_none();
    const char* what = given_offsets ? "offsets" : "lengths";
    spec.bounds = as_ids(given_offsets ? offsets : lengths, what);
    if (spec.bounds.shape.size() != 1)
      fail(std::string(what) + " must be 1-D; got shape " + shape_text(spec.bounds.shape));
    spec.bags.boundaries = int_span(spec.bounds);
    spec.bags.kind = !given_offsets          ? BagBoundaries::kLengths
                     : include_last_offset ? BagBoundaries::kOffsetsWithLast
                                           : BagBoundaries::kOffsets;
  } else {
    fail("ids must be 1-D (with offsets= or lengths=) or 2-D (one bag per row); got shape " +
         shape_text(spec.ids.shape));
  }
  if (!per_sample_weights.is_none()) {
    py::array w = py::isinstance<py::array>(per_sample_weights)
                      ? py::reinterpret_borrow<py::array>(per_sample_weights)
                      : py::array(numpy().attr("asarray")(per_sample_weights));
    if (w.dtype().kind() != 'f')
      fail("per_sample_weights must be floating point (float32); got " + dtype_name(w.dtype()));
    if (!(w.dtype().kind() == 'f' && w.dtype().itemsize() == 4 && native_order(w.dtype()) &&
          (w.flags() & py::array::c_style)))
      w = numpy().attr("ascontiguousarray")(w, "float32");
    std::vector<py::ssize_t> shape(w.shape(), w.shape() + w.ndim());
    if (shape != spec.ids.shape)
      fail("per_sample_weights has shape " + shape_text(shape) + "; it needs the shape of ids, " +
           shape_text(spec.ids.shape));
    spec.weights = w;
    spec.bags.per_sample_weights = std::span<const float>(static_cast<const float*>(w.data()), spec.ids.count);
  }
  spec.bags.mode = take(parse_pool_mode(mode));
  spec.bags.padding_idx = padding_idx;
  spec.bags.name = table.value_or("");
}

BagOutputType bag_output_type(const std::string& name) {
  switch (take(parse_float_dtype(name))) {
    case FloatDtype::kF16: return BagOutputType::kFloat16;
    case FloatDtype::kBF16: return BagOutputType::kBFloat16;
    default: return BagOutputType::kFloat32;
  }
}

// Pools the specs into a new [B, sum D] array of `dtype`, or into `out`.
py::array pool_specs(std::vector<BagSpec>& specs, const std::string& dtype, const py::object& out_obj) {
  const BagOutputType type = bag_output_type(dtype);
  std::vector<TableBags> tables;
  tables.reserve(specs.size());
  size_t total_dim = 0, total_values = 0;
  for (const BagSpec& s : specs) {
    tables.push_back(s.bags);
    const auto dim = static_cast<size_t>(bag_table(s.bags)->dim());
    total_dim += dim;
    total_values += s.ids.count * dim;
  }
  size_t batch = 0;
  if (!tables.empty()) {
    Result<size_t> b = bag_count(tables[0]);
    if (!b.ok()) check(embedding_bags(tables, nullptr));  // raises the library's error, naming the table
    batch = b.ok() ? *b : 0;
  }
  const std::vector<py::ssize_t> shape{static_cast<py::ssize_t>(batch), static_cast<py::ssize_t>(total_dim)};
  const char* np_dtype = type == BagOutputType::kFloat32 ? "float32"
                         : type == BagOutputType::kFloat16 ? "float16"
                                                           : "uint16";
  py::array out;
  if (out_obj.is_none()) {
    out = numpy().attr("empty")(py::make_tuple(shape[0], shape[1]), np_dtype);
  } else {
    if (!py::isinstance<py::array>(out_obj))
      throw_error(ErrorCode::kInvalidArgument,
                  std::string("out must be a numpy.ndarray of ") + np_dtype + "; got " +
                      py::type::handle_of(out_obj).attr("__name__").cast<std::string>());
    out = py::reinterpret_borrow<py::array>(out_obj);
    if (!out.dtype().equal(py::dtype(np_dtype)))
      throw_error(ErrorCode::kInvalidArgument,
                  "out has dtype " + dtype_name(out.dtype()) + "; this call writes " + np_dtype);
    std::vector<py::ssize_t> got(out.shape(), out.shape() + out.ndim());
    if (got != shape)
      throw_error(ErrorCode::kInvalidArgument,
                  "out has shape " + shape_text(got) + "; " + std::to_string(batch) + " bags of " +
                      std::to_string(total_dim) + " columns need " + shape_text(shape));
    if (!(out.flags() & py::array::c_style))
      throw_error(ErrorCode::kInvalidArgument,
                  "out is not C-contiguous; pass a contiguous array (numpy.empty(shape, dtype))");
    if (!out.writeable()) throw_error(ErrorCode::kInvalidArgument, "out is read-only; pass a writable array");
  }
  void* dst = out.mutable_data();
  auto call = [&]() -> Status {
    if (type == BagOutputType::kFloat32) return embedding_bags(tables, static_cast<float*>(dst));
    return embedding_bags(tables, type, static_cast<uint16_t*>(dst));
  };
  Status s;
  if (total_values < kKeepGilValues) {
    s = call();
  } else {
    py::gil_scoped_release release;
    s = call();
  }
  check(s);
  return out;
}

py::array runtime_embedding_bag(const Runtime& rt, const py::handle& ids, const py::object& offsets,
                                bool include_last_offset, const py::object& lengths,
                                const py::object& per_sample_weights, const std::string& mode,
                                const std::optional<int64_t>& padding_idx, const std::optional<std::string>& table,
                                const std::string& dtype, const py::object& out) {
  std::vector<BagSpec> specs(1);
  fill_bag_spec(specs[0], rt, "", ids, offsets, include_last_offset, lengths, per_sample_weights, mode,
                padding_idx, table);
  return pool_specs(specs, dtype, out);
}

// qemb.embedding_bags([{"runtime": rt, "ids": ..., "offsets": ...}, ...]).
py::array embedding_bags_of(const py::list& tables, const std::string& dtype, const py::object& out) {
  static const char* const kKeys[] = {"runtime", "table", "ids", "offsets", "include_last_offset", "lengths",
                                      "per_sample_weights", "mode", "padding_idx", "name"};
  if (tables.size() == 0) throw_error(ErrorCode::kInvalidArgument, "no tables to pool");
  std::vector<BagSpec> specs(tables.size());
  for (size_t t = 0; t < tables.size(); ++t) {
    const std::string at = "tables[" + std::to_string(t) + "]";
    if (!py::isinstance<py::dict>(tables[t]))
      throw_error(ErrorCode::kInvalidArgument,
                  at + " is a " + py::type::handle_of(tables[t]).attr("__name__").cast<std::string>() +
                      "; each table is a dict with runtime, ids and offsets or lengths");
    py::dict d = tables[t].cast<py::dict>();
    for (auto item : d) {
      const std::string key = py::str(item.first).cast<std::string>();
      if (std::none_of(std::begin(kKeys), std::end(kKeys), [&](const char* k) { return key == k; }))
        throw_error(ErrorCode::kInvalidArgument,
                    at + " has an unknown key '" + key +
                        "'; the keys are runtime, table, ids, offsets, include_last_offset, lengths, "
                        "per_sample_weights, mode, padding_idx, name");
    }
    auto get = [&](const char* key) { return d.contains(key) ? py::object(d[key]) : py::object(py::none()); };
    py::object rt = get("runtime");
    if (!py::isinstance<Runtime>(rt))
      throw_error(ErrorCode::kInvalidArgument, at + "['runtime'] must be a qemb.Runtime");
    if (!d.contains("ids")) throw_error(ErrorCode::kInvalidArgument, at + " has no 'ids'");
    const py::object mode = get("mode"), pad = get("padding_idx"), ilo = get("include_last_offset"),
                     table = get("table");
    // Messages name the table by `name`, else by the artifact's table name.
    const py::object name = get("name").is_none() ? table : get("name");
    std::string label = name.is_none() ? "table " + std::to_string(t) : "table " + std::to_string(t) + " ('" +
                                                                            py::str(name).cast<std::string>() + "')";
    fill_bag_spec(specs[t], rt.cast<const Runtime&>(), label, d["ids"], get("offsets"),
                  ilo.is_none() ? false : ilo.cast<bool>(), get("lengths"), get("per_sample_weights"),
                  mode.is_none() ? "sum" : mode.cast<std::string>(),
                  pad.is_none() ? std::nullopt : std::optional<int64_t>(pad.cast<int64_t>()),
                  table.is_none() ? std::nullopt : std::optional<std::string>(py::str(table).cast<std::string>()));
    specs[t].bags.name = name.is_none() ? "" : py::str(name).cast<std::string>();
  }
  return pool_specs(specs, dtype, out);
}

// Runtime.embedding_bags_flat: the TBE / KeyedJaggedTensor form.
py::array runtime_embedding_bags_flat(const Runtime& rt, const py::handle& indices, const py::handle& offsets,
                                      const py::object& feature_tables, const py::object& per_sample_weights,
                                      const std::string& mode, const std::optional<int64_t>& padding_idx,
                                      const std::string& dtype, const py::object& out_obj) {
  const EmbeddingRuntime& runtime = rt.runtime();
  FlatBags flat;
  flat.runtime = &runtime;
  std::vector<int32_t> features;
  if (!feature_tables.is_none()) {
    if (py::isinstance<py::str>(feature_tables))
      throw_error(ErrorCode::kInvalidArgument,
                  "feature_tables is one string; pass a list with one table name (or index) per feature");
    size_t f = 0;
    for (py::handle item : py::iter(feature_tables)) {
      if (py::isinstance<py::str>(item)) {
        const std::string name = item.cast<std::string>();
        Result<const EmbeddingTable*> found = runtime.find_table(name);
        if (!found.ok())
          throw_error(found.error().code, "feature_tables[" + std::to_string(f) + "]: " + found.error().message);
        for (size_t t = 0; t < runtime.table_count(); ++t)
          if (&runtime.table(t) == *found) features.push_back(static_cast<int32_t>(t));
      } else if (py::isinstance<py::int_>(item) && !py::isinstance<py::bool_>(item)) {
        const int64_t t = item.cast<int64_t>();
        features.push_back(t < INT32_MIN || t > INT32_MAX ? -1 : static_cast<int32_t>(t));
      } else {
        throw_error(ErrorCode::kInvalidArgument,
                    "feature_tables[" + std::to_string(f) + "] is a " +
                        py::type::handle_of(item).attr("__name__").cast<std::string>() +
                        "; give a table name (str) or index (int)");
      }
      ++f;
    }
    if (features.empty()) throw_error(ErrorCode::kInvalidArgument, "feature_tables is empty: give one table per feature");
    flat.feature_tables = features;
  }
  const Ids ids = as_ids(indices, "indices"), offs = as_ids(offsets, "offsets");
  if (ids.shape.size() != 1) throw_error(ErrorCode::kInvalidArgument, "indices must be 1-D; got shape " + shape_text(ids.shape));
  if (offs.shape.size() != 1)
    throw_error(ErrorCode::kInvalidArgument, "offsets must be 1-D; got shape " + shape_text(offs.shape));
  flat.indices = int_span(ids);
  flat.offsets = int_span(offs);
  py::array weights;
  if (!per_sample_weights.is_none()) {
    weights = numpy().attr("ascontiguousarray")(per_sample_weights, "float32");
    if (weights.ndim() != 1 || static_cast<size_t>(weights.size()) != ids.count)
      throw_error(ErrorCode::kInvalidArgument,
                  "per_sample_weights has shape " +
                      shape_text(std::vector<py::ssize_t>(weights.shape(), weights.shape() + weights.ndim())) +
                      "; it needs the shape of indices, " + shape_text(ids.shape));
    flat.per_sample_weights = std::span<const float>(static_cast<const float*>(weights.data()), ids.count);
  }
  flat.mode = take(parse_pool_mode(mode));
  flat.padding_idx = padding_idx;
  const BagOutputType type = bag_output_type(dtype);
  const FlatBagsShape fs = take(flat_bags_shape(flat));
  const std::vector<py::ssize_t> shape = {static_cast<py::ssize_t>(fs.bags), static_cast<py::ssize_t>(fs.width)};
  const py::dtype want = type == BagOutputType::kFloat32   ? py::dtype::of<float>()
                         : type == BagOutputType::kFloat16 ? py::dtype("float16")
                                                           : py::dtype::of<uint16_t>();
  py::array out;
  if (out_obj.is_none()) {
    out = py::array(want, shape);
  } else {
    if (!py::isinstance<py::array>(out_obj))
      throw_error(ErrorCode::kInvalidArgument, "out must be a numpy.ndarray");
    out = py::reinterpret_borrow<py::array>(out_obj);
    std::vector<py::ssize_t> got(out.shape(), out.shape() + out.ndim());
    if (!out.dtype().equal(want))
      throw_error(ErrorCode::kInvalidArgument, "out has dtype " + dtype_name(out.dtype()) + "; this call writes " +
                                                   dtype_name(want));
    if (got != shape)
      throw_error(ErrorCode::kInvalidArgument, "out has shape " + shape_text(got) + "; this call writes " +
                                                   shape_text(shape));
    if (!(out.flags() & py::array::c_style))
      throw_error(ErrorCode::kInvalidArgument,
                  "out is not C-contiguous; pass a contiguous array (numpy.empty(shape, dtype))");
    if (!out.writeable()) throw_error(ErrorCode::kInvalidArgument, "out is read-only; pass a writable array");
  }
  void* dst = out.mutable_data();
  auto call = [&]() -> Status {
    if (type == BagOutputType::kFloat32) return embedding_bags_flat(flat, static_cast<float*>(dst));
    return embedding_bags_flat(flat, type, static_cast<uint16_t*>(dst));
  };
  Status s;
  if (ids.count * fs.width < kKeepGilValues) {
    s = call();
  } else {
    py::gil_scoped_release release;
    s = call();
  }
  check(s);
  return out;
}

// ---- compile, evaluate, fakequant ----------------------------------------------

std::optional<std::vector<int64_t>> token_list(const py::object& obj, std::string* source) {
  if (obj.is_none()) return std::nullopt;
  if (is_path(obj)) {
    const std::string path = fspath(obj);
    if (source) *source = path;
    return take(read_token_file(path));
  }
  Ids ids = as_ids(obj);
  std::vector<int64_t> out(ids.count);
  for (size_t i = 0; i < ids.count; ++i)
    out[i] = ids.is32 ? static_cast<const int32_t*>(ids.data)[i] : static_cast<const int64_t*>(ids.data)[i];
  if (source) *source = "<list of " + std::to_string(ids.count) + " ids>";
  return out;
}

// A 2-D C-contiguous table and its safetensors dtype name.
struct Table {
  py::array array;
  std::string dtype;
  int64_t rows = 0, dim = 0;
};

Table as_table(const py::handle& obj, const std::string& dtype_hint, bool float32_only) {
  if (!py::isinstance<py::array>(obj))
    throw_error(ErrorCode::kInvalidArgument,
          "source must be a checkpoint path or a 2-D numpy array; got " +
              py::type::handle_of(obj).attr("__name__").cast<std::string>());
  Table t;
  t.array = py::reinterpret_borrow<py::array>(obj);
  const py::dtype dt = t.array.dtype();
  if (!dtype_hint.empty()) {
    if (dtype_hint != "BF16" || dt.itemsize() != 2 || (dt.kind() != 'u' && dt.kind() != 'i'))
      throw_error(ErrorCode::kInvalidArgument, "dtype='" + dtype_hint + "' needs the raw bits as a 16-bit integer array");
    t.dtype = "BF16";
  } else if (dt.kind() == 'f' && dt.itemsize() == 4) {
    t.dtype = "F32";
  } else if (dt.kind() == 'f' && dt.itemsize() == 2 && !float32_only) {
    t.dtype = "F16";
  } else {
    throw_error(ErrorCode::kUnsupported, "the table has dtype " + dtype_name(dt) +
                                       (float32_only ? "; expected float32" : "; expected float32 or float16"));
  }
  if (t.array.ndim() != 2)
    throw_error(ErrorCode::kInvalidArgument,
          "the table must be 2-D [vocab, dim]; got " + std::to_string(t.array.ndim()) + " dimensions");
  if (!native_order(dt) || !(t.array.flags() & py::array::c_style))
    t.array = numpy().attr("ascontiguousarray")(t.array, dt.attr("newbyteorder")("="));
  t.rows = t.array.shape(0);
  t.dim = t.array.shape(1);
  return t;
}

std::string opt_str(const std::optional<std::string>& s) { return s.value_or(""); }

py::object compile(const py::object& source, const py::object& tensor_obj, const std::string& scheme,
                   const std::string& pattern, const std::optional<std::string>& qnn_sdk_version,
                   const py::object& calibration_tokens, const std::string& mode,
                   const std::optional<uint64_t>& memory_budget, int threads, const py::object& out,
                   const std::optional<std::string>& name, const std::optional<std::string>& dtype,
                   const std::optional<int64_t>& max_collapsed_rows) {
  if (out.is_none()) throw_error(ErrorCode::kInvalidArgument, "compile needs out= (the .qemb path to write)");
  const std::string out_path = fspath(out);
  // tensor= is one tensor name, or a list of names, globs and TENSOR=NAME
  // specs: one artifact of several tables.
  std::optional<std::string> tensor;
  std::optional<std::vector<std::string>> specs;
  if (py::isinstance<py::str>(tensor_obj)) {
    tensor = tensor_obj.cast<std::string>();
  } else if (!tensor_obj.is_none()) {
    specs.emplace();
    for (py::handle item : py::iter(tensor_obj)) {
      if (!py::isinstance<py::str>(item))
        throw_error(ErrorCode::kInvalidArgument,
                    "tensor= takes a name or a list of names (str); got a list holding a " +
                        py::type::handle_of(item).attr("__name__").cast<std::string>());
      specs->push_back(item.cast<std::string>());
    }
    if (specs->empty()) throw_error(ErrorCode::kInvalidArgument, "tensor= is an empty list: name at least one table");
  }
  CompileOptions o;
  o.tensor = opt_str(tensor);
  o.scheme = take(parse_scheme(scheme));
  o.pattern = take(parse_pattern(pattern));
  o.mode = take(parse_compile_mode(mode));
  o.qnn_sdk_version = opt_str(qnn_sdk_version);
  o.memory_budget = memory_budget.value_or(kDefaultMemoryBudget);
  if (threads < 0)
    throw_error(ErrorCode::kInvalidArgument, "threads is " + std::to_string(threads) + ": expected 0 (one per core) or more");
  o.threads = threads;
  if (max_collapsed_rows && *max_collapsed_rows < 0)
    throw_error(ErrorCode::kInvalidArgument, "max_collapsed_rows is " + std::to_string(*max_collapsed_rows) +
                                                 ": expected None (any number) or 0 or more");
  o.max_collapsed_rows = max_collapsed_rows.value_or(-1);
  if (name) o.node_name = *name;
  o.calibration_tokens = token_list(calibration_tokens, &o.calibration_source);
  Result<CompiledEmbedding> r = Error();
  if (is_path(source) && specs) {
    const std::string path = fspath(source);
    Result<std::vector<CompiledEmbedding>> many = Error();
    {
      py::gil_scoped_release release;
      many = [&]() -> Result<std::vector<CompiledEmbedding>> {
        QEMB_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::open(path));
        QEMB_ASSIGN_OR_RETURN(std::vector<NamedTable> selected, ckpt.select_named_tables(*specs));
        const bool aliased = std::any_of(selected.begin(), selected.end(),
                                         [](const NamedTable& t) { return t.name != t.tensor; });
        if (name && (selected.size() > 1 || aliased))
          return make_error(ErrorCode::kInvalidArgument,
                            "name= names a one-table artifact; with several tables (or TENSOR=NAME) each is named "
                            "by its tensor or its NAME");
        std::vector<CompileOptions> tables;
        for (const NamedTable& t : selected) {
          CompileOptions each = o;
          each.tensor = t.tensor;
          each.node_name = selected.size() == 1 && !aliased ? o.node_name : t.name;
          tables.push_back(std::move(each));
        }
        return compile_checkpoint_tables(path, tables, out_path);
      }();
    }
    take(std::move(many));
    r = CompiledEmbedding{};
  } else if (is_path(source)) {
    const std::string path = fspath(source);
    py::gil_scoped_release release;
    r = compile_checkpoint(path, o, out_path);
  } else {
    if (specs) throw_error(ErrorCode::kInvalidArgument, "tensor= names a checkpoint's tensors; the source is an array");
    if (tensor) throw_error(ErrorCode::kInvalidArgument, "tensor= names a checkpoint's tensor; the source is an array");
    const Table t = as_table(source, opt_str(dtype), false);
    py::gil_scoped_release release;
    r = compile_array(t.array.data(), t.dtype, t.rows, t.dim, o, out_path);
  }
  take(std::move(r));
  Result<std::unique_ptr<EmbeddingRuntime>> rt = Error();
  {
    py::gil_scoped_release release;
    rt = EmbeddingRuntime::load(out_path);
  }
  return json_to_py(describe_artifact(*take(std::move(rt))));
}

py::object evaluate(const py::object& source, const std::optional<std::string>& tensor, const std::string& scheme,
                    const std::optional<std::string>& qnn_sdk_version, const py::object& calibration_tokens,
                    const py::object& tokens, size_t worst_rows) {
  EvalOptions o;
  o.tensor = opt_str(tensor);
  o.schemes = take(parse_eval_schemes(scheme));
  o.qnn_sdk_version = opt_str(qnn_sdk_version);
  o.worst_rows = worst_rows;
  o.calibration_tokens = token_list(calibration_tokens, &o.calibration_source);
  o.tokens = token_list(tokens, &o.tokens_source);
  Result<EvalReport> r = Error();
  if (is_path(source)) {
    const std::string path = fspath(source);
    py::gil_scoped_release release;
    r = evaluate_checkpoint(path, o);
  } else {
    if (tensor) throw_error(ErrorCode::kInvalidArgument, "tensor= names a checkpoint's tensor; the source is an array");
    const Table t = as_table(source, "", true);
    py::gil_scoped_release release;
    Result<TargetVersion> target = discover_target_version(o.qnn_sdk_version);
    if (target.ok()) {
      r = evaluate_table(static_cast<const float*>(t.array.data()), t.rows, t.dim, o, *target,
                         TableSource{"<memory>", "", t.dtype, ""});
    } else {
      r = target.error();
    }
  }
  return json_to_py(eval_report_json(take(std::move(r))));
}

py::dict fakequant_info(const FakeQuantResult& r) {
  py::dict d;
  d["tensor"] = r.tensor;
  d["dtype"] = r.dtype;
  d["rows"] = r.rows;
  d["dim"] = r.dim;
  d["pattern"] = to_string(r.pattern);
  d["pattern_reason"] = r.pattern_reason;
  d["act_scale"] = r.act.scale;
  d["act_offset"] = r.act.offset();
  return d;
}

py::object fakequant(const py::object& source, const std::optional<std::string>& tensor, const std::string& scheme,
                     const std::string& pattern, const std::optional<std::string>& qnn_sdk_version,
                     const py::object& calibration_tokens, const py::object& out) {
  FakeQuantOptions o;
  o.tensor = opt_str(tensor);
  o.scheme = take(parse_scheme(scheme));
  o.pattern = take(parse_pattern(pattern));
  o.qnn_sdk_version = opt_str(qnn_sdk_version);
  o.calibration_tokens = token_list(calibration_tokens, nullptr);
  if (is_path(source)) {
    if (out.is_none()) throw_error(ErrorCode::kInvalidArgument, "fakequant of a checkpoint needs out= (the copy to write)");
    const std::string path = fspath(source), out_path = fspath(out);
    Result<FakeQuantResult> r = Error();
    {
      py::gil_scoped_release release;
      r = fakequant_checkpoint(path, o, out_path);
    }
    return fakequant_info(take(std::move(r)));
  }
  if (tensor) throw_error(ErrorCode::kInvalidArgument, "tensor= names a checkpoint's tensor; the source is an array");
  if (!out.is_none()) throw_error(ErrorCode::kInvalidArgument, "out= is for checkpoints; an array's result is returned");
  const Table t = as_table(source, "", true);
  py::array_t<float> values({static_cast<py::ssize_t>(t.rows), static_cast<py::ssize_t>(t.dim)});
  float* dst = values.mutable_data();
  Result<FakeQuantResult> r = Error();
  {
    py::gil_scoped_release release;
    Result<TargetVersion> target = discover_target_version(o.qnn_sdk_version);
    if (target.ok()) {
      r = fakequant_table(static_cast<const float*>(t.array.data()), t.rows, t.dim, o, *target, dst);
    } else {
      r = target.error();
    }
  }
  take(std::move(r));
  return values;
}

// ---- exceptions -----------------------------------------------------------------

struct ErrorClass {
  ErrorCode code;
  const char* name;
  PyObject* builtin;
  const char* doc;
};

void add_exceptions(py::module_& m) {
  g_error_base = PyErr_NewExceptionWithDoc("qemb.Error", "Base class of every error qemb raises.", PyExc_Exception,
                                           nullptr);
  if (g_error_base == nullptr) throw py::error_already_set();
  m.attr("Error") = py::handle(g_error_base);
  const ErrorClass classes[] = {
      {ErrorCode::kInvalidArgument, "InvalidArgument", PyExc_ValueError, "A bad option or argument value."},
      {ErrorCode::kOutOfRange, "IdOutOfRange", PyExc_IndexError,
       "A token id outside [0, vocab_size); the message names its position and value."},
      {ErrorCode::kNotFound, "NotFound", PyExc_FileNotFoundError, "A missing file, tensor or path component."},
      {ErrorCode::kParseError, "ParseError", PyExc_ValueError, "A malformed input file or text."},
      {ErrorCode::kUnsupported, "Unsupported", PyExc_ValueError,
       "A dtype, rank, format version or op the target or format does not support."},
      {ErrorCode::kIoError, "IoError", PyExc_OSError, "Opening, reading, writing or renaming a file failed."},
      {ErrorCode::kCorrupt, "CorruptArtifact", PyExc_ValueError,
       "A truncated, corrupted or foreign artifact (checksum or structure)."},
      {ErrorCode::kVersionError, "VersionError", PyExc_ValueError, "The SDK version is unknown or unreadable."},
      {ErrorCode::kValidationError, "ValidationError", PyExc_ValueError,
       "The graph is not supported by the target SDK version."},
      {ErrorCode::kInternal, "InternalError", PyExc_RuntimeError, "A bug in qemb; please report it."},
  };
  for (const ErrorClass& c : classes) {
    py::tuple bases = py::make_tuple(py::handle(g_error_base), py::handle(c.builtin));
    py::dict attrs;
    attrs["code"] = to_string(c.code);
    const std::string full = std::string("qemb.") + c.name;
    PyObject* cls = PyErr_NewExceptionWithDoc(full.c_str(), c.doc, bases.ptr(), attrs.ptr());
    if (cls == nullptr) throw py::error_already_set();
    g_error_classes[static_cast<int>(c.code)] = cls;
    m.attr(c.name) = py::handle(cls);
  }
}

}  // namespace
}  // namespace qemb::python

PYBIND11_MODULE(_qemb, m) {
  using namespace qemb::python;
  using py::arg;
  m.doc() = "qemb's C++ library; import qemb, not this module.";
  m.attr("__version__") = QEMB_VERSION;
  add_exceptions(m);

  py::class_<Runtime>(m, "Runtime", R"doc(A loaded .qemb artifact serving exact lookups.

Runtime(path, *, threads=1, verify="full", reference=False)

path       the .qemb file (memory-mapped, checked; nothing is copied)
threads    threads for large batches: 1 = the calling thread, 0 = one per core
verify     "full" hashes every section on open, "header" skips the data sections
reference  run the scalar reference interpreter instead of the SIMD kernels

One runtime may be shared by any number of Python threads; lookups release the GIL.)doc")
      .def(py::init<const py::object&, int, const std::string&, bool>(), arg("path"), py::kw_only(),
           arg("threads") = 1, arg("verify") = "full", arg("reference") = false)
      .def_property_readonly("vocab_size", &Runtime::vocab_size, "Rows of the table (V).")
      .def_property_readonly("dim", &Runtime::dim, "Values per row (D).")
      .def_property_readonly("activation", &Runtime::activation,
                             "The output encoding (scale, offset): real = scale * (q + offset).")
      .def_property_readonly("activation_bits", &Runtime::activation_bits,
                             "What lookup() returns: 16 (uint16), 8 (uint8) or 0 (float32: a weight-only scheme).")
      .def_property_readonly("kernel", &Runtime::kernel, "The kernel in use, e.g. 'gather_u16[AVX2]'.")
      .def_property_readonly("isa", &Runtime::isa, "Its instruction set, e.g. 'AVX2'.")
      .def_property_readonly("threads", &Runtime::threads, "Threads used for large batches.")
      .def_property_readonly("path", &Runtime::path, "The artifact's path.")
      .def("lookup", &Runtime::lookup_native, arg("ids"), arg("out") = py::none(), py::kw_only(),
           arg("table") = py::none(),
           R"doc(Looks ids up: the table's output of shape ids.shape + (dim,): uint16
activations (16a* schemes), uint8 (8a* schemes), or float32 rows y = s_r * q
for a weight-only table (w* schemes); activation_bits says which (16, 8, 0).

ids    int32 or int64 ids of any shape (a C-contiguous array is read in place;
       lists and other integer dtypes are converted)
out    optional array of that dtype and exactly that shape, C-contiguous and
       writable, written in place and returned
table  the artifact's table of that name (see tables; dim is that table's);
       an artifact of several tables needs it (InvalidArgument listing them)

An id outside [0, vocab_size) raises IdOutOfRange naming its position and
value; nothing is written to out on any error.)doc")
      .def("lookup_dequantized", &Runtime::lookup_dequantized, arg("ids"), arg("out") = py::none(),
           arg("dtype") = "f32", py::kw_only(), arg("table") = py::none(),
           R"doc(Looks ids up dequantized: y = scale * (q + offset), shape ids.shape + (dim,).

dtype  "f32" (float32, the default), "f16" (numpy.float16) or "bf16"
       (bfloat16 bit patterns as uint16, since NumPy has no bfloat16: view
       them with ml_dtypes.bfloat16 or torch's .view(torch.bfloat16)); the
       halves are the float32 y rounded to nearest even
Same rules for ids, out (of that dtype) and table as lookup().)doc")
      .def("describe", &Runtime::describe, "The artifact's description: the fields of `qemb inspect --json`.")
      .def_property_readonly("tables", &Runtime::tables,
                             "The artifact's tables, in order: [{'name', 'vocab_size', 'dim'}, ...].")
      .def_property_readonly("bag_kernel", &Runtime::bag_kernel,
                             "The pooled kernel for int64 ids, e.g. 'requant_bag_s4_i64[AVX2]'.")
      .def("embedding_bag", &runtime_embedding_bag, arg("ids"), arg("offsets") = py::none(), py::kw_only(),
           arg("include_last_offset") = false, arg("lengths") = py::none(), arg("per_sample_weights") = py::none(),
           arg("mode") = "sum", arg("padding_idx") = py::none(), arg("table") = py::none(), arg("dtype") = "f32",
           arg("out") = py::none(),
           R"doc(Pooled lookup (nn.EmbeddingBag): each bag's dequantized rows reduced to one row.

ids                  1-D ids split by offsets= or lengths=, or 2-D [B, L]: B bags of L ids
offsets              B bag starts (PyTorch's default), or B + 1 with include_last_offset=True
                     (the last equal to len(ids))
lengths              B bag lengths, instead of offsets
per_sample_weights   one float per id, the shape of ids (mode "sum" only)
mode                 "sum" or "mean" (an empty bag gives 0)
padding_idx          ids equal to it add nothing and do not count (negative: from the end)
table                the artifact's table of that name (see tables); needed when it has several
dtype                "f32" (float32), "f16" (numpy.float16) or "bf16" (bfloat16 bit
                     patterns as uint16), the halves rounded once from float32
out                  optional array of shape (B, dim) and that dtype, written in place

Sums run in float32, in index order, the same bits on every instruction set.
Bad input raises InvalidArgument (an id out of range IdOutOfRange, naming its
bag, position and value) and writes nothing.)doc")
      .def("embedding_bags_flat", &runtime_embedding_bags_flat, arg("indices"), arg("offsets"), py::kw_only(),
           arg("feature_tables") = py::none(), arg("per_sample_weights") = py::none(), arg("mode") = "sum",
           arg("padding_idx") = py::none(), arg("dtype") = "f32", arg("out") = py::none(),
           R"doc(Pools F features of B bags each in one call, in the flat form of FBGEMM's TBE and
TorchRec's KeyedJaggedTensor (its values() and offsets()): a [B, sum of the features' dims] array,
feature f's columns after those of the features before it.

indices             every feature's ids, one 1-D int32/int64 array
offsets             F * B + 1 offsets into indices, feature-major: feature f's bag b is
                    indices[offsets[f*B + b]:offsets[f*B + b + 1]]; the first 0, the last len(indices)
feature_tables      the table each feature reads: names or indices into tables (features may share
                    a table); default one feature per table, in the artifact's order
per_sample_weights  one float per id (mode "sum" only)
mode, padding_idx, dtype, out  as for embedding_bag

Bad input raises InvalidArgument (an id out of range IdOutOfRange, naming its feature, table,
position in indices and bag) and writes nothing.)doc")
      .def("_time_cpp_lookup", &Runtime::time_cpp_lookup, arg("ids"), arg("out"), arg("repeats"),
           "Seconds for `repeats` C++ lookups into out, without Python in between (for benchmarks).")
      .def("__repr__", [](const Runtime& r) {
        return "qemb.Runtime('" + r.path() + "', vocab_size=" + std::to_string(r.vocab_size()) +
               ", dim=" + std::to_string(r.dim()) + ", kernel='" + r.kernel() + "')";
      });

  m.def("embedding_bags", &embedding_bags_of, arg("tables"), py::kw_only(), arg("dtype") = "f32",
        arg("out") = py::none(),
        R"doc(Pools several tables in one call (table-batched): a [B, sum of dims] array with
each table's columns after those of the tables before it.

tables  a list of dicts, one per table: runtime (a qemb.Runtime), ids, and the
        other arguments of Runtime.embedding_bag (table, offsets,
        include_last_offset, lengths, per_sample_weights, mode, padding_idx),
        plus name (for messages; default the table's name). The tables of one
        multi-table artifact are the same runtime with different table=
dtype, out as for Runtime.embedding_bag. Every table needs the same number of bags.)doc");
  m.def("compile", &compile, arg("source"), py::kw_only(), arg("tensor") = py::none(), arg("scheme") = "16a4w",
        arg("pattern") = "auto", arg("qnn_sdk_version") = py::none(), arg("calibration_tokens") = py::none(),
        arg("mode") = "auto", arg("memory_budget") = py::none(), arg("threads") = 0, arg("out") = py::none(),
        arg("name") = py::none(), arg("dtype") = py::none(), arg("max_collapsed_rows") = py::none(),
        "Compiles a checkpoint path or a 2-D array into out; returns the artifact's description (a dict). "
        "tensor= is a tensor name, or a list of names, globs and TENSOR=NAME specs (one artifact of several "
        "tables, as `qemb compile --tensor`). dtype='BF16' marks a 16-bit integer array as raw bfloat16 bits.");
  m.def("evaluate", &evaluate, arg("source"), py::kw_only(), arg("tensor") = py::none(), arg("scheme") = "all",
        arg("qnn_sdk_version") = py::none(), arg("calibration_tokens") = py::none(), arg("tokens") = py::none(),
        arg("worst_rows") = 10, "What quantization costs: the object `qemb eval --json` prints.");
  m.def("fakequant", &fakequant, arg("source"), py::kw_only(), arg("tensor") = py::none(), arg("scheme") = "16a4w",
        arg("pattern") = "auto", arg("qnn_sdk_version") = py::none(), arg("calibration_tokens") = py::none(),
        arg("out") = py::none(),
        "The deployed lookup's values: a checkpoint copy written to out (returns a dict), or, for an array, "
        "a float32 array.");
}
