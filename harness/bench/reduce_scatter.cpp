// ReduceScatter in the collectives benchmark: member p gets slice p of the sum of all inputs.
//   in[i] = p + i%a (count)    out[j] = n(n-1)/2 + n*((p*c + j)%a), c = count/n    sends n-1 chunks of c
#include "collectives/collectives.hpp"
#include "harness/bench/bench_collective.hpp"

namespace shardlab {

const BenchCollective& reduce_scatter_bench() {
  static const BenchCollective c = [] {
    BenchCollective b;
    b.name = "reduce_scatter";
    b.sums = true;
    b.chunks_sent = [](int n) { return std::size_t(n - 1); };
    b.input = [](int p, int, std::size_t count, Pattern pat) { return Ramp{1, count, double(p), 0, 0, pat.a, 1}; };
    b.expected = [](int p, int n, std::size_t count, Pattern pat) {
      return Ramp{1, count / n, n * (n - 1) / 2.0, 0, std::size_t(p) * (count / n), pat.a, double(n)};
    };
    auto ours = [](Device& dev, const auto& in, const std::vector<std::string>& axes) {
      return reduce_scatter(dev, in, axes, 0, "bench");
    };
    b.ours = {ours, ours, ours};
    return b;
  }();
  return c;
}

}  // namespace shardlab
