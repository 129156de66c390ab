// Telling AddressSanitizer about bytes zdp owns but nobody may read: an allocation's
// rounding slack. ASan knows where a heap block ends only as the allocator was asked;
// bytes zdp adds past that (alignment rounding, a guard against a crash) would otherwise
// read as valid, so an out-of-bounds read by one element of a kernel could pass the
// sanitizer runs unseen. Nothing without ASan.
#pragma once

#include <cstddef>
#include <cstdlib>

#if defined(__SANITIZE_ADDRESS__)
#define ZDP_ADDRESS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ZDP_ADDRESS_SANITIZER 1
#endif
#endif
#if defined(ZDP_ADDRESS_SANITIZER)
#include <sanitizer/asan_interface.h>
#endif

namespace zdp {

// Marks [p, p + bytes) unaddressable: any read or write there is an ASan report. The
// block's free() clears it.
inline void poison_unused_bytes(const void* p, size_t bytes) {
#if defined(ZDP_ADDRESS_SANITIZER)
  ASAN_POISON_MEMORY_REGION(p, bytes);
#else
  (void)p;
  (void)bytes;
#endif
}

// `bytes` of host memory at `alignment` (a power of two), rounded up to a multiple of it
// for aligned_alloc; the rounding slack is poisoned, so a read past `bytes` is reported as
// it would be past a cudaMalloc's end. nullptr when the allocation fails; free() frees it.
inline void* allocate_exact_bytes(size_t alignment, size_t bytes) {
  const size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  void* ptr = std::aligned_alloc(alignment, rounded > 0 ? rounded : alignment);
  if (ptr != nullptr) poison_unused_bytes(static_cast<char*>(ptr) + bytes, rounded - bytes);
  return ptr;
}

}  // namespace zdp
