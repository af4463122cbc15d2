#include "core/table.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace shardlab {

namespace {
bool numeric(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '*' && c != 'e' && c != '+')
      return false;
  return true;
}
}  // namespace

std::string Table::text(const std::string& indent) const {
  std::vector<std::size_t> width(header_.size(), 0);
  for (std::size_t i = 0; i < header_.size(); ++i) width[i] = header_[i].size();
  for (const auto& r : rows_)
    for (std::size_t i = 0; i < r.size() && i < width.size(); ++i) width[i] = std::max(width[i], r[i].size());
  // A column of numbers (with "-" or blank for none) is right-aligned; any other is left-aligned,
  // so a "-" in a text column stays under its header.
  std::vector<bool> right(width.size(), false);
  for (std::size_t i = 0; i < width.size(); ++i) {
    bool any = false, all = true;
    for (const auto& r : rows_) {
      const std::string cell = i < r.size() ? r[i] : "";
      if (cell.empty() || cell == "-") continue;
      any = true;
      all = all && numeric(cell);
    }
    right[i] = any && all;
  }
  auto line = [&](const std::vector<std::string>& r, bool head) {
    std::string out = indent;
    for (std::size_t i = 0; i < width.size(); ++i) {
      const std::string cell = i < r.size() ? r[i] : "";
      const std::string pad(width[i] - cell.size(), ' ');
      out += (!head && right[i]) ? pad + cell : cell + pad;
      if (i + 1 < width.size()) out += "  ";
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = line(header_, true);
  for (const auto& r : rows_) out += line(r, false);
  return out;
}

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return buf;
}

}  // namespace shardlab
