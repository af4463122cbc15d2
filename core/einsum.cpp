#include "core/einsum.hpp"

#include <algorithm>
#include <cctype>

#include <xtensor/xmanipulation.hpp>

#include "core/error.hpp"
#include "core/gemm.hpp"
#include "core/named.hpp"
#include "core/text.hpp"
#include "core/trace.hpp"

namespace shardlab {

namespace {

bool has(const std::string& s, char c) { return s.find(c) != std::string::npos; }

std::string check_letters(const std::string& part, const std::string& what, const std::string& whole) {
  std::string letters = trim(part);
  for (std::size_t i = 0; i < letters.size(); ++i) {
    const char c = letters[i];
    if (!std::isalpha(static_cast<unsigned char>(c)))
      throw Error(ErrorKind::parse, "einsum '" + whole + "': " + what + " has '" + std::string(1, c) +
                                        "'; use one letter per dim, like ik,kj->ij");
    if (letters.find(c) != i)
      throw Error(ErrorKind::unsupported, "einsum '" + whole + "': letter " + std::string(1, c) + " appears twice in " +
                                              what + "; diagonals and traces are not contractions of two operands");
  }
  return letters;
}

// Letters of `s` kept by `keep`, in the order of `s`.
template <class Pred>
std::string select(const std::string& s, Pred keep) {
  std::string out;
  for (char c : s)
    if (keep(c)) out += c;
  return out;
}

// Positions of `letters` in `dims`, for xt::transpose.
std::vector<std::size_t> positions(const std::string& letters, const std::string& dims) {
  std::vector<std::size_t> p;
  for (char c : letters) p.push_back(dims.find(c));
  return p;
}

bool identity(const std::vector<std::size_t>& perm) {
  for (std::size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != i) return false;
  return true;
}

// `t` with its dims in the order `perm`, as a contiguous row-major array.
template <class T>
xt::xarray<T> permuted(const xt::xarray<T>& t, const std::vector<std::size_t>& perm) {
  if (identity(perm)) return t;
  return xt::transpose(t, perm);
}

std::size_t product(const std::string& letters, const DimSizes& sizes) {
  std::size_t n = 1;
  for (char c : letters) n *= sizes.at(c);
  return n;
}

}  // namespace

Einsum Einsum::parse(const std::string& raw) {
  const std::string text = trim(raw);
  Einsum eq;
  std::string inputs = text;
  const auto arrow = text.find("->");
  const bool explicit_out = arrow != std::string::npos;
  if (explicit_out) {
    inputs = text.substr(0, arrow);
    eq.out = check_letters(text.substr(arrow + 2), "the output", text);
  }
  const auto parts = split(inputs, ',');
  if (parts.size() != 2)
    throw Error(ErrorKind::parse, "einsum '" + text + "' has " + std::to_string(parts.size()) +
                                      " operands; shardlab contracts exactly two, as in ik,kj->ij");
  eq.a = check_letters(parts[0], "operand A", text);
  eq.b = check_letters(parts[1], "operand B", text);
  if (eq.a.empty() || eq.b.empty())
    throw Error(ErrorKind::parse, "einsum '" + text + "' has an operand with no dims; write one letter per dim");
  if (!explicit_out) {
    std::string once;
    for (char c : eq.a + eq.b)
      if (has(eq.a, c) != has(eq.b, c)) once += c;
    std::sort(once.begin(), once.end());
    eq.out = once;
  }
  for (char c : eq.out)
    if (!has(eq.a, c) && !has(eq.b, c))
      throw Error(ErrorKind::parse, "einsum '" + text + "': output letter " + std::string(1, c) +
                                        " is in neither operand");
  for (char c : eq.a + eq.b)
    if (has(eq.a, c) != has(eq.b, c) && !has(eq.out, c))
      throw Error(ErrorKind::unsupported, "einsum '" + text + "': letter " + std::string(1, c) + " is only in " +
                                              (has(eq.a, c) ? "A" : "B") +
                                              " and not in the output; sum it out of that operand first");
  return eq;
}

std::string Einsum::text() const { return a + "," + b + "->" + out; }

std::string Einsum::batch() const {
  return select(a, [&](char c) { return has(b, c) && has(out, c); });
}
std::string Einsum::contracted() const {
  return select(a, [&](char c) { return has(b, c) && !has(out, c); });
}
std::string Einsum::a_free() const {
  return select(a, [&](char c) { return !has(b, c); });
}
std::string Einsum::b_free() const {
  return select(b, [&](char c) { return !has(a, c); });
}

DimSizes Einsum::sizes(const Shape& a_shape, const Shape& b_shape) const {
  DimSizes s;
  auto read = [&](const std::string& letters, const Shape& shape, const std::string& name) {
    if (letters.size() != shape.size())
      throw Error(ErrorKind::rank_mismatch, "einsum " + text() + " gives " + name + " " +
                                                std::to_string(letters.size()) + " dims (" + letters + "), but " +
                                                name + " has shape " + shape_text(shape));
    for (std::size_t i = 0; i < letters.size(); ++i) {
      auto [it, fresh] = s.emplace(letters[i], shape[i]);
      if (!fresh && it->second != shape[i])
        throw Error(ErrorKind::rank_mismatch, "dim " + std::string(1, letters[i]) + " has size " +
                                                  std::to_string(it->second) + " in A but " +
                                                  std::to_string(shape[i]) + " in B");
    }
  };
  read(a, a_shape, "A");
  read(b, b_shape, "B");
  return s;
}

DimSizes parse_dim_sizes(const std::string& text) {
  DimSizes s;
  if (trim(text).empty()) return s;
  for (const auto& part : split(text, ',')) {
    const auto kv = split(part, '=');
    const std::string name = kv.empty() ? "" : trim(kv[0]);
    if (kv.size() != 2 || name.size() != 1 || !std::isalpha(static_cast<unsigned char>(name[0])))
      throw Error(ErrorKind::parse, "dims entry '" + trim(part) + "' is not of the form letter=size (as in b=8,s=4)");
    if (s.count(name[0])) throw Error(ErrorKind::parse, "dims give letter " + name + " twice");
    s[name[0]] = static_cast<std::size_t>(parse_positive(trim(kv[1]), "dim " + name));
  }
  return s;
}

Shape shape_for(const std::string& letters, const DimSizes& sizes) {
  Shape shape;
  for (char c : letters) {
    auto it = sizes.find(c);
    if (it == sizes.end())
      throw Error(ErrorKind::parse, "no size for dim " + std::string(1, c) + "; give it like --dims " +
                                        std::string(1, c) + "=8");
    shape.push_back(it->second);
  }
  return shape;
}

namespace {

// An operand's dims as [batch, rows, cols] of a row-major buffer: the tensor itself when its dims
// are already in that order, or in the order [batch, cols, rows] (then gemm's transpose flag reads
// it), else a permuted copy in the first order.
template <class T>
struct GemmOperand {
  xt::xarray<T> copy;
  const T* data = nullptr;
  bool trans = false;
};

template <class T>
GemmOperand<T> gemm_operand(const xt::xarray<T>& x, const std::string& letters, const std::string& bat,
                            const std::string& rows, const std::string& cols) {
  GemmOperand<T> g;
  if (identity(positions(bat + rows + cols, letters))) {
    g.data = x.data();
  } else if (identity(positions(bat + cols + rows, letters))) {
    g.data = x.data();
    g.trans = true;
  } else {
    g.copy = permuted(x, positions(bat + rows + cols, letters));
    g.data = g.copy.data();
  }
  return g;
}

}  // namespace

template <class T>
xt::xarray<T> contract(const Einsum& eq, const xt::xarray<T>& a, const xt::xarray<T>& b) {
  TraceSpan span("einsum", [&] { return eq.text() + " " + shape_text(shape_of(a)) + " x " + shape_text(shape_of(b)); });
  const DimSizes s = eq.sizes(shape_of(a), shape_of(b));
  const std::string bat = eq.batch(), con = eq.contracted(), fa = eq.a_free(), fb = eq.b_free();
  const std::size_t nb = product(bat, s), m = product(fa, s), k = product(con, s), n = product(fb, s);
  // A as [batch, M, K] and B as [batch, K, N]: read in place (transposed by BLAS flag when stored
  // [batch, K, M] or [batch, N, K]); only other orders are copied.
  const GemmOperand<T> ga = gemm_operand(a, eq.a, bat, fa, con), gb = gemm_operand(b, eq.b, bat, con, fb);
  xt::xarray<T> r = xt::empty<T>(Shape{nb * m * n});
  batched_gemm(nb, m, n, k, ga.data, ga.trans, gb.data, gb.trans, r.data());
  // r is [batch..., free_A..., free_B...]; move its dims into the output's order.
  const std::string have = bat + fa + fb;
  r.reshape(shape_for(have, s));
  const auto po = positions(eq.out, have);
  if (identity(po)) return r;
  return permuted(r, po);
}

template xt::xarray<double> contract<double>(const Einsum&, const xt::xarray<double>&, const xt::xarray<double>&);
template xt::xarray<float> contract<float>(const Einsum&, const xt::xarray<float>&, const xt::xarray<float>&);

// bfloat16: operands widened to float32, products accumulated in float32 (sgemm), the result
// rounded back to bfloat16 once, as mixed-precision hardware does.
template <>
xt::xarray<bfloat16> contract<bfloat16>(const Einsum& eq, const xt::xarray<bfloat16>& a,
                                        const xt::xarray<bfloat16>& b) {
  return converted<bfloat16>(contract(eq, converted<float>(a), converted<float>(b)));
}

Tensor contract(const Einsum& eq, const Tensor& a, const Tensor& b, DType as) {
  switch (as) {
    case DType::float64: return contract(eq, a, b);
    case DType::float32: return converted<double>(contract(eq, converted<float>(a), converted<float>(b)));
    case DType::bfloat16:
      return converted<double>(contract(eq, converted<bfloat16>(a), converted<bfloat16>(b)));
  }
  return contract(eq, a, b);
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  static const Einsum eq = Einsum::parse("ik,kj->ij");
  return contract(eq, a, b);
}

double contraction_flops(const Einsum& eq, const Shape& a_shape, const Shape& b_shape) {
  const DimSizes s = eq.sizes(a_shape, b_shape);
  double f = 2;
  for (const auto& kv : s) f *= static_cast<double>(kv.second);
  return f;
}

Tensor reference_einsum(const Einsum& eq, const Tensor& a, const Tensor& b) {
  eq.sizes(shape_of(a), shape_of(b));  // checks ranks and sizes
  auto names = [](const std::string& letters) {
    std::vector<std::string> v;
    for (char c : letters) v.emplace_back(1, c);
    return v;
  };
  // A[i,k] * B[k,j] by name is the [i,k,j] table of every product; summing k leaves C[i,j].
  NamedTensor t = named_mul({names(eq.a), a}, {names(eq.b), b});
  for (char c : eq.contracted()) t = named_sum(t, std::string(1, c));
  std::vector<std::size_t> perm;
  for (char c : eq.out) perm.push_back(t.dim(std::string(1, c)));
  if (perm.empty()) return t.data;
  return permuted(t.data, perm);
}

}  // namespace shardlab
