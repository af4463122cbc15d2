#include "core/memory.hpp"

#include <malloc.h>

namespace shardlab {

void keep_freed_memory(bool keep) {
  // A glibc that refuses the threshold (older ones cap it at 32 MiB on 64-bit) is left as it is:
  // setting the trim threshold alone would only turn off its sliding threshold.
  if (mallopt(M_MMAP_THRESHOLD, keep ? 256 << 20 : 128 << 10) != 1 &&
      mallopt(M_MMAP_THRESHOLD, keep ? 32 << 20 : 128 << 10) != 1)
    return;
  mallopt(M_TRIM_THRESHOLD, keep ? 1 << 30 : 128 << 10);
}

}  // namespace shardlab
