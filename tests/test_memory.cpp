// keep_freed_memory: with memory kept, an 8 MiB block comes from the heap; with glibc's defaults a
// block bigger than the heap's free space is mapped on its own (mallinfo2 counts mapped bytes).
#include <doctest/doctest.h>

#include <cmath>

#include <cstdlib>
#include <cstring>
#include <malloc.h>

#include "core/memory.hpp"

using namespace shardlab;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
TEST_CASE("keep_freed_memory (skipped: sanitizers bring their own allocator)") { keep_freed_memory(); }
#else
namespace {
// Bytes glibc has mapped for single blocks while a block of `bytes` is held, minus before.
long mapped_for(std::size_t bytes) {
  const long before = static_cast<long>(mallinfo2().hblkhd);
  // volatile: the compiler may not drop a malloc/free pair whose memory nobody reads
  char* volatile p = static_cast<char*>(std::malloc(bytes));
  p[0] = 1;
  const long during = static_cast<long>(mallinfo2().hblkhd);
  std::free(p);
  return during - before;
}
}  // namespace

TEST_CASE("keep_freed_memory: big blocks come from the heap when kept, mapped alone by glibc's defaults") {
  keep_freed_memory(false);
  // Larger than all the free heap earlier tests left behind, so no free chunk can serve it: with
  // the 128 KiB threshold glibc must map it on its own.
  const std::size_t more_than_free = static_cast<std::size_t>(mallinfo2().fordblks) + (8 << 20);
  CHECK(mapped_for(more_than_free) >= static_cast<long>(more_than_free));
  keep_freed_memory(true);
  CHECK(mapped_for(8 << 20) == 0);
}
#endif

TEST_CASE("touch_rates: a first touch and a second write of 16 MiB, both measured") {
  const TouchRates r = touch_rates(std::size_t(16) << 20);
  CHECK(r.first > 0);
  CHECK(r.again > 0);
  // Which of the two is quicker is a measurement, not a property: on a loaded machine a second
  // write can be descheduled and lose to the first, so no order between them is asserted here.
  CHECK(std::isfinite(r.first));
  CHECK(std::isfinite(r.again));
}

