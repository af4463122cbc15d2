// keep_freed_memory: with memory kept, a freed 8 MiB block is reused from the heap instead of being
// mapped afresh; with glibc's defaults it is mapped on its own (mallinfo2 counts mapped bytes).
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <malloc.h>

#include "core/memory.hpp"

using namespace shardlab;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
TEST_CASE("keep_freed_memory (skipped: sanitizers bring their own allocator)") { keep_freed_memory(); }
#else
namespace {
// Bytes glibc has mapped for single blocks while an 8 MiB block is held, minus before.
long mapped_for_8_mib() {
  const long before = static_cast<long>(mallinfo2().hblkhd);
  // volatile: the compiler may not drop a malloc/free pair whose memory nobody reads
  char* volatile p = static_cast<char*>(std::malloc(8 << 20));
  std::memset(p, 1, 8 << 20);
  const long during = static_cast<long>(mallinfo2().hblkhd);
  std::free(p);
  return during - before;
}
}  // namespace

TEST_CASE("keep_freed_memory: big blocks come from the heap when kept, mapped alone by glibc's defaults") {
  keep_freed_memory(false);
  CHECK(mapped_for_8_mib() >= (8 << 20));
  keep_freed_memory(true);
  CHECK(mapped_for_8_mib() == 0);
}
#endif
