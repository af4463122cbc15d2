// What the options of `shardlab bench collectives` ask for: bytes with units, the sizes from
// --min to --max, and the collectives --ops names.
#include <cctype>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/text.hpp"
#include "harness/bench/bench.hpp"
#include "harness/bench/bench_collective.hpp"

namespace shardlab {

std::size_t parse_bytes(const std::string& text, const std::string& what) {
  std::size_t used = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(text, &used);
  } catch (...) {
    used = 0;
  }
  const std::string unit = used ? text.substr(used) : "?";
  const std::size_t scale = unit.empty() || unit == "B" ? 1
                            : unit == "K" || unit == "KiB" ? 1024
                            : unit == "M" || unit == "MiB" ? 1024 * 1024
                            : unit == "G" || unit == "GiB" ? std::size_t{1} << 30
                                                           : 0;
  if (!used || !scale || !number_syntax(text.substr(0, used), true).empty())
    throw Error(ErrorKind::parse, what + " is '" + text + "'; give bytes such as 4096, 64K, 16M or 1G");
  if (v > (std::size_t{1} << 50) / scale)
    throw Error(ErrorKind::parse, what + " is '" + text + "', more than 1 PiB; give bytes such as 4096, 64K, 16M or 1G");
  return v * scale;
}

std::vector<std::size_t> bench_sizes(const BenchOptions& o) {
  const std::size_t lo = parse_bytes(o.min, "--min"), hi = parse_bytes(o.max, "--max");
  if (o.factor < 2) throw Error(ErrorKind::parse, "--factor is " + std::to_string(o.factor) + "; use 2 or more");
  if (lo == 0 || lo > hi)
    throw Error(ErrorKind::parse, "--min (" + o.min + ") must be at least 1 byte and at most --max (" + o.max + ")");
  std::vector<std::size_t> out;
  for (std::size_t s = lo; s <= hi; s *= o.factor) out.push_back(s);
  return out;
}

std::vector<const BenchCollective*> bench_ops(const std::string& text) {
  std::vector<const BenchCollective*> ops;
  for (const auto& op : split(text, ',')) {
    const BenchCollective* c = find_bench_collective(op);
    if (!c) {
      std::vector<std::string> names;
      for (const BenchCollective* known : bench_collective_list()) names.push_back(known->name);
      throw Error(ErrorKind::parse, "--ops names '" + op + "'; use " + join(names, ","));
    }
    ops.push_back(c);
  }
  return ops;
}

}  // namespace shardlab
