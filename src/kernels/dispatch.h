// The slot of a Highway target in a file's HWY_EXPORT tables: the index
// HWY_DYNAMIC_DISPATCH computes once hwy has chosen `target` (hwy/targets.h,
// ChosenTarget::GetIndex). Include it in the HWY_ONCE part of a
// foreach_target.h file; each includer gets its own copy (internal linkage),
// built with that file's target list.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hwy/highway.h"

namespace qemb {
namespace {

[[maybe_unused]] size_t dispatch_index(int64_t target) {
#if (HWY_TARGETS & (HWY_TARGETS - 1)) == 0
  (void)target;
  return 0;  // a single compiled target: the tables have one entry
#else
  const int64_t mask = (HWY_CHOSEN_TARGET_SHIFT(target) | HWY_CHOSEN_TARGET_MASK_SCALAR) &
                       HWY_CHOSEN_TARGET_MASK_TARGETS;
  return hwy::Num0BitsBelowLS1Bit_Nonzero64(static_cast<uint64_t>(mask));
#endif
}

}  // namespace
}  // namespace qemb
