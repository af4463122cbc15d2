// AllGather in the collectives benchmark: every member gets all members' blocks, in member order.
//   in[j] = p + j%13 (c = count/n of them)    out[q*c + j] = q + j%13    sends n-1 chunks of c
#include "collectives/collectives.hpp"
#include "harness/bench/bench_collective.hpp"

namespace shardlab {

const BenchCollective& all_gather_bench() {
  static const BenchCollective c = [] {
    BenchCollective b;
    b.name = "all_gather";
    b.chunks_sent = [](int n) { return std::size_t(n - 1); };
    b.input = [](int p, int n, std::size_t count, Pattern) { return Ramp{1, count / n, double(p), 0, 0, 13, 1}; };
    b.expected = [](int, int n, std::size_t count, Pattern) {
      return Ramp{std::size_t(n), count / n, 0, 1, 0, 13, 1};
    };
    auto ours = [](Device& dev, const auto& in, const std::vector<std::string>& axes) {
      return all_gather(dev, in, axes, 0, "bench");
    };
    b.ours = {ours, ours, ours};
    return b;
  }();
  return c;
}

}  // namespace shardlab
