#include "harness/cli/contraction_inputs.hpp"

#include <cmath>

#include <xtensor/xmath.hpp>
#include <xtensor/xsort.hpp>

#include "core/error.hpp"

namespace shardlab {

ContractionInputs read_inputs(const Einsum& eq, DimSizes asked, bool einsum, const std::string& a_in,
                              const std::string& b_in, std::uint64_t seed) {
  ContractionInputs in;
  if (a_in.empty() != b_in.empty())
    throw Error(ErrorKind::parse, "give both --a-in and --b-in, or neither (then the inputs are random)");
  for (const auto& kv : asked)
    if (eq.a.find(kv.first) == std::string::npos && eq.b.find(kv.first) == std::string::npos)
      throw Error(ErrorKind::parse, "--dims gives " + std::string(1, kv.first) + "=" + std::to_string(kv.second) +
                                        ", but " + eq.text() + " has no dim " + std::string(1, kv.first));
  if (!a_in.empty()) {
    NpyArray a = load_npy(a_in), b = load_npy(b_in);
    refuse_non_finite(a_in, a.data);
    refuse_non_finite(b_in, b.data);
    const DimSizes got = eq.sizes(shape_of(a.data), shape_of(b.data));
    for (const auto& [letter, size] : asked)
      if (got.count(letter) && got.at(letter) != size)
        throw Error(ErrorKind::rank_mismatch, "the .npy inputs give dim " + std::string(1, letter) + " size " +
                                                  std::to_string(got.at(letter)) + ", but the command line says " +
                                                  std::to_string(size));
    in.a = std::move(a.data);
    in.b = std::move(b.data);
    in.shape_a = shape_of(in.a);
    in.shape_b = shape_of(in.b);
    in.type = std::max(a.type, b.type);  // the wider of the two (NpyType lists them narrowest first)
    in.source = a_in + ", " + b_in;
    return in;
  }
  if (asked.empty()) {
    if (einsum) throw Error(ErrorKind::parse, "give --dims (like b=8,s=4,m=16,h=32) or --a-in and --b-in");
    asked = {{'i', 4}, {'k', 16}, {'j', 4}};
  }
  in.shape_a = shape_for(eq.a, asked);
  in.shape_b = shape_for(eq.b, asked);
  in.source = "random integers in [-4, 4], seed " + std::to_string(seed);
  return in;
}

void fill_random(ContractionInputs& in, std::uint64_t seed) {
  if (in.a.dimension() > 0 || in.from_files()) return;  // a default xarray is a 0-d scalar
  in.a = random_integers(in.shape_a, seed, -4, 4);
  in.b = random_integers(in.shape_b, seed + 1, -4, 4);
}

void round_inputs(ContractionInputs& in, const Einsum& eq, DType dtype, std::size_t summed, bool broadcast,
                  const std::string& result) {
  in.a = rounded(in.a, dtype);
  in.b = rounded(in.b, dtype);
  for (const Tensor* t : {&in.a, &in.b})
    if (!xt::all(xt::isfinite(*t)))
      throw Error(ErrorKind::parse, "an input value in " + in.source + " is too large for " + dtype_name(dtype) +
                                        " (it rounds to inf); use --dtype float64 or smaller inputs");
  // Inputs from files may multiply past the type's range. Cheap first: |C_ij| <= max|a| max|b|
  // (terms per element); only when that bound passes the range is the product itself formed to see.
  if (!in.from_files()) return;
  const double bound = xt::amax(xt::abs(in.a))() * xt::amax(xt::abs(in.b))() * static_cast<double>(summed);
  if (std::isfinite(rounded(Tensor{bound}, dtype)(0))) return;
  const Tensor c = rounded(broadcast ? reference_einsum(eq, in.a, in.b) : contract(eq, in.a, in.b), dtype);
  if (!xt::all(xt::isfinite(c)))
    throw Error(ErrorKind::parse, "the product of " + in.source + " overflows " + dtype_name(dtype) +
                                      " (some element of " + result +
                                      " rounds to inf), so nothing could be checked; use smaller inputs" +
                                      (dtype == DType::float64 ? "" : " or --dtype float64"));
}

}  // namespace shardlab
