// The verdict lines of a program's output that do not state their power (docs/verification.md:
// every verdict line does). A verdict line holds PASS, FAIL or WEAK as a word; the lines wrapped
// under it (indented deeper, with no verdict of their own) are read with it. Its power is one of
// "exact" (as a word: "exact, no tolerance", "exact by replay", a table's "exact"), "catches ...",
// "<number> x RMS" (a table's cell, a WEAK line), "structural: ..." or, for values out of the
// type's range, "no tolerance can judge them". Any line saying "0 x RMS" is listed too: a power of
// 0 is exact.
#pragma once
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace shardlab::testing {

inline std::vector<std::string> verdicts_without_power(const std::string& out) {
  static const std::regex verdict(R"((^|\s)(PASS|FAIL|WEAK)([\s:;,]|$))");
  static const std::regex power(R"(\bexact\b|no tolerance|catches |[0-9] x RMS|structural: )");
  static const std::regex zero(R"((^|[^0-9.e+-])0 x RMS)");
  std::vector<std::string> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  auto indent = [](const std::string& s) { return s.find_first_not_of(' '); };
  std::vector<std::string> bad;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (std::regex_search(lines[i], zero)) bad.push_back(lines[i]);
    if (!std::regex_search(lines[i], verdict)) continue;
    std::string whole = lines[i];
    for (std::size_t j = i + 1; j < lines.size() && !lines[j].empty() && indent(lines[j]) > indent(lines[i]) &&
                                !std::regex_search(lines[j], verdict);
         ++j)
      whole += " " + lines[j].substr(indent(lines[j]));
    if (!std::regex_search(whole, power)) bad.push_back(whole);
  }
  return bad;
}

}  // namespace shardlab::testing
