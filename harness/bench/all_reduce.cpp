// AllReduce in the collectives benchmark: every member gets the sum of all inputs.
//   in[i] = p + i%a        out[i] = n(n-1)/2 + n*(i%a)        sends 2(n-1) chunks of count/n
#include "collectives/collectives.hpp"
#include "harness/bench/bench_collective.hpp"

namespace shardlab {

const BenchCollective& all_reduce_bench() {
  static const BenchCollective c = [] {
    BenchCollective b;
    b.name = "all_reduce";
    b.sums = true;
    b.chunks_sent = [](int n) { return 2 * std::size_t(n - 1); };
    b.input = [](int p, int, std::size_t count, Pattern pat) { return Ramp{1, count, double(p), 0, 0, pat.a, 1}; };
    b.expected = [](int, int n, std::size_t count, Pattern pat) {
      return Ramp{1, count, n * (n - 1) / 2.0, 0, 0, pat.a, double(n)};
    };
    auto ours = [](Device& dev, const auto& in, const std::vector<std::string>& axes) {
      return all_reduce(dev, in, axes, "bench");
    };
    b.ours = {ours, ours, ours};
    return b;
  }();
  return c;
}

}  // namespace shardlab
