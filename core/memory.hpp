// How freed memory goes back to glibc's allocator. By default glibc maps blocks of a few MiB
// afresh, or trims freed heap back to the kernel, so a tensor of that size often pays a page fault
// per 4 KiB page on first touch; on this project's VMs such faults are slow. Devices allocate
// several such tensors every step, so every Runtime keeps freed memory for reuse; `shardlab bench
// memory` times an FFN training step both ways (docs/performance.md has its figures).
#pragma once
#include <cstdint>
#include <string>

namespace shardlab {

// keep = true: blocks up to 256 MiB (32 MiB where glibc caps it) come from the heap and freed memory
// stays mapped (up to 1 GiB of slack per process) for the next tensor. keep = false: glibc's default
// 128 KiB thresholds, but fixed (any mallopt turns off glibc's sliding threshold), for measuring
// the difference. Process-wide; call it before devices start.
void keep_freed_memory(bool keep = true);

// How fast this process writes memory it has just mapped (`first`: each page's first touch, the
// kernel's fault and zeroing and, under a hypervisor, the host backing the page) and the same
// memory once more (`again`), in bytes per second, one thread, `bytes` mapped with MADV_HUGEPAGE as
// the heap is (core/blas.cpp). Both 0 when the memory cannot be mapped. Measured on this project's
// VMs: 0.49-0.63 GB/s first (0.34 with 4 KiB pages), 15-26 GB/s again, so a run's fresh memory is
// a cost of its own.
struct TouchRates {
  double first = 0, again = 0;
};
TouchRates touch_rates(std::size_t bytes = std::size_t(128) << 20);

// The bytes this machine can still give (MemAvailable in /proc/meminfo, which counts reclaimable
// cache), or 0 when it cannot be read.
std::uint64_t available_memory_bytes();

// Refuses (Error(unsupported), one sentence) a run whose predicted memory exceeds what the machine
// has available, before anything is allocated: "<what> needs about 12.5 GiB, more than the 3.1 GiB
// this machine has available; <hint>". Returns silently when the estimate fits or is unknown.
// limit_bytes > 0: a command's own cap as well, for runs meant to take seconds ("..., more than the
// 1.0 GiB <what> may use (this machine has 21.9 GiB available); <hint>"), whichever is smaller.
void refuse_if_over_memory(double predicted_bytes, const std::string& what, const std::string& hint,
                           double limit_bytes = 0);

}  // namespace shardlab
