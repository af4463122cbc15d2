// Einsum: a contraction of two tensors over named dims, one letter per dim: "ik,kj->ij",
// "bsm,mh->bsh". Each letter is one of
//   batch       in A, B and the output   (b in "bij,bjk->bik")   kept; one product per index
//   contracted  in A and B, not output   (k in "ik,kj->ij")      summed over
//   free of A   in A and the output      (i)                     an "outer" dim of A
//   free of B   in B and the output      (j)                     an "outer" dim of B
// A letter in one operand only that is not in the output would be a reduction of that operand
// alone; shardlab asks for it to be written separately.
//
// contract() runs on BLAS: it reads A as [batch, free_A, contracted] and B as
// [batch, contracted, free_B] (in place, or transposed by BLAS flag, else a permuted copy), so the
// einsum becomes `batch` matrix products [M,K] x [K,N].
// reference_einsum() is the check, written the Mesh-TensorFlow way (article 000): multiply with
// dims matched by name (broadcasting), then sum the contracted names. No BLAS involved.
#pragma once
#include <map>
#include <string>

#include "core/tensor.hpp"

namespace shardlab {

using DimSizes = std::map<char, std::size_t>;  // letter -> size

struct Einsum {
  std::string a, b, out;  // letters of A, B and the output, in dim order

  // "ik,kj->ij"; without "->" the output is the letters that appear once, sorted (numpy's rule).
  static Einsum parse(const std::string& text);
  std::string text() const;  // "ik,kj->ij"

  std::string batch() const;       // in the order of A
  std::string contracted() const;  // in the order of A
  std::string a_free() const;
  std::string b_free() const;

  // Letter sizes read from the operand shapes; Error(rank_mismatch) when a shape's rank differs
  // from its letters or a shared letter has two sizes.
  DimSizes sizes(const Shape& a_shape, const Shape& b_shape) const;
};

// "b=8,s=4,m=16,h=32" -> {b:8, s:4, m:16, h:32}.
DimSizes parse_dim_sizes(const std::string& text);
// The shape of a tensor with `letters`; Error(parse) naming a letter that has no size.
Shape shape_for(const std::string& letters, const DimSizes& sizes);

// The local contraction: one BLAS gemm per batch index (core/gemm.hpp), in the operands' own type:
// double (dgemm), float (sgemm), bfloat16 (widened to float, sgemm, rounded back). Instantiated
// for those three.
template <class T>
xt::xarray<T> contract(const Einsum& eq, const xt::xarray<T>& a, const xt::xarray<T>& b);
// Operands held as double, computed as type `as` computes: rounded to `as`, multiplied in its
// arithmetic, the result rounded to `as` and returned as double (lessons' double blocks).
Tensor contract(const Einsum& eq, const Tensor& a, const Tensor& b, DType as);
Tensor matmul(const Tensor& a, const Tensor& b);  // contract("ik,kj->ij")
// Floating-point operations of contract() on operands of these shapes: 2 * product of every
// letter's size (one multiply and one add per term of every sum).
double contraction_flops(const Einsum& eq, const Shape& a_shape, const Shape& b_shape);

// The unsharded reference: broadcast multiply by name, then sum over the contracted names.
// It materialises the full product (every letter's size multiplied), so keep it for checks.
Tensor reference_einsum(const Einsum& eq, const Tensor& a, const Tensor& b);

}  // namespace shardlab
