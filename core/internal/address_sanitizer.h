// Telling AddressSanitizer about bytes zdp owns but nobody may read: an allocation's
// rounding slack. ASan knows where a heap block ends only as the allocator was asked;
// bytes zdp adds past that (alignment rounding, a guard against a crash) would otherwise
// read as valid, so an out-of-bounds read by one element of a kernel could pass the
// sanitizer runs unseen. Nothing without ASan.
#pragma once

#include <cstddef>

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

}  // namespace zdp
