// The restricted unpickler: a pickle virtual machine that builds plain
// values (None, bools, ints, floats, strings, tuples, lists, dicts), torch
// storages from persistent ids and tensors from torch's rebuild functions,
// and nothing else. Every object lives in one arena owned by the run, so a
// pickle that builds cycles through its memo neither leaks nor recurses.
#include <cstring>
#include <limits>
#include <memory>
#include <set>
#include <unordered_map>

#include "io/pickle_plain.h"
#include "qemb/pytorch.h"

namespace qemb {
namespace {

std::string in_quotes(const std::string& s) { return "'" + s + "'"; }

struct Obj {
  enum class Kind { kNone, kBool, kInt, kFloat, kString, kBytes, kTuple, kList, kDict, kGlobal, kStorage, kTensor };
  Kind kind = Kind::kNone;
  int64_t i = 0;
  double f = 0;
  std::string s;                      // string, bytes, global "module.name"
  std::vector<Obj*> items;            // tuple, list; dict values
  std::vector<Obj*> keys;             // dict keys
  std::unordered_map<std::string, size_t> str_keys;  // dict: where each str key is in `keys`
  std::unordered_map<int64_t, size_t> int_keys;      // dict: where each int key is in `keys`
  int depth = 1;                      // containers inside, counting itself (as far as known when built)
  // storage
  std::string dtype, key;
  int item_size = 0;
  int64_t numel = 0;
  // tensor
  PickledTensor tensor;
};

const char* kind_name(Obj::Kind k) {
  switch (k) {
    case Obj::Kind::kNone: return "None";
    case Obj::Kind::kBool: return "bool";
    case Obj::Kind::kInt: return "int";
    case Obj::Kind::kFloat: return "float";
    case Obj::Kind::kString: return "str";
    case Obj::Kind::kBytes: return "bytes";
    case Obj::Kind::kTuple: return "tuple";
    case Obj::Kind::kList: return "list";
    case Obj::Kind::kDict: return "dict";
    case Obj::Kind::kGlobal: return "global";
    case Obj::Kind::kStorage: return "storage";
    case Obj::Kind::kTensor: return "tensor";
  }
  return "?";
}

struct StorageType {
  const char* name;
  const char* dtype;
  int item_size;
};
constexpr StorageType kStorageTypes[] = {
    {"FloatStorage", "F32", 4},        {"HalfStorage", "F16", 2},          {"BFloat16Storage", "BF16", 2},
    {"DoubleStorage", "F64", 8},       {"LongStorage", "I64", 8},          {"IntStorage", "I32", 4},
    {"ShortStorage", "I16", 2},        {"CharStorage", "I8", 1},           {"ByteStorage", "U8", 1},
    {"BoolStorage", "BOOL", 1},        {"ComplexFloatStorage", "C64", 8}, {"ComplexDoubleStorage", "C128", 16},
};

const StorageType* storage_type(const std::string& global) {
  for (const StorageType& t : kStorageTypes)
    if (global == std::string("torch.") + t.name) return &t;
  return nullptr;
}

bool allowed_global(const std::string& g) {
  return g == "collections.OrderedDict" || g == "torch._utils._rebuild_tensor_v2" ||
         g == "torch._utils._rebuild_tensor" || g == "torch._utils._rebuild_parameter" ||
         g == "torch._utils._rebuild_parameter_with_state" || storage_type(g) != nullptr;
}

class Unpickler {
 public:
  Unpickler(const uint8_t* data, size_t size, const std::string& name) : p_(data), size_(size), name_(name) {}

  Result<Obj*> run() {
    for (;;) {
      if (pos_ >= size_) return fail("ends without its STOP opcode (the pickle is truncated)");
      const size_t at = pos_;
      const uint8_t op = p_[pos_++];
      Status st = step(op, at);
      if (!st.ok()) return st.error();
      if (stopped_) {
        if (stack_.size() != 1 || !marks_.empty()) return fail("STOP leaves " + std::to_string(stack_.size()) +
                                                               " values on the stack; the pickle is malformed");
        return stack_.back();
      }
    }
  }
  size_t pos() const { return pos_; }

