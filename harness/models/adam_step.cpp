#include "harness/models/adam_step.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/text.hpp"
#include "harness/models/adam_check.hpp"

namespace shardlab {

namespace {

std::string shape_words(const Tensor& t) {
  std::string out;
  for (std::size_t d : t.shape()) out += (out.empty() ? "" : ", ") + std::to_string(d);
  return "(" + out + (t.dimension() == 1 ? ",)" : ")");
}

// Array `name` of `files`, shaped as `like` (the parameter `param`) and finite.
Tensor companion(const NamedArrays& files, const std::string& name, const Tensor& like, const std::string& param) {
  const Tensor& t = files.arrays.at(name).data;
  if (shape_of(t) != shape_of(like))
    throw Error(ErrorKind::rank_mismatch, files.where(name) + " has shape " + shape_words(t) + "; its parameter " +
                                              param + " has " + shape_words(like));
  refuse_non_finite(files.where(name), t);
  return t;
}

}  // namespace

std::vector<AdamTensor> adam_state_of(const NamedArrays& files, int step, std::vector<std::string>* unused) {
  const auto& a = files.arrays;
  std::vector<AdamTensor> out;
  std::vector<std::string> left;
  for (const auto& [name, array] : a) {
    if (name.find('/') != std::string::npos || !a.count("d" + name)) continue;
    AdamTensor t;
    t.name = name;
    refuse_non_finite(files.where(name), array.data);
    t.w = array.data;
    t.g = companion(files, "d" + name, t.w, name);
    const bool has_m = a.count("m/" + name) > 0, has_v = a.count("v/" + name) > 0;
    if (has_m != has_v)
      throw Error(ErrorKind::io, files.source + " holds " + (has_m ? "m/" : "v/") + name + " but not " +
                                     (has_m ? "v/" : "m/") + name +
                                     "; give both of Adam's moments or, at --step 1, neither");
    if (!has_m && step > 1)
      throw Error(ErrorKind::io, files.source + " holds no moments m/" + name + " and v/" + name + "; at --step " +
                                     std::to_string(step) + " Adam needs them (they start at 0 only at step 1)");
    t.m = has_m ? companion(files, "m/" + name, t.w, name) : zeros_like(t.w);
    t.v = has_v ? companion(files, "v/" + name, t.w, name) : zeros_like(t.w);
    if (xt::any(t.v < 0.0))
      throw Error(ErrorKind::io, files.where("v/" + name) + " holds a negative value; v is a mean of squares");
    out.push_back(std::move(t));
  }
  for (const auto& [name, array] : a) {
    const auto slash = name.find('/');
    const std::string base = slash == std::string::npos ? name : name.substr(slash + 1);
    const bool moment = slash != std::string::npos && (name[0] == 'm' || name[0] == 'v') && slash == 1;
    const auto is = [&](const std::string& p) {
      return std::any_of(out.begin(), out.end(), [&](const AdamTensor& t) { return t.name == p; });
    };
    if (moment && !is(base))
      throw Error(ErrorKind::io, files.where(name) + " is a moment of " + base + ", and " + files.source +
                                     " holds no parameter " + base + " with its gradient d" + base);
    const bool gradient = name.size() > 1 && name[0] == 'd' && is(name.substr(1));
    if (!moment && !gradient && !is(name)) left.push_back(name);
  }
  if (out.empty())
    throw Error(ErrorKind::io, files.source + " holds no parameter NAME with its gradient dNAME (it holds " +
                                   join(left, ", ") + ")");
  if (unused) *unused = left;
  return out;
}

std::vector<AdamTensor> adam_state_generated(std::uint64_t seed, int step) {
  AdamTensor t;
  t.name = "W";
  t.w = random_integers({4, 8}, seed, -2, 2);
  t.g = random_integers({4, 8}, seed + 1, -2, 2);
  t.m = step > 1 ? Tensor(0.1 * random_integers({4, 8}, seed + 2, -2, 2)) : zeros_like(t.w);
  t.v = step > 1 ? Tensor(0.01 * random_integers({4, 8}, seed + 3, 1, 4)) : zeros_like(t.w);
  return {t};
}

void check_adam_params(const AdamParams& p, int step) {
  auto fail = [](const std::string& why) { throw Error(ErrorKind::parse, why); };
  if (step < 1 || step > kAdamMaxStep)
    fail("--step is " + std::to_string(step) + "; give 1 (the first step) to " + std::to_string(kAdamMaxStep));
  if (!(p.lr > 0) || !std::isfinite(p.lr)) fail("--lr is " + format_number(p.lr, "%g") + "; give a rate above 0");
  for (const auto& [flag, beta] : {std::pair{"--beta1", p.beta1}, std::pair{"--beta2", p.beta2}})
    if (!(beta >= 0 && beta < 1))
      fail(std::string(flag) + " is " + format_number(beta, "%g") + "; give a decay in [0, 1)");
  if (!(p.eps > 0) || !std::isfinite(p.eps)) fail("--eps is " + format_number(p.eps, "%g") + "; give a value above 0");
}

std::vector<Verdict> adam_step_all(std::vector<AdamTensor>& state, int step, const AdamParams& p) {
  std::vector<Verdict> checks;
  for (AdamTensor& t : state) {
    const std::size_t n = std::min(kAdamChecked, t.w.size());
    const std::vector<double> before(t.w.data(), t.w.data() + n);
    std::vector<double> w = before, m(t.m.data(), t.m.data() + n), v(t.v.data(), t.v.data() + n);
    plain_adam(w, m, v, t.g, step, p);
    Adam adam;
    adam.m = t.m;
    adam.v = t.v;
    adam.step(t.w, t.g, step, p);
    t.m = adam.m;
    t.v = adam.v;
    // The same double arithmetic in another order: a few roundings of the weight and of the
    // update, which a user's moments may make far larger than the weight (v near 0).
    Tensor got = xt::zeros<double>({n}), want = got, tol = got;
    for (std::size_t i = 0; i < n; ++i) {
      got(i) = t.w.data()[i];
      want(i) = w[i];
      tol(i) = 16 * unit_roundoff(DType::float64) * (std::fabs(w[i]) + std::fabs(w[i] - before[i]) + 1.0);
    }
    checks.push_back(compare("Adam's step on " + std::to_string(n) + " elements of " + t.name +
                                 " against Adam written plainly", got, want, tol));
  }
  return checks;
}

std::vector<std::pair<std::string, Tensor>> adam_saved_arrays(const std::vector<AdamTensor>& state) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const AdamTensor& t : state) {
    out.push_back({t.name, t.w});
    out.push_back({"m/" + t.name, t.m});
    out.push_back({"v/" + t.name, t.v});
  }
  return out;
}

}  // namespace shardlab
