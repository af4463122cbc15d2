#include "harness/models/adam_check.hpp"

#include <algorithm>
#include <cmath>

#include "core/dtype.hpp"

namespace shardlab {

void plain_adam(std::vector<double>& w, std::vector<double>& m, std::vector<double>& v, const Tensor& g, int t,
                const AdamParams& p) {
  for (std::size_t i = 0; i < w.size(); ++i) {
    const double gi = g.data()[i];
    m[i] = p.beta1 * m[i] + (1 - p.beta1) * gi;
    v[i] = p.beta2 * v[i] + (1 - p.beta2) * gi * gi;
    double b1 = 1, b2 = 1;  // beta^t by repeated products, not pow
    for (int s = 0; s < t; ++s) b1 *= p.beta1, b2 *= p.beta2;
    const double m_hat = m[i] / (1 - b1), v_hat = v[i] / (1 - b2);
    w[i] -= p.lr * m_hat / (std::sqrt(v_hat) + p.eps);
  }
}

Verdict adam_against_plain(const std::string& weight, const std::vector<double>& plain, const Tensor& w, int steps) {
  Tensor want = xt::zeros<double>({plain.size()}), got = want;
  double tol = 0;
  for (std::size_t i = 0; i < plain.size(); ++i) {
    want(i) = plain[i];
    got(i) = w.data()[i];
    tol = std::max(tol, 16.0 * steps * unit_roundoff(DType::float64) * (std::fabs(plain[i]) + 1.0));
  }
  return compare("Adam's step on " + std::to_string(plain.size()) + " elements of " + weight +
                     " against Adam written plainly",
                 got, want, tol);
}

}  // namespace shardlab
