#include "core/memory.hpp"

#include <malloc.h>
#include <sys/mman.h>

#include <chrono>
#include <cstring>
#include <fstream>

#include "core/error.hpp"
#include "core/text.hpp"

namespace shardlab {

void keep_freed_memory(bool keep) {
  // One arena for every thread: glibc gives each device thread its own arena, capped at 64 MiB,
  // so any block of 64 MiB or more bypasses the heap and is mapped and unmapped on every use,
  // whatever the threshold below says (alloc/touch/free of 100 MiB five times in a thread faults
  // five times; with one arena, once). Devices allocate rarely and in large
  // blocks, so the lock one arena shares costs nothing measurable.
  if (keep) mallopt(M_ARENA_MAX, 1);
  // A glibc that refuses the threshold (older ones cap it at 32 MiB on 64-bit) is left as it is:
  // setting the trim threshold alone would only turn off its sliding threshold.
  if (mallopt(M_MMAP_THRESHOLD, keep ? 256 << 20 : 128 << 10) != 1 &&
      mallopt(M_MMAP_THRESHOLD, keep ? 32 << 20 : 128 << 10) != 1)
    return;
  mallopt(M_TRIM_THRESHOLD, keep ? 1 << 30 : 128 << 10);
}

TouchRates touch_rates(std::size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return {};
  madvise(p, bytes, MADV_HUGEPAGE);  // as glibc.malloc.hugetlb=1 asks for the heap; ignored where THP is off
  auto rate = [&](int fill) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memset(p, fill, bytes);
    asm volatile("" : : "r"(p) : "memory");  // the writes must happen
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return s > 0 ? static_cast<double>(bytes) / s : 0.0;
  };
  TouchRates r;
  r.first = rate(1);
  r.again = rate(2);
  munmap(p, bytes);
  return r;
}

std::uint64_t available_memory_bytes() {
  std::ifstream info("/proc/meminfo");
  std::string key, unit;
  std::uint64_t kib = 0;
  while (info >> key >> kib) {
    std::getline(info, unit);
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

void refuse_if_over_memory(double predicted_bytes, const std::string& what, const std::string& hint, double limit_bytes) {
  const double available = static_cast<double>(available_memory_bytes());
  const auto gib = [](double b) { return format_number(b / (1024.0 * 1024 * 1024), "%.1f") + " GiB"; };
  if (limit_bytes > 0 && predicted_bytes > limit_bytes && (available <= 0 || limit_bytes < available))
    throw Error(ErrorKind::unsupported, what + " needs about " + gib(predicted_bytes) + ", more than the " +
                                            gib(limit_bytes) + " it may use" +
                                            (available > 0 ? " (this machine has " + gib(available) + " available)" : "") +
                                            "; " + hint);
  if (available <= 0 || predicted_bytes <= available) return;
  throw Error(ErrorKind::unsupported, what + " needs about " + gib(predicted_bytes) + ", more than the " + gib(available) +
                                          " this machine has available; " + hint);
}

}  // namespace shardlab
