// How much memory this process may use (core/internal/usable_memory.h): the cgroup limit
// files' text read as bytes, "max" and v1's unlimited read as no limit.
#include "core/internal/usable_memory.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace zdp {
namespace {

TEST(UsableMemory, CgroupLimitsAndTheHostsMemory) {
  EXPECT_EQ(bytes_of_memory_limit("8589934592"), int64_t{8} << 30);  // v2 memory.max, v1 limit_in_bytes
  EXPECT_EQ(bytes_of_memory_limit("max"), -1);
  EXPECT_EQ(bytes_of_memory_limit("9223372036854771712"), -1);  // v1's unlimited
  EXPECT_EQ(bytes_of_memory_limit(""), -1);                     // no such file
  EXPECT_EQ(bytes_of_memory_limit("-5"), -1);
  const int64_t host = static_cast<int64_t>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGE_SIZE);
  EXPECT_GT(usable_memory_bytes(), 0);
  EXPECT_LE(usable_memory_bytes(), host);
}

}  // namespace
}  // namespace zdp
