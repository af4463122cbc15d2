#include "core/memory.hpp"

#include <malloc.h>

namespace shardlab {

void keep_freed_memory(bool keep) {
  // One arena for every thread: glibc gives each device thread its own arena, capped at 64 MiB,
  // so any block of 64 MiB or more bypasses the heap and is mapped and unmapped on every use,
  // whatever the threshold below says (measured: alloc/touch/free of 100 MiB five times in a
  // thread faulted five times; with one arena, once). Devices allocate rarely and in large
  // blocks, so the lock one arena shares costs nothing measurable.
  if (keep) mallopt(M_ARENA_MAX, 1);
  // A glibc that refuses the threshold (older ones cap it at 32 MiB on 64-bit) is left as it is:
  // setting the trim threshold alone would only turn off its sliding threshold.
  if (mallopt(M_MMAP_THRESHOLD, keep ? 256 << 20 : 128 << 10) != 1 &&
      mallopt(M_MMAP_THRESHOLD, keep ? 32 << 20 : 128 << 10) != 1)
    return;
  mallopt(M_TRIM_THRESHOLD, keep ? 1 << 30 : 128 << 10);
}

}  // namespace shardlab
