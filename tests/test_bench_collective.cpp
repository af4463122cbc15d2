// harness/bench/bench_collective.cpp and the four collectives that fill it (all_reduce.cpp,
// all_gather.cpp, reduce_scatter.cpp, all_to_all.cpp): each one's expected output formula against
// the collective done by hand on its input formula (sums, concatenation, slices, a transpose of
// blocks), for groups of 1 to 5 in each pattern; count_wrong finds every element of a shifted result.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "harness/bench/bench_collective.hpp"

using namespace shardlab;

namespace {

// Member p's output of `op` over the inputs `in` (one per member), done by hand.
std::vector<double> by_hand(const std::string& op, const std::vector<xt::xarray<double>>& in, int p) {
  const std::size_t n = in.size(), len = in[0].size(), c = op == "all_gather" ? len : len / n;
  std::vector<double> out;
  if (op == "all_reduce" || op == "reduce_scatter") {
    const std::size_t from = op == "all_reduce" ? 0 : std::size_t(p) * c, to = op == "all_reduce" ? len : from + c;
    for (std::size_t i = from; i < to; ++i) {
      double sum = 0;
      for (std::size_t q = 0; q < n; ++q) sum += in[q](i);
      out.push_back(sum);
    }
  } else if (op == "all_gather") {
    for (std::size_t q = 0; q < n; ++q) out.insert(out.end(), in[q].begin(), in[q].end());
  } else {  // all_to_all: block p of every member, in member order
    for (std::size_t q = 0; q < n; ++q)
      for (std::size_t j = 0; j < c; ++j) out.push_back(in[q](std::size_t(p) * c + j));
  }
  return out;
}

}  // namespace

TEST_CASE("bench collectives' formulas: expected outputs equal each collective done by hand on the inputs") {
  REQUIRE(bench_collective_list().size() == 4);
  for (const BenchCollective* op : bench_collective_list())
    for (DType t : {DType::float64, DType::bfloat16})
      for (int n = 1; n <= 5; ++n)
        for (int variant : {0, 1}) {
          const Pattern pat = pattern_of(t);
          const std::size_t count = std::size_t(n) * 41;  // past every period (13, 16, 100 only in part)
          std::vector<xt::xarray<double>> in;
          for (int p = 0; p < n; ++p) in.push_back(bench_input<double>(*op, p, n, count, variant, pat));
          for (int p = 0; p < n; ++p) {
            CAPTURE(op->name);
            CAPTURE(n);
            CAPTURE(p);
            CAPTURE(variant);
            const std::vector<double> out = by_hand(op->name, in, p);
            const double shift = shift_of(*op, n, variant);
            CHECK(count_wrong(*op, p, n, count, out.data(), out.size(), shift, pat) == 0);
            CHECK(count_wrong(*op, p, n, count, out.data(), out.size(), shift + 1, pat) == out.size());
            CHECK(count_wrong(*op, p, n, count, out.data(), out.size() - 1, shift, pat) == out.size());
          }
        }
}

TEST_CASE("bench collectives' bus factors: 2(n-1)/n for all_reduce, (n-1)/n for the others, 0 alone") {
  CHECK(all_reduce_bench().bus_factor(4) == doctest::Approx(1.5));
  CHECK(all_gather_bench().bus_factor(4) == doctest::Approx(0.75));
  CHECK(reduce_scatter_bench().bus_factor(8) == doctest::Approx(0.875));
  CHECK(all_to_all_bench().bus_factor(2) == doctest::Approx(0.5));
  CHECK(all_reduce_bench().bus_factor(1) == 0);
  CHECK(find_bench_collective("broadcast") == nullptr);
  CHECK(find_bench_collective("all_to_all") == &all_to_all_bench());
}