 private:
  Error fail(const std::string& what) const { return make_error(ErrorCode::kParseError, name_ + " " + what); }
  Error fail_at(size_t at, const std::string& what) const {
    return fail(what + " (at byte " + std::to_string(at) + ")");
  }

  Obj* make(Obj::Kind kind) {
    arena_.push_back(std::make_unique<Obj>());
    arena_.back()->kind = kind;
    return arena_.back().get();
  }

  Status need(size_t n, size_t at) {
    if (size_ - pos_ < n) return fail_at(at, "is truncated inside an opcode's argument");
    return Status::Ok();
  }
  uint64_t le(int n) {
    uint64_t v = 0;
    for (int k = n - 1; k >= 0; --k) v = (v << 8) | p_[pos_ + static_cast<size_t>(k)];
    pos_ += static_cast<size_t>(n);
    return v;
  }

  Status push(Obj* o, size_t at) {
    if (stack_.size() + marks_.size() >= kMaxPickleStack)
      return fail_at(at, "holds more than " + std::to_string(kMaxPickleStack) + " values on its stack");
    stack_.push_back(o);
    return Status::Ok();
  }
  Result<Obj*> pop(size_t at) {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back()))
      return fail_at(at, "pops an empty stack; the pickle is malformed");
    Obj* o = stack_.back();
    stack_.pop_back();
    return o;
  }
  Result<Obj*> top(size_t at) {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back()))
      return fail_at(at, "reads an empty stack; the pickle is malformed");
    return stack_.back();
  }
  // The values since the last MARK, which is dropped.
  Result<std::vector<Obj*>> pop_mark(size_t at) {
    if (marks_.empty()) return fail_at(at, "has no MARK to pop to; the pickle is malformed");
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<Obj*> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return items;
  }

  Status nest(Obj* container, Obj* child, size_t at) {
    container->depth = std::max(container->depth, child->depth + 1);
    if (container->depth > kMaxPickleDepth)
      return fail_at(at, "nests containers deeper than " + std::to_string(kMaxPickleDepth) + " levels");
    return Status::Ok();
  }
  Result<Obj*> tuple(std::vector<Obj*> items, size_t at) {
    Obj* t = make(Obj::Kind::kTuple);
    for (Obj* o : items) QEMB_RETURN_IF_ERROR(nest(t, o, at));
    t->items = std::move(items);
    return t;
  }
  Status set_item(Obj* dict, Obj* key, Obj* value, size_t at) {
    if (dict->kind != Obj::Kind::kDict)
      return fail_at(at, std::string("sets an item on a ") + kind_name(dict->kind) + ", not a dict");
    QEMB_RETURN_IF_ERROR(nest(dict, value, at));
    QEMB_RETURN_IF_ERROR(nest(dict, key, at));
    // A key set again keeps its place and takes the last value, as in Python.
    if (key->kind == Obj::Kind::kString) {
      auto [it, added] = dict->str_keys.emplace(key->s, dict->keys.size());
      if (!added) {
        dict->items[it->second] = value;
        return Status::Ok();
      }
    } else if (key->kind == Obj::Kind::kInt) {
      auto [it, added] = dict->int_keys.emplace(key->i, dict->keys.size());
      if (!added) {
        dict->items[it->second] = value;
        return Status::Ok();
      }
    }
    dict->keys.push_back(key);
    dict->items.push_back(value);
    return Status::Ok();
  }
  Status append(Obj* list, Obj* value, size_t at) {
    if (list->kind != Obj::Kind::kList)
      return fail_at(at, std::string("appends to a ") + kind_name(list->kind) + ", not a list");
    QEMB_RETURN_IF_ERROR(nest(list, value, at));
    list->items.push_back(value);
    return Status::Ok();
  }
  Status memo_put(uint64_t index, size_t at) {
    QEMB_ASSIGN_OR_RETURN(Obj * o, top(at));
    if (memo_.size() >= kMaxPickleMemo && memo_.find(index) == memo_.end())
      return fail_at(at, "memoizes more than " + std::to_string(kMaxPickleMemo) + " values");
    memo_[index] = o;
    return Status::Ok();
  }
  Status memo_get(uint64_t index, size_t at) {
    auto it = memo_.find(index);
    if (it == memo_.end()) return fail_at(at, "reads memo entry " + std::to_string(index) + ", which was never stored");
    return push(it->second, at);
  }
  Status string_op(size_t length_bytes, Obj::Kind kind, size_t at) {
    QEMB_RETURN_IF_ERROR(need(length_bytes, at));
    const uint64_t n = le(static_cast<int>(length_bytes));
    if (n > size_ - pos_) return fail_at(at, "has a string of " + std::to_string(n) + " bytes that runs past its end");
    Obj* o = make(kind);
    o->s.assign(reinterpret_cast<const char*>(p_ + pos_), static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return push(o, at);
  }
  Status int_op(int64_t v, size_t at) {
    Obj* o = make(Obj::Kind::kInt);
    o->i = v;
    return push(o, at);
  }
  Status global(const std::string& module, const std::string& qualname, size_t at) {
    const std::string g = module + "." + qualname;
    if (!allowed_global(g))
      return make_error(ErrorCode::kUnsupported,
                        name_ + " refuses the global " + in_quotes(g) +
                            ": only state dicts of tensors are read (collections.OrderedDict, torch tensor and "
                            "parameter rebuilds, torch storage types), as torch.load(weights_only=True) does; "
                            "nothing in the file is executed");
    Obj* o = make(Obj::Kind::kGlobal);
    o->s = g;
    return push(o, at);
  }

  Result<int64_t> as_int(const Obj* o, const std::string& what, size_t at) {
    if (o->kind != Obj::Kind::kInt) return fail_at(at, what + " is a " + kind_name(o->kind) + ", not an int");
    return o->i;
  }
  Result<std::vector<int64_t>> int_tuple(const Obj* o, const std::string& what, size_t at) {
    if (o->kind != Obj::Kind::kTuple && o->kind != Obj::Kind::kList)
      return fail_at(at, what + " is a " + kind_name(o->kind) + ", not a tuple of ints");
    std::vector<int64_t> out;
    for (const Obj* e : o->items) {
      QEMB_ASSIGN_OR_RETURN(int64_t v, as_int(e, what + " element", at));
      out.push_back(v);
    }
    return out;
  }

  Result<Obj*> persistent_load(Obj* pid, size_t at) {
    if (pid->kind != Obj::Kind::kTuple || pid->items.size() < 5 || pid->items.size() > 6 ||
        pid->items[0]->kind != Obj::Kind::kString || pid->items[0]->s != "storage")
      return fail_at(at, "has a persistent id that is not a torch storage ('storage', type, key, location, numel)");
    const Obj* type = pid->items[1];
    const StorageType* st = type->kind == Obj::Kind::kGlobal ? storage_type(type->s) : nullptr;
    if (st == nullptr) return fail_at(at, "has a storage whose type is not a torch storage type");
    if (pid->items[2]->kind != Obj::Kind::kString) return fail_at(at, "has a storage key that is not a string");
    QEMB_ASSIGN_OR_RETURN(int64_t numel, as_int(pid->items[4], "a storage's element count", at));
    if (numel < 0) return fail_at(at, "has a storage of " + std::to_string(numel) + " elements");
    if (pid->items.size() == 6 && pid->items[5]->kind != Obj::Kind::kNone)
      return make_error(ErrorCode::kUnsupported,
                        name_ + " has a storage view (legacy view metadata), which qemb does not read; save the "
                                "state dict again with a current torch.save");
    Obj* s = make(Obj::Kind::kStorage);
    s->dtype = st->dtype;
    s->item_size = st->item_size;
    s->key = pid->items[2]->s;
    s->numel = numel;
    return s;
  }

  Result<Obj*> rebuild_tensor(const std::vector<Obj*>& args, size_t at) {
    if (args.size() < 4) return fail_at(at, "rebuilds a tensor with " + std::to_string(args.size()) + " arguments");
    const Obj* storage = args[0];
    if (storage->kind != Obj::Kind::kStorage)
      return fail_at(at, std::string("rebuilds a tensor from a ") + kind_name(storage->kind) + ", not a storage");
    Obj* t = make(Obj::Kind::kTensor);
    PickledTensor& pt = t->tensor;
    pt.dtype = storage->dtype;
    pt.item_size = storage->item_size;
    pt.storage_key = storage->key;
    pt.storage_numel = storage->numel;
    QEMB_ASSIGN_OR_RETURN(pt.storage_offset, as_int(args[1], "a tensor's storage offset", at));
    QEMB_ASSIGN_OR_RETURN(pt.shape, int_tuple(args[2], "a tensor's size", at));
    QEMB_ASSIGN_OR_RETURN(pt.strides, int_tuple(args[3], "a tensor's stride", at));
    if (pt.shape.size() != pt.strides.size())
      return fail_at(at, "has a tensor of " + std::to_string(pt.shape.size()) + " dimensions with " +
                             std::to_string(pt.strides.size()) + " strides");
    if (pt.shape.size() > static_cast<size_t>(kMaxTensorRank))
      return fail_at(at, "has a tensor of " + std::to_string(pt.shape.size()) + " dimensions (at most " +
                             std::to_string(kMaxTensorRank) + ")");
    if (pt.storage_offset < 0) return fail_at(at, "has a tensor at a negative storage offset");
    // The last element read: offset + sum((size - 1) * stride), checked for overflow.
    bool empty = false;
    for (size_t d = 0; d < pt.shape.size(); ++d) {
      if (pt.shape[d] < 0 || pt.strides[d] < 0) return fail_at(at, "has a tensor with a negative size or stride");
      if (pt.shape[d] == 0) empty = true;
    }
    if (!empty) {
      int64_t last = pt.storage_offset;
      for (size_t d = 0; d < pt.shape.size(); ++d) {
        int64_t step = 0;
        if (__builtin_mul_overflow(pt.shape[d] - 1, pt.strides[d], &step) || __builtin_add_overflow(last, step, &last))
          return fail_at(at, "has a tensor whose extent overflows");
      }
      if (last >= pt.storage_numel)
        return fail_at(at, "has a tensor that reads element " + std::to_string(last) + " of storage " +
                               in_quotes(pt.storage_key) + ", which holds " + std::to_string(pt.storage_numel) +
                               " elements");
    } else if (pt.storage_offset > pt.storage_numel) {
      return fail_at(at, "has a tensor that starts past the end of storage " + in_quotes(pt.storage_key));
    }
    return t;
  }

  Result<Obj*> reduce(Obj* callable, Obj* args, size_t at) {
    if (callable->kind != Obj::Kind::kGlobal)
      return fail_at(at, std::string("calls a ") + kind_name(callable->kind) + "; only globals are called");
    if (args->kind != Obj::Kind::kTuple) return fail_at(at, "calls " + in_quotes(callable->s) + " without an argument tuple");
    const std::string& g = callable->s;
    if (g == "collections.OrderedDict") {
      if (!args->items.empty()) return fail_at(at, "calls 'collections.OrderedDict' with arguments");
      return make(Obj::Kind::kDict);
    }
    if (g == "torch._utils._rebuild_tensor_v2" || g == "torch._utils._rebuild_tensor")
      return rebuild_tensor(args->items, at);
    if (g == "torch._utils._rebuild_parameter" || g == "torch._utils._rebuild_parameter_with_state") {
      if (args->items.empty() || args->items[0]->kind != Obj::Kind::kTensor)
        return fail_at(at, "rebuilds a parameter from something that is not a tensor");
      return args->items[0];
    }
    return make_error(ErrorCode::kUnsupported, name_ + " calls " + in_quotes(g) +
                                                   ", which a state dict never calls; only state dicts of tensors "
                                                   "are read");
  }

  Status step(uint8_t op, size_t at) {
    switch (op) {
      case 0x80: {  // PROTO
        QEMB_RETURN_IF_ERROR(need(1, at));
        const uint8_t v = p_[pos_++];
        if (v > 5) return fail_at(at, "uses pickle protocol " + std::to_string(v) + " (at most 5 is known)");
        return Status::Ok();
      }
      case 0x95:  // FRAME: a length hint only
        QEMB_RETURN_IF_ERROR(need(8, at));
        pos_ += 8;
        return Status::Ok();
      case '.': stopped_ = true; return Status::Ok();
      case '}': return push(make(Obj::Kind::kDict), at);
      case ']': return push(make(Obj::Kind::kList), at);
      case ')': return push(make(Obj::Kind::kTuple), at);
      case 'N': return push(make(Obj::Kind::kNone), at);
      case 0x88:
      case 0x89: {
        Obj* o = make(Obj::Kind::kBool);
        o->i = op == 0x88;
        return push(o, at);
      }
      case '(':
        if (stack_.size() + marks_.size() >= kMaxPickleStack)
          return fail_at(at, "holds more than " + std::to_string(kMaxPickleStack) + " values on its stack");
        marks_.push_back(stack_.size());
        return Status::Ok();
      case 't': {
        QEMB_ASSIGN_OR_RETURN(std::vector<Obj*> items, pop_mark(at));
        QEMB_ASSIGN_OR_RETURN(Obj * t, tuple(std::move(items), at));
        return push(t, at);
      }
      case 0x85:
      case 0x86:
      case 0x87: {
        const size_t n = op - 0x84u;
        std::vector<Obj*> items(n);
        for (size_t k = n; k-- > 0;) {
          QEMB_ASSIGN_OR_RETURN(items[k], pop(at));
        }
        QEMB_ASSIGN_OR_RETURN(Obj * t, tuple(std::move(items), at));
        return push(t, at);
      }
      case 'l':
      case 'd': {
        QEMB_ASSIGN_OR_RETURN(std::vector<Obj*> items, pop_mark(at));
        Obj* c = make(op == 'l' ? Obj::Kind::kList : Obj::Kind::kDict);
        if (op == 'l') {
          for (Obj* o : items) QEMB_RETURN_IF_ERROR(append(c, o, at));
        } else {
          if (items.size() % 2) return fail_at(at, "builds a dict from an odd number of values");
          for (size_t k = 0; k < items.size(); k += 2) QEMB_RETURN_IF_ERROR(set_item(c, items[k], items[k + 1], at));
        }
        return push(c, at);
      }
      case 's': {
        QEMB_ASSIGN_OR_RETURN(Obj * value, pop(at));
        QEMB_ASSIGN_OR_RETURN(Obj * key, pop(at));
        QEMB_ASSIGN_OR_RETURN(Obj * dict, top(at));
        return set_item(dict, key, value, at);
      }
      case 'u': {
        QEMB_ASSIGN_OR_RETURN(std::vector<Obj*> items, pop_mark(at));
        QEMB_ASSIGN_OR_RETURN(Obj * dict, top(at));
        if (items.size() % 2) return fail_at(at, "sets items from an odd number of values");
        for (size_t k = 0; k < items.size(); k += 2) QEMB_RETURN_IF_ERROR(set_item(dict, items[k], items[k + 1], at));
        return Status::Ok();
      }
      case 'a': {
        QEMB_ASSIGN_OR_RETURN(Obj * value, pop(at));
        QEMB_ASSIGN_OR_RETURN(Obj * list, top(at));
        return append(list, value, at);
      }
      case 'e': {
        QEMB_ASSIGN_OR_RETURN(std::vector<Obj*> items, pop_mark(at));
        QEMB_ASSIGN_OR_RETURN(Obj * list, top(at));
        for (Obj* o : items) QEMB_RETURN_IF_ERROR(append(list, o, at));
        return Status::Ok();
      }
      case 'X': return string_op(4, Obj::Kind::kString, at);
      case 0x8c: return string_op(1, Obj::Kind::kString, at);
      case 0x8d: return string_op(8, Obj::Kind::kString, at);
      case 'T': return string_op(4, Obj::Kind::kString, at);  // BINSTRING (protocol 2 byte strings)
      case 'U': return string_op(1, Obj::Kind::kString, at);  // SHORT_BINSTRING
      case 'B': return string_op(4, Obj::Kind::kBytes, at);
      case 'C': return string_op(1, Obj::Kind::kBytes, at);
      case 0x8e: return string_op(8, Obj::Kind::kBytes, at);
      case 'J':
        QEMB_RETURN_IF_ERROR(need(4, at));
        return int_op(static_cast<int32_t>(static_cast<uint32_t>(le(4))), at);
      case 'K':
        QEMB_RETURN_IF_ERROR(need(1, at));
        return int_op(static_cast<int64_t>(le(1)), at);
      case 'M':
        QEMB_RETURN_IF_ERROR(need(2, at));
        return int_op(static_cast<int64_t>(le(2)), at);
      case 0x8a:
      case 0x8b: {  // LONG1, LONG4: little-endian two's complement
        const size_t lb = op == 0x8a ? 1 : 4;
        QEMB_RETURN_IF_ERROR(need(lb, at));
        const uint64_t n = le(static_cast<int>(lb));
        if (n > size_ - pos_) return fail_at(at, "has an integer of " + std::to_string(n) + " bytes past its end");
        if (n > 8) {
          // Wider than 64 bits: only sign extension may fill the high bytes.
          const uint8_t fill = (p_[pos_ + 7] & 0x80) ? 0xFF : 0x00;
          for (size_t k = 8; k < n; ++k)
            if (p_[pos_ + k] != fill) return fail_at(at, "has an integer too large for 64 bits");
        }
        uint64_t v = 0;
        const size_t used = std::min<uint64_t>(n, 8);
        for (size_t k = used; k-- > 0;) v = (v << 8) | p_[pos_ + k];
        if (used > 0 && used < 8 && (p_[pos_ + used - 1] & 0x80)) v |= ~0ull << (8 * used);
        pos_ += static_cast<size_t>(n);
        return int_op(static_cast<int64_t>(v), at);
      }
      case 'G': {
        QEMB_RETURN_IF_ERROR(need(8, at));
        uint64_t bits = 0;
        for (int k = 0; k < 8; ++k) bits = (bits << 8) | p_[pos_ + static_cast<size_t>(k)];
        pos_ += 8;
        Obj* o = make(Obj::Kind::kFloat);
        std::memcpy(&o->f, &bits, 8);
        return push(o, at);
      }
      case 'q':
        QEMB_RETURN_IF_ERROR(need(1, at));
        return memo_put(le(1), at);
      case 'r':
        QEMB_RETURN_IF_ERROR(need(4, at));
        return memo_put(le(4), at);
      case 0x94: return memo_put(memo_.size(), at);
      case 'h':
        QEMB_RETURN_IF_ERROR(need(1, at));
        return memo_get(le(1), at);
      case 'j':
        QEMB_RETURN_IF_ERROR(need(4, at));
        return memo_get(le(4), at);
      case 'c': {  // GLOBAL: "module\nname\n"
        std::string lines[2];
        for (std::string& line : lines) {
          const void* nl = std::memchr(p_ + pos_, '\n', std::min<size_t>(size_ - pos_, 256));
          if (nl == nullptr) return fail_at(at, "has a GLOBAL without its two newline-ended lines");
          const size_t n = static_cast<size_t>(static_cast<const uint8_t*>(nl) - (p_ + pos_));
          line.assign(reinterpret_cast<const char*>(p_ + pos_), n);
          pos_ += n + 1;
        }
        return global(lines[0], lines[1], at);
      }
      case 0x93: {  // STACK_GLOBAL
        QEMB_ASSIGN_OR_RETURN(Obj * qual, pop(at));
        QEMB_ASSIGN_OR_RETURN(Obj * module, pop(at));
        if (qual->kind != Obj::Kind::kString || module->kind != Obj::Kind::kString)
          return fail_at(at, "has a STACK_GLOBAL whose module or name is not a string");
        return global(module->s, qual->s, at);
      }
      case 'R': {
        QEMB_ASSIGN_OR_RETURN(Obj * args, pop(at));
        QEMB_ASSIGN_OR_RETURN(Obj * callable, pop(at));
        QEMB_ASSIGN_OR_RETURN(Obj * result, reduce(callable, args, at));
        return push(result, at);
      }
      case 'b': {  // BUILD: a dict's attributes (a state dict's _metadata) are not kept
        QEMB_ASSIGN_OR_RETURN(Obj * state, pop(at));
        (void)state;
        QEMB_ASSIGN_OR_RETURN(Obj * obj, top(at));
        if (obj->kind != Obj::Kind::kDict && obj->kind != Obj::Kind::kTensor)
          return fail_at(at, std::string("sets the state of a ") + kind_name(obj->kind) +
                                 "; only dicts and tensors take one");
        return Status::Ok();
      }
      case 'Q': {
        QEMB_ASSIGN_OR_RETURN(Obj * pid, pop(at));
        QEMB_ASSIGN_OR_RETURN(Obj * storage, persistent_load(pid, at));
        return push(storage, at);
      }
      case '0': return pop(at).status();
      case '1': return pop_mark(at).status();
      case '2': {
        QEMB_ASSIGN_OR_RETURN(Obj * o, top(at));
        return push(o, at);
      }
      default: {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", op);
        return make_error(ErrorCode::kUnsupported,
                          name_ + " uses pickle opcode " + hex + " (at byte " + std::to_string(at) +
                              "), which a state dict of tensors does not use; only state dicts are read");
      }
    }
  }

  const uint8_t* p_;
  size_t size_;
  std::string name_;
  size_t pos_ = 0;
  bool stopped_ = false;
  std::vector<std::unique_ptr<Obj>> arena_;
  std::vector<Obj*> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Obj*> memo_;
};

