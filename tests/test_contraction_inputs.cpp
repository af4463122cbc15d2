// harness/cli/contraction_inputs.cpp: the operands of shardlab matmul and einsum. Random inputs are
// shapes only until fill_random (--plan-only allocates nothing); sizes the equation lacks are
// refused; a value or, from files, a product past the element type's range is refused with one
// sentence naming the type, and one that fits is not.
#include <doctest/doctest.h>

#include <functional>
#include <string>

#include <xtensor/xsort.hpp>

#include "core/einsum.hpp"
#include "core/error.hpp"
#include "harness/cli/contraction_inputs.hpp"

using namespace shardlab;

namespace {
std::string parse_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.kind() == ErrorKind::parse ? e.what() : "not a parse error: " + std::string(e.what());
  }
  return "no error";
}
}  // namespace

TEST_SUITE("contraction_inputs") {
  TEST_CASE("random inputs: the shapes the sizes give, filled only by fill_random, integers in [-4, 4]") {
    const Einsum eq = Einsum::parse("ik,kj->ij");
    ContractionInputs in = read_inputs(eq, {}, false, "", "", 7);
    CHECK(in.shape_a == Shape{4, 16});  // a matmul's default 4,16,4
    CHECK(in.shape_b == Shape{16, 4});
    CHECK(in.a.dimension() == 0);
    CHECK_FALSE(in.from_files());
    fill_random(in, 7);
    CHECK(in.a.shape() == std::vector<std::size_t>{4, 16});
    CHECK(xt::amax(xt::abs(in.a))() <= 4);
    CHECK(in.a == xt::round(in.a));
    const Einsum bmm = Einsum::parse("bmk,bkn->bmn");
    const ContractionInputs sized = read_inputs(bmm, {{'b', 2}, {'m', 3}, {'k', 5}, {'n', 7}}, true, "", "", 1);
    CHECK(sized.shape_a == Shape{2, 3, 5});
    CHECK(sized.shape_b == Shape{2, 5, 7});
  }

  TEST_CASE("sizes the equation lacks, and an einsum with no sizes, are refused") {
    const Einsum eq = Einsum::parse("ik,kj->ij");
    CHECK(parse_error([&] { read_inputs(eq, {{'q', 3}}, true, "", "", 0); }) ==
          "--dims gives q=3, but ik,kj->ij has no dim q");
    CHECK(parse_error([&] { read_inputs(eq, {}, true, "", "", 0); }).find("give --dims") == 0);
  }

  TEST_CASE("round_inputs: a value or a product past the type's range is refused; one that fits is not") {
    const Einsum eq = Einsum::parse("ik,kj->ij");
    ContractionInputs in;
    in.source = "a.npy, b.npy";  // from files: the product is checked too
    in.a = Tensor(xt::ones<double>({2, 4}) * 1e30);
    in.b = Tensor(xt::ones<double>({4, 2}) * 1e30);  // each element of C: 4 x 1e60
    CHECK(in.from_files());
    ContractionInputs copy = in;
    CHECK(parse_error([&] { round_inputs(copy, eq, DType::float32, 4, true, "C"); })
              .find("the product of a.npy, b.npy overflows float32 (some element of C rounds to inf)") == 0);
    copy = in;
    CHECK(parse_error([&] { round_inputs(copy, eq, DType::float64, 4, true, "C"); }) == "no error");
    copy = in;
    copy.b = Tensor(xt::ones<double>({4, 2}) * 1e-30);
    CHECK(parse_error([&] { round_inputs(copy, eq, DType::float32, 4, false, "C"); }) == "no error");
    copy = in;
    copy.a(0, 0) = 1e300;  // rounds to inf in float32 itself
    CHECK(parse_error([&] { round_inputs(copy, eq, DType::float32, 4, true, "C"); })
              .find("an input value in a.npy, b.npy is too large for float32") == 0);
    // Random inputs (small integers) are rounded, not multiplied to see.
    ContractionInputs random = read_inputs(eq, {}, false, "", "", 3);
    fill_random(random, 3);
    CHECK(parse_error([&] { round_inputs(random, eq, DType::bfloat16, 16, true, "C"); }) == "no error");
  }
}
