// AllToAll in the collectives benchmark: slice q of member p's input goes to member q, as block p.
//   in[i] = s*p + i%s    out[q*c + j] = s*q + (p*c + j)%s, c = count/n    sends n-1 chunks of c
#include "collectives/collectives.hpp"
#include "harness/bench/bench_collective.hpp"

namespace shardlab {

const BenchCollective& all_to_all_bench() {
  static const BenchCollective c = [] {
    BenchCollective b;
    b.name = "all_to_all";
    b.chunks_sent = [](int n) { return std::size_t(n - 1); };
    b.input = [](int p, int, std::size_t count, Pattern pat) {
      return Ramp{1, count, double(pat.s) * p, 0, 0, pat.s, 1};
    };
    b.expected = [](int p, int n, std::size_t count, Pattern pat) {
      return Ramp{std::size_t(n), count / n, 0, double(pat.s), std::size_t(p) * (count / n), pat.s, 1};
    };
    auto ours = [](Device& dev, const auto& in, const std::vector<std::string>& axes) {
      return all_to_all(dev, in, axes, 0, 0, "bench");
    };
    b.ours = {ours, ours, ours};
    return b;
  }();
  return c;
}

}  // namespace shardlab
