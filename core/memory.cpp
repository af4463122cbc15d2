#include "core/memory.hpp"

#include <malloc.h>

namespace shardlab {

void keep_freed_memory(bool keep) {
  mallopt(M_MMAP_THRESHOLD, keep ? 256 << 20 : 128 << 10);
  mallopt(M_TRIM_THRESHOLD, keep ? 1 << 30 : 128 << 10);
}

}  // namespace shardlab
