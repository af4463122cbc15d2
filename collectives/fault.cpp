#include "collectives/fault.hpp"

#include <cmath>
#include <cstdio>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/text.hpp"

namespace shardlab {

namespace {
struct Named {
  FaultKind kind;
  const char* name;
};
const Named kNames[] = {{FaultKind::skip_add, "skip-add"},           {FaultKind::gather_offset, "gather-offset"},
                        {FaultKind::swap_blocks, "swap-blocks"},     {FaultKind::stale_receive, "stale-receive"},
                        {FaultKind::skip_update, "skip-update"},     {FaultKind::swap_microbatches, "swap-microbatches"},
                        {FaultKind::wrong_axis, "wrong-axis"}};
const char* kList = "perturb:E (E > 0, e.g. perturb:1e-3), skip-add, gather-offset, swap-blocks, stale-receive, "
                    "skip-update, swap-microbatches, wrong-axis";
}  // namespace

Fault parse_fault(const std::string& text) {
  Fault f;
  if (text.empty() || text == "none") return f;
  if (text.rfind("perturb:", 0) == 0) {
    const std::string e = text.substr(8);
    f.size = number_syntax(e, false).empty() ? std::strtod(e.c_str(), nullptr) : NAN;
    if (!std::isfinite(f.size) || f.size <= 0)
      throw Error(ErrorKind::parse, "--inject " + text + ": perturb needs a size E > 0, e.g. perturb:1e-3");
    f.kind = FaultKind::perturb;
    return f;
  }
  for (const auto& n : kNames)
    if (text == n.name) {
      f.kind = n.kind;
      return f;
    }
  throw Error(ErrorKind::parse, "--inject '" + text + "' is not a fault this harness plants; use " + kList);
}

void refuse_unplantable(const Fault& f, DType t) {
  const double epsilon = 2 * unit_roundoff(t);
  if (f.kind != FaultKind::perturb || f.size >= epsilon) return;
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "--inject perturb:%g plants nothing in %s: an element times (1 + %g) rounds back to itself below the "
                "type's epsilon %.3g; give perturb:E with E >= %.3g",
                f.size, dtype_name(t).c_str(), f.size, epsilon, epsilon);
  throw Error(ErrorKind::parse, buf);
}

std::string fault_text(const Fault& f) {
  if (f.kind == FaultKind::none) return "none";
  if (f.kind == FaultKind::perturb) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "perturb:%g", f.size);
    return buf;
  }
  for (const auto& n : kNames)
    if (f.kind == n.kind) return n.name;
  return "none";
}

std::vector<std::string> fault_kinds(double e) {
  std::vector<std::string> out{fault_text(Fault{FaultKind::perturb, e})};
  for (const auto& n : kNames) out.push_back(n.name);
  return out;
}

template <class T>
void perturb_block(T* data, std::size_t n, double e) {
  if (n == 0) return;
  // Over the nonzero elements only: a padded block (--uneven pad) holds zeros past its real rows,
  // and a zero chosen there would change nothing anyone reads.
  double sum_sq = 0;
  std::size_t nonzero = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double v = element_cast<double>(data[i]);
    if (std::isfinite(v) && v != 0) sum_sq += v * v, ++nonzero;
  }
  const double rms = nonzero ? std::sqrt(sum_sq / double(nonzero)) : 0;
  auto candidate = [&](std::size_t i) { return nonzero == 0 || element_cast<double>(data[i]) != 0; };
  auto off = [&](std::size_t i) { return std::fabs(std::fabs(element_cast<double>(data[i])) - rms); };
  std::size_t at = 0;
  while (!candidate(at)) ++at;
  for (std::size_t i = at + 1; i < n; ++i)
    if (candidate(i) && off(i) < off(at)) at = i;
  const double v = element_cast<double>(data[at]);
  data[at] = element_cast<T>(v == 0 ? e : v * (1 + e));
}
template void perturb_block<double>(double*, std::size_t, double);
template void perturb_block<float>(float*, std::size_t, double);
template void perturb_block<bfloat16>(bfloat16*, std::size_t, double);

bool is_bookkeeping(const std::string& name) {
  for (const char* n : {"held", "order", "wall", "peak_stash", "flops", "bytes_held", "padding_dirty"})
    if (name == n) return true;
  return name.size() >= 6 && name.compare(name.size() - 6, 6, "_bytes") == 0;
}

}  // namespace shardlab
