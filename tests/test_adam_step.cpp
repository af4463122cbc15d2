// harness/models/adam_step.cpp: a user's parameters, gradients and moments read by their names
// (each wrong file one sentence), and one step against Adam's formula written here: at step 1
// w - lr g / (|g| + eps); at step 3 from given moments, Kingma and Ba's update with beta^3.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "core/error.hpp"
#include "harness/models/adam_step.hpp"

using namespace shardlab;

namespace {

NamedArrays arrays(const std::vector<std::pair<std::string, Tensor>>& named) {
  NamedArrays a;
  a.source = "s.npz";
  for (const auto& [name, t] : named) a.arrays[name] = NpyArray{t, NpyType::float64};
  return a;
}

std::string error_of(const std::vector<std::pair<std::string, Tensor>>& named, int step = 1) {
  try {
    adam_state_of(arrays(named), step);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_SUITE("adam_step") {
  TEST_CASE("adam_state_of: NAME with dNAME, m/NAME and v/NAME; the rest listed; a wrong file is refused") {
    const Tensor w = Tensor({1.0, 2.0}), g = Tensor({0.5, -1.0});
    std::vector<std::string> unused;
    const auto s = adam_state_of(arrays({{"W", w}, {"dW", g}, {"b", w}, {"db", g}, {"m/b", g}, {"v/b", w},
                                         {"ref/y", w}}), 1, &unused);
    REQUIRE(s.size() == 2);
    CHECK(s[0].name == "W");
    CHECK(s[0].m == Tensor({0.0, 0.0}));  // step 1: zero moments
    CHECK(s[1].v == w);
    CHECK(unused == std::vector<std::string>{"ref/y"});
    CHECK(error_of({{"W", w}}) == "s.npz holds no parameter NAME with its gradient dNAME (it holds W)");
    CHECK(error_of({{"W", w}, {"dW", g}}, 2) ==
          "s.npz holds no moments m/W and v/W; at --step 2 Adam needs them (they start at 0 only at step 1)");
    CHECK(error_of({{"W", w}, {"dW", g}, {"m/W", g}}, 2).find("holds m/W but not v/W") != std::string::npos);
    CHECK(error_of({{"W", w}, {"dW", Tensor({1.0})}}) == "s.npz:dW.npy has shape (1,); its parameter W has (2,)");
    CHECK(error_of({{"W", w}, {"dW", g}, {"m/W", g}, {"v/W", g}}).find("holds a negative value") != std::string::npos);
    CHECK(error_of({{"W", w}, {"dW", g}, {"m/B", g}}).find("is a moment of B") != std::string::npos);
    CHECK(error_of({{"W", w}, {"dW", Tensor({NAN, 1.0})}}) != "");
  }

  TEST_CASE("one step: step 1 moves by lr g / (|g| + eps); step 3 from given moments as the formula says") {
    const AdamParams p{0.1, 0.8, 0.9, 1e-3};
    std::vector<AdamTensor> s = {{"W", Tensor({1.0, -2.0}), Tensor({0.5, -4.0}), Tensor({0.0, 0.0}), Tensor({0.0, 0.0})}};
    auto checks = adam_step_all(s, 1, p);
    REQUIRE(checks.size() == 1);
    CHECK(checks[0].pass);
    CHECK(s[0].w(0) == doctest::Approx(1.0 - 0.1 * 0.5 / (0.5 + 1e-3)).epsilon(1e-14));
    CHECK(s[0].w(1) == doctest::Approx(-2.0 + 0.1 * 4.0 / (4.0 + 1e-3)).epsilon(1e-14));
    CHECK(s[0].m(1) == doctest::Approx(0.2 * -4.0).epsilon(1e-14));
    CHECK(s[0].v(1) == doctest::Approx(0.1 * 16.0).epsilon(1e-14));

    s = {{"W", Tensor({1.0}), Tensor({2.0}), Tensor({0.3}), Tensor({0.5})}};
    checks = adam_step_all(s, 3, p);
    CHECK(checks[0].pass);
    const double m = 0.8 * 0.3 + 0.2 * 2.0, v = 0.9 * 0.5 + 0.1 * 4.0;
    const double m_hat = m / (1 - 0.8 * 0.8 * 0.8), v_hat = v / (1 - 0.9 * 0.9 * 0.9);
    CHECK(s[0].w(0) == doctest::Approx(1.0 - 0.1 * m_hat / (std::sqrt(v_hat) + 1e-3)).epsilon(1e-14));
    const auto saved = adam_saved_arrays(s);
    REQUIRE(saved.size() == 3);
    CHECK(saved[1].first == "m/W");
    CHECK(saved[2].second(0) == doctest::Approx(v).epsilon(1e-14));
  }

  TEST_CASE("check_adam_params: each bad value names its flag") {
    const auto error = [](AdamParams p, int step) {
      try {
        check_adam_params(p, step);
      } catch (const Error& e) {
        return std::string(e.what());
      }
      return std::string();
    };
    CHECK(error(AdamParams{}, 1).empty());
    CHECK(error(AdamParams{}, 0).rfind("--step is 0", 0) == 0);
    CHECK(error(AdamParams{}, kAdamMaxStep + 1).rfind("--step", 0) == 0);
    CHECK(error(AdamParams{-1, 0.9, 0.999, 1e-8}, 1).rfind("--lr is -1", 0) == 0);
    CHECK(error(AdamParams{0.1, 1.0, 0.999, 1e-8}, 1).rfind("--beta1 is 1", 0) == 0);
    CHECK(error(AdamParams{0.1, 0.9, NAN, 1e-8}, 1).rfind("--beta2", 0) == 0);
    CHECK(error(AdamParams{0.1, 0.9, 0.999, 0}, 1).rfind("--eps is 0", 0) == 0);
  }
}
