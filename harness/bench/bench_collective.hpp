// One collective of `shardlab bench collectives`, as nccl-tests' struct testColl: how many chunks a
// member sends, the formulas of its inputs and of its expected outputs, and the call of ours.
// all_reduce.cpp, all_gather.cpp, reduce_scatter.cpp and all_to_all.cpp each fill one; bench.cpp
// times them all through this interface.
//
// Inputs and expected values come from formulas, never from the code under test. Member p of a
// group of n, c = count/n; every value is a small integer, so every sum is exact:
//   all_reduce      in[i] = p + i%a              out[i] = n(n-1)/2 + n*(i%a)
//   all_gather      in[j] = p + j%13 (c of them)  out[q*c + j] = q + j%13
//   reduce_scatter  in[i] = p + i%a (count)       out[j] = n(n-1)/2 + n*((p*c + j)%a)
//   all_to_all      in[i] = s*p + i%s             out[q*c + j] = s*q + (p*c + j)%s
// with a = 13 and s = 100 in float32 and float64 (exact far beyond any group here). bfloat16 holds
// integers exactly only up to 256, so there a = 5 and s = 16: every partial and final sum stays at
// most n(n-1)/2 + 4n, and every all_to_all value under 16n, both within 256 for n <= 15.
#pragma once
#include <cstddef>
#include <string>
#include <tuple>
#include <vector>

#include "collectives/runtime.hpp"
#include "core/dtype.hpp"
#include "core/tensor.hpp"

namespace shardlab {

struct Pattern {
  std::size_t a = 13, s = 100;
};
Pattern pattern_of(DType t);

// `blocks` blocks of `length` elements: element j of block q is
//   base + q * block_step + ((start + j) % period) * scale
// (every formula above is one of these).
struct Ramp {
  std::size_t blocks = 1, length = 0;
  double base = 0, block_step = 0;
  std::size_t start = 0, period = 1;
  double scale = 1;
  std::size_t size() const { return blocks * length; }
};

template <class T>
using OursCall = xt::xarray<T> (*)(Device&, const xt::xarray<T>&, const std::vector<std::string>&);

struct BenchCollective {
  std::string name;
  // Its output adds the group's inputs: an input shifted by v shifts the output by n v (else by v).
  bool sums = false;
  // Chunks of count/n one member of a group of n sends: 2(n-1) for all_reduce, n-1 for the others.
  std::size_t (*chunks_sent)(int n) = nullptr;
  Ramp (*input)(int p, int n, std::size_t count, Pattern pat) = nullptr;
  Ramp (*expected)(int p, int n, std::size_t count, Pattern pat) = nullptr;
  // Ours, in each element type the benchmark moves (one generic lambda converts to all three).
  std::tuple<OursCall<float>, OursCall<double>, OursCall<bfloat16>> ours;
  template <class T>
  OursCall<T> ours_of() const {
    return std::get<OursCall<T>>(ours);
  }
  // nccl-tests' bus factor: busbw = algbw * chunks_sent(n) / n.
  double bus_factor(int n) const { return n <= 1 ? 0 : double(chunks_sent(n)) / n; }
};

const BenchCollective& all_reduce_bench();
const BenchCollective& all_gather_bench();
const BenchCollective& reduce_scatter_bench();
const BenchCollective& all_to_all_bench();
// The four, in the table's order; and one by name (nullptr when none has it).
const std::vector<const BenchCollective*>& bench_collective_list();
const BenchCollective* find_bench_collective(const std::string& name);

// The input of member p, shifted by `variant` (MPICH's calls alternate between two inputs).
template <class T>
xt::xarray<T> bench_input(const BenchCollective& op, int p, int n, std::size_t count, int variant, Pattern pat) {
  const Ramp r = op.input(p, n, count, pat);
  xt::xarray<T> t = xt::empty<T>(Shape{r.size()});
  T* d = t.data();
  for (std::size_t q = 0, k = 0; q < r.blocks; ++q)
    for (std::size_t j = 0, m = r.start % r.period; j < r.length; ++j, ++k) {
      d[k] = element_cast<T>(r.base + double(q) * r.block_step + double(m) * r.scale + variant);
      if (++m == r.period) m = 0;
    }
  return t;
}

// What the input variant adds to every expected value.
inline double shift_of(const BenchCollective& op, int n, int variant) { return (op.sums ? n : 1) * double(variant); }

// Wrong elements among the `got` elements at `d` (a wrong length: every expected element is wrong);
// `perturb` is added to every expected value (the input variant's shift, and 1 for --perturb-expected).
// It runs after every timed call, so it walks the blocks with running remainders: no division or
// modulo per element. `!(a == b)`: NaN (a call that wrote nothing) counts as wrong.
template <class T>
std::size_t count_wrong(const BenchCollective& op, int p, int n, std::size_t count, const T* d, std::size_t got,
                        double perturb, Pattern pat) {
  const Ramp r = op.expected(p, n, count, pat);
  if (got != r.size()) return r.size();
  std::size_t wrong = 0;
  for (std::size_t q = 0, k = 0; q < r.blocks; ++q) {
    const double base = r.base + double(q) * r.block_step + perturb;
    for (std::size_t j = 0, m = r.start % r.period; j < r.length; ++j, ++k) {
      wrong += !(element_cast<double>(d[k]) == base + double(m) * r.scale);
      if (++m == r.period) m = 0;
    }
  }
  return wrong;
}

}  // namespace shardlab