// `visited`: every dict already flattened. A state dict never holds one dict
// in two places; refusing that keeps the walk linear (a pickle could share
// one dict under two keys at every level and double the paths each time).
Status flatten(const Obj* dict, const std::string& prefix, int depth, const std::string& name,
               std::vector<PickledTensor>& out, std::set<std::string>& seen, std::set<const Obj*>& visited) {
  if (depth > kMaxPickleDepth)
    return make_error(ErrorCode::kParseError,
                      name + " nests dicts deeper than " + std::to_string(kMaxPickleDepth) + " levels");
  if (!visited.insert(dict).second)
    return make_error(ErrorCode::kParseError, name + " holds one dict in two places (at " +
                                                  in_quotes(prefix.empty() ? "<top>" : prefix) +
                                                  "); a state dict is a tree");
  for (size_t k = 0; k < dict->keys.size(); ++k) {
    const Obj* key = dict->keys[k];
    const Obj* value = dict->items[k];
    std::string part;
    if (key->kind == Obj::Kind::kString) part = key->s;
    else if (key->kind == Obj::Kind::kInt) part = std::to_string(key->i);
    else continue;  // not a name a tensor can have
    const std::string full = prefix.empty() ? part : prefix + "." + part;
    if (value->kind == Obj::Kind::kDict) {
      QEMB_RETURN_IF_ERROR(flatten(value, full, depth + 1, name, out, seen, visited));
    } else if (value->kind == Obj::Kind::kTensor) {
      if (!seen.insert(full).second)
        return make_error(ErrorCode::kParseError, name + " names two tensors " + in_quotes(full));
      out.push_back(value->tensor);
      out.back().name = full;
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<PickledTensor>> unpickle_state_dict(const uint8_t* data, size_t size, const std::string& name,
                                                       size_t* end) {
  Unpickler u(data, size, name);
  QEMB_ASSIGN_OR_RETURN(Obj * root, u.run());
  if (end != nullptr) {
    *end = u.pos();
  } else if (u.pos() != size) {
    return make_error(ErrorCode::kParseError, name + " has " + std::to_string(size - u.pos()) +
                                                  " bytes after its STOP opcode; the pickle is malformed");
  }
  std::vector<PickledTensor> out;
  if (root->kind == Obj::Kind::kTensor) {
    out.push_back(root->tensor);  // torch.save(tensor): one unnamed tensor
    return out;
  }
  if (root->kind != Obj::Kind::kDict)
    return make_error(ErrorCode::kUnsupported, name + " holds a " + std::string(kind_name(root->kind)) +
                                                   ", not a state dict (a dict of tensors)");
  std::set<std::string> seen;
  std::set<const Obj*> visited;
  QEMB_RETURN_IF_ERROR(flatten(root, "", 0, name, out, seen, visited));
  return out;
}

Result<PlainPickle> unpickle_plain(const uint8_t* data, size_t size, const std::string& name) {
  Unpickler u(data, size, name);
  QEMB_ASSIGN_OR_RETURN(Obj * root, u.run());
  PlainPickle p;
  p.end = u.pos();
  if (root->kind == Obj::Kind::kInt) {
    p.is_int = true;
    p.int_value = root->i;
  } else if (root->kind == Obj::Kind::kList) {
    p.is_string_list = true;
    for (const Obj* o : root->items) {
      if (o->kind != Obj::Kind::kString) {
        p.is_string_list = false;
        break;
      }
      p.strings.push_back(o->s);
    }
  }
  return p;
}

}  // namespace qemb
