// The .dat tables of `shardlab sweep` (harness/models/sweep.hpp): their text, the lookups tests
// use, and writing them all or none.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <unistd.h>

#include "core/error.hpp"
#include "core/text.hpp"
#include "core/write_file.hpp"
#include "harness/models/sweep.hpp"

namespace shardlab {

std::string dat_number(double v, const char* format) { return std::isnan(v) ? "-" : format_number(v, format); }
std::string dat_integer(std::size_t v) { return std::to_string(v); }

// ---- DatTable ----

std::string DatTable::text() const {
  std::vector<std::size_t> width(columns.size(), 0);
  for (std::size_t c = 0; c < columns.size(); ++c) width[c] = columns[c].size();
  for (const auto& b : blocks)
    for (const auto& r : b.rows)
      for (std::size_t c = 0; c < r.size() && c < width.size(); ++c) width[c] = std::max(width[c], r[c].size());
  auto line = [&](const std::vector<std::string>& cells, const std::string& lead) {
    std::string out = lead;
    for (std::size_t c = 0; c < cells.size(); ++c) {
      if (c) out += "  ";
      out += std::string(width[c] > cells[c].size() ? width[c] - cells[c].size() : 0, ' ') + cells[c];
    }
    return out + "\n";
  };
  std::string out;
  for (const auto& n : notes) out += "# " + n + "\n";
  std::string numbered;
  for (std::size_t c = 0; c < columns.size(); ++c)
    numbered += (c ? ", " : "") + std::to_string(c + 1) + " " + columns[c];
  out += "# columns: " + numbered + "\n";
  out += line(columns, "# ");
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    if (b) out += "\n\n";  // gnuplot: the next index
    if (blocks.size() > 1 || !blocks[b].title.empty())
      out += "# block " + std::to_string(b) + " (gnuplot index " + std::to_string(b) + "): " + blocks[b].title + "\n";
    for (const auto& r : blocks[b].rows) out += line(r, "  ");
  }
  return out;
}

std::size_t DatTable::column(const std::string& n) const {
  for (std::size_t c = 0; c < columns.size(); ++c)
    if (columns[c] == n) return c;
  throw Error(ErrorKind::parse, name + ".dat has no column " + n);
}

double DatTable::number(std::size_t block, std::size_t row, const std::string& col) const {
  const std::size_t c = column(col);
  if (block >= blocks.size() || row >= blocks[block].rows.size())
    throw Error(ErrorKind::parse, name + ".dat has no row " + std::to_string(row) + " in block " + std::to_string(block));
  const std::string& cell = blocks[block].rows[row].at(c);
  if (cell == "-") return std::numeric_limits<double>::quiet_NaN();
  return std::stod(cell);
}

// ---- files ----

std::vector<std::string> write_dat_files(const std::string& dir, const std::vector<DatTable>& tables) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw Error(ErrorKind::io, "--out " + dir + " is a file, not a directory");
  const bool created = !fs::exists(dir, ec);
  fs::create_directories(dir, ec);
  if (ec) throw Error(ErrorKind::io, "cannot create directory " + dir + ": " + ec.message());
  std::vector<std::string> temps, finals;
  auto drop_temps = [&] {  // and the directory, when this run made it: nothing is left behind
    for (const auto& t : temps) fs::remove(t, ec);
    if (created) fs::remove(dir, ec);
  };
  try {
    for (const auto& t : tables)  // first: never rename over a device node or a directory
      check_writable((fs::path(dir) / (t.name + ".dat")).string(), "sweep table");
  } catch (const Error&) {
    drop_temps();
    throw;
  }
  for (const auto& t : tables) {
    const std::string final_path = (fs::path(dir) / (t.name + ".dat")).string();
    const std::string temp = (fs::path(dir) / ("." + t.name + ".dat.tmp." + std::to_string(::getpid()))).string();
    temps.push_back(temp);
    std::ofstream f(temp, std::ios::binary);
    f << t.text();
    f.close();
    if (!f) {
      drop_temps();
      throw Error(ErrorKind::fault, "cannot write " + final_path + " (disk full?)");
    }
    finals.push_back(final_path);
  }
  for (std::size_t i = 0; i < temps.size(); ++i) {
    fs::rename(temps[i], finals[i], ec);
    if (ec) {
      const std::string why = ec.message();  // before drop_temps reuses ec
      drop_temps();
      throw Error(ErrorKind::fault, "cannot rename " + temps[i] + " to " + finals[i] + ": " + why);
    }
  }
  return finals;
}

}  // namespace shardlab
