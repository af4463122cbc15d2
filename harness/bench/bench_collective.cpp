// The benchmark's collectives in one list (harness/bench/bench_collective.hpp).
#include "harness/bench/bench_collective.hpp"

#include "harness/bench/bench.hpp"

namespace shardlab {

Pattern pattern_of(DType t) { return t == DType::bfloat16 ? Pattern{5, 16} : Pattern{}; }

const std::vector<const BenchCollective*>& bench_collective_list() {
  static const std::vector<const BenchCollective*> all = {&all_reduce_bench(), &all_gather_bench(),
                                                          &reduce_scatter_bench(), &all_to_all_bench()};
  return all;
}

const BenchCollective* find_bench_collective(const std::string& name) {
  for (const BenchCollective* c : bench_collective_list())
    if (c->name == name) return c;
  return nullptr;
}

double bus_factor(const std::string& op, int n) {
  if (n <= 1) return 0;
  if (op == "collective_permute") return 1.0;  // every device sends its whole block
  const BenchCollective* c = find_bench_collective(op);
  return c ? c->bus_factor(n) : 1.0;
}

std::size_t bytes_sent_per_device(const std::string& op, int n, std::size_t count, std::size_t element_bytes) {
  const BenchCollective* c = find_bench_collective(op);
  if (n <= 1 || !c) return 0;
  return c->chunks_sent(n) * (count / n) * element_bytes;
}

}  // namespace shardlab
