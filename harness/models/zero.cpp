#include "harness/models/zero.hpp"

#include <cmath>
#include <cstdlib>

#include "core/error.hpp"
#include "core/text.hpp"

namespace shardlab {

double optimizer_state_bytes(const std::string& optimizer) {
  if (optimizer == "adam") return 12;
  if (optimizer == "sgd") return 8;
  throw Error(ErrorKind::parse, "--optimizer '" + optimizer + "' is not one of adam|sgd");
}

std::vector<ZeroStage> zero_stages(double params, int devices, const std::string& optimizer, Uneven uneven) {
  const double k = optimizer_state_bytes(optimizer), p = params, d = devices;
  const auto whole = static_cast<unsigned long long>(params), n = static_cast<unsigned long long>(devices);
  if (devices < 1) throw Error(ErrorKind::parse, "--devices has " + std::to_string(devices) + ", expected at least 1");
  if (whole % n == 0) {
    const double ring = 2 * (d - 1) / d * 2 * p;  // an AllReduce of 2P bytes, or RS + AG
    return {{"plain DP", 2 * p, 2 * p, k * p, ring},
            {"ZeRO-1", 2 * p, 2 * p, k * p / d, ring},
            {"ZeRO-2", 2 * p, 2 * p / d, k * p / d, ring},
            {"ZeRO-3", 2 * p / d, 2 * p / d, k * p / d, 1.5 * ring}};
  }
  if (uneven == Uneven::none)
    throw Error(ErrorKind::not_divisible, std::to_string(whole) + " parameters do not split evenly over " +
                                              std::to_string(devices) + " devices; give --uneven chunk or pad");
  // Issue 32: parts of q = ceil(P/D); the busiest device holds q. One ring ReduceScatter or
  // AllGather: a device sends every part but one, so the busiest sends P minus the smallest part
  // (chunk: torch.chunk's cut, empty parts possible) or D-1 padded parts of q (pad).
  const unsigned long long q = (whole + n - 1) / n, full = whole / q, rest = whole % q;
  const unsigned long long smallest = full + (rest > 0 ? 1 : 0) < n ? 0 : rest > 0 ? rest : q;
  const double share = static_cast<double>(q);
  const double op = 2 * static_cast<double>(uneven == Uneven::pad ? (n - 1) * q : whole - smallest);
  const double ring = 2 * op;
  return {{"plain DP", 2 * p, 2 * p, k * p, ring},
          {"ZeRO-1", 2 * p, 2 * p, k * share, ring},
          {"ZeRO-2", 2 * p, 2 * share, k * share, ring},
          {"ZeRO-3", 2 * share, 2 * share, k * share, 1.5 * ring}};
}

double parse_param_count(const std::string& text, const std::string& what) {
  auto bad = [&] {
    return Error(ErrorKind::parse, what + " has '" + text + "', expected a positive count like 7.5B or 350M");
  };
  if (text.empty()) throw bad();
  double scale = 1;
  std::string number = text;
  switch (text.back()) {
    case 'K': scale = 1e3; break;
    case 'M': scale = 1e6; break;
    case 'B': scale = 1e9; break;
    case 'T': scale = 1e12; break;
    default: break;
  }
  if (scale != 1) number.pop_back();
  char* end = nullptr;
  const double v = std::strtod(number.c_str(), &end);
  const bool decimal = number_syntax(number, false).empty();  // strtod also reads 0x10, inf
  if (number.empty() || !decimal || end != number.c_str() + number.size() || !std::isfinite(v) || v <= 0) throw bad();
  if (v * scale < 1 || v * scale != std::floor(v * scale))
    throw Error(ErrorKind::parse, what + " has '" + text + "', which is not a whole number of parameters (at least 1)");
  if (v * scale > 1e15) throw Error(ErrorKind::parse, what + " has '" + text + "': more than 1e15 parameters");
  return v * scale;
}

}  // namespace shardlab
