#include "harness/cost/machine.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>
#include <thread>
#include <unistd.h>

#include "core/error.hpp"
#include "core/text.hpp"

namespace shardlab {

std::string machine_identity() {
  char when[64] = "";
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  if (gmtime_r(&now, &utc)) std::strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &utc);
  char host[256] = "";
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  std::string cpu;
  std::ifstream info("/proc/cpuinfo");
  for (std::string line; cpu.empty() && std::getline(info, line);)
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) cpu = trim(line.substr(line.find(':') + 1));
  const unsigned cores = std::thread::hardware_concurrency();
  return std::string(when) + " on host " + (host[0] ? host : "?") + " (" + std::to_string(cores) + " cores" +
         (cpu.empty() ? "" : ", " + cpu) + ")";
}

namespace {

// The row of a .dat file under its "# columns: 1 a, 2 b ..." line: column name -> cell.
struct Row {
  std::vector<std::string> names, cells;
  std::string measured;  // the "# measured: ..." note, when there is one
};

Row read_row(const std::string& text, const std::string& path) {
  Row r;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const std::string t = trim(line);
    if (t.empty()) continue;
    if (t[0] == '#') {
      if (t.rfind("# columns:", 0) == 0)
        for (const auto& c : split(t.substr(10), ',')) {
          const std::string named = trim(c);
          const auto space = named.find(' ');
          r.names.push_back(space == std::string::npos ? named : named.substr(space + 1));
        }
      if (t.rfind("# measured:", 0) == 0) r.measured = trim(t.substr(11));
      continue;
    }
    std::istringstream cells(t);
    for (std::string c; cells >> c;) r.cells.push_back(c);
    break;
  }
  if (r.names.empty() || r.cells.size() != r.names.size())
    throw Error(ErrorKind::parse, path + " is not a machine.dat (write one with: shardlab sweep --what machine)");
  return r;
}

// The cell as a number above `low` (or, `or_equal`, at least `low`) whose value times `scale` is
// finite; -1 for "-" when `optional`.
double figure(const Row& r, const std::string& name, const std::string& path, double scale, bool optional,
              bool or_equal = false) {
  for (std::size_t i = 0; i < r.names.size(); ++i) {
    if (r.names[i] != name) continue;
    if (optional && r.cells[i] == "-") return -1;
    char* end = nullptr;
    const double v = std::strtod(r.cells[i].c_str(), &end);
    const bool ok = end != r.cells[i].c_str() && *end == '\0' && std::isfinite(v * scale) && (or_equal ? v >= 0 : v > 0);
    if (!ok)
      throw Error(ErrorKind::parse, path + ": " + name + " is '" + r.cells[i] + "', not a " +
                                        (or_equal ? "non-negative" : "positive") + " number");
    return v;
  }
  throw Error(ErrorKind::parse, path + " has no column " + name + " (write it with: shardlab sweep --what machine)");
}

bool has_column(const Row& r, const std::string& name) {
  return std::find(r.names.begin(), r.names.end(), name) != r.names.end();
}

}  // namespace

Hardware machine_from_dat(const std::string& text, const std::string& path) {
  const Row r = read_row(text, path);
  Hardware h = hardware_preset("this-machine");
  const double gemm = figure(r, "gemm_GFLOPs", path, 1e9, false), reduce = figure(r, "reduce_GBps", path, 1e9, false);
  // alpha may be 0: the fit clamps a negative intercept there
  const double alpha = figure(r, "alpha_us", path, 1e-6, true, true), link = figure(r, "link_GBps", path, 1e9, true);
  // launch_us came later than the other columns: a file without it reads as launch 0, what the
  // model then had (its fit put all of a call's latency in alpha).
  const bool has_launch = has_column(r, "launch_us");
  const double launch = has_launch ? figure(r, "launch_us", path, 1e-6, true, true) : 0;
  if (has_launch && (launch < 0) != (link < 0))
    throw Error(ErrorKind::parse, path + " has launch_us or link_GBps but not both; write it again with: shardlab "
                                         "sweep --what machine");
  if ((alpha < 0) != (link < 0))
    throw Error(ErrorKind::parse, path + " has alpha_us or link_GBps but not both; write it again with: shardlab "
                                         "sweep --what machine");
  h.flops_per_s = gemm * 1e9;
  h.reduce_bytes_per_s = reduce * 1e9;
  const bool has_link = alpha >= 0 && link > 0;
  if (has_link) {
    h.alpha = alpha * 1e-6;
    h.launch = launch * 1e-6;
    h.bytes_per_s = link * 1e9;
  }
  const std::string when = r.measured.empty() ? "" : ", measured " + r.measured;
  h.description = "this machine as measured in " + path + " (float64)";
  h.source = "read from " + path + when + " by shardlab sweep --what machine: float64 GEMM " + format_number(gemm, "%.3g") +
             " GFLOP/s, reduction " + format_number(reduce, "%.3g") + " GB/s" +
             (has_link ? ", launch " + format_number(launch, "%.3g") + " us, alpha " + format_number(alpha, "%.3g") +
                             " us and link " + format_number(link, "%.3g") + " GB/s fitted to our ring collectives under MPI" +
                             (has_launch ? "" : " (the file has no launch_us column, written before it was fitted: launch 0)")
                       : "; the file has no link (a sim run), so launch, alpha and the link rate are the stored preset's "
                         "(measure them: mpiexec -n 2 build/bin/shardlab sweep --what machine --backend mpi)");
  return h;
}

std::vector<Hardware> presets_with_machine(const std::string& path) {
  std::vector<Hardware> presets = hardware_presets();
  if (path.empty()) return presets;
  const Hardware measured = machine_from_dat(read_text_file(path, "--machine"), path);
  for (auto& h : presets)
    if (h.name == measured.name) h = measured;
  return presets;
}

}  // namespace shardlab
