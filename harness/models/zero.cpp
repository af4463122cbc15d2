#include "harness/models/zero.hpp"

#include <cmath>
#include <cstdlib>

#include "core/error.hpp"

namespace shardlab {

double optimizer_state_bytes(const std::string& optimizer) {
  if (optimizer == "adam") return 12;
  if (optimizer == "sgd") return 8;
  throw Error(ErrorKind::parse, "--optimizer '" + optimizer + "' is not one of adam|sgd");
}

std::vector<ZeroStage> zero_stages(double params, int devices, const std::string& optimizer) {
  const double k = optimizer_state_bytes(optimizer), p = params, d = devices;
  const double ring = 2 * (d - 1) / d * 2 * p;  // an AllReduce of 2P bytes, or RS + AG
  return {{"plain DP", 2 * p, 2 * p, k * p, ring},
          {"ZeRO-1", 2 * p, 2 * p, k * p / d, ring},
          {"ZeRO-2", 2 * p, 2 * p / d, k * p / d, ring},
          {"ZeRO-3", 2 * p / d, 2 * p / d, k * p / d, 1.5 * ring}};
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
  const bool decimal = number.find_first_not_of("0123456789.eE+-") == std::string::npos;  // strtod also reads 0x10, inf
  if (number.empty() || !decimal || end != number.c_str() + number.size() || !std::isfinite(v) || v <= 0) throw bad();
  if (v * scale < 1 || v * scale != std::floor(v * scale))
    throw Error(ErrorKind::parse, what + " has '" + text + "', which is not a whole number of parameters (at least 1)");
  if (v * scale > 1e15) throw Error(ErrorKind::parse, what + " has '" + text + "': more than 1e15 parameters");
  return v * scale;
}

}  // namespace shardlab
