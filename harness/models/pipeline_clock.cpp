#include "harness/models/pipeline_clock.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "core/error.hpp"

namespace shardlab {

std::vector<std::vector<PipeOp>> executed_orders(const RunResult& run, int stages) {
  std::vector<std::vector<PipeOp>> out;
  for (int s = 0; s < stages; ++s) {
    const Tensor& order = run.outputs.at(s).at("order");
    std::vector<PipeOp> ops;
    for (std::size_t i = 0; i < order.shape()[0]; ++i)
      ops.push_back({order(i, 0) != 0, static_cast<int>(order(i, 1)), static_cast<int>(order(i, 2))});
    out.push_back(ops);
  }
  return out;
}

std::vector<TimedOp> logical_clock(const std::vector<std::vector<PipeOp>>& orders, double f_cost, double b_cost) {
  const int p = static_cast<int>(orders.size());
  int v = 1;
  for (const auto& o : orders)
    for (const auto& op : o) v = std::max(v, op.part + 1);
  const int last = p * v - 1;
  std::map<std::tuple<int, bool, int>, double> done;  // (virtual stage, backward, chunk) -> end
  std::vector<std::size_t> next(p, 0);
  std::vector<double> free(p, 0);
  std::vector<TimedOp> out;
  for (bool moved = true; moved;) {
    moved = false;
    for (int s = 0; s < p; ++s) {
      while (next[s] < orders[s].size()) {
        const PipeOp op = orders[s][next[s]];
        // What this op waits for: the neighbour's op on the same micro-batch (and, for a backward,
        // this stage's own forward).
        const int vs = op.part * p + s;
        std::vector<std::tuple<int, bool, int>> needs;
        if (!op.backward && vs > 0) needs.push_back({vs - 1, false, op.chunk});
        if (op.backward) {
          needs.push_back({vs, false, op.chunk});
          if (vs < last) needs.push_back({vs + 1, true, op.chunk});
        }
        double ready = free[s];
        bool ok = true;
        for (const auto& n : needs) {
          const auto it = done.find(n);
          if (it == done.end()) ok = false;
          else ready = std::max(ready, it->second);
        }
        if (!ok) break;
        const double end = ready + (op.backward ? b_cost : f_cost);
        done[{vs, op.backward, op.chunk}] = end;
        free[s] = end;
        out.push_back({s, op, ready, end});
        ++next[s];
        moved = true;
      }
    }
  }
  for (int s = 0; s < p; ++s)
    if (next[s] < orders[s].size())
      throw Error(ErrorKind::mismatch, "the stages' orders cannot finish: stage " + std::to_string(s) + " waits at its op " +
                                           std::to_string(next[s] + 1) + " for an input no stage produces first");
  return out;
}

double bubble_fraction(const std::vector<TimedOp>& ops, int stages) {
  double busy = 0, makespan = 0;
  for (const auto& o : ops) {
    busy += o.end - o.start;
    makespan = std::max(makespan, o.end);
  }
  // Idle over total, each a whole number of ticks: one rounding, like the formula's.
  return makespan > 0 ? (stages * makespan - busy) / (stages * makespan) : 0.0;
}

double bubble_formula(int stages, int chunks, int virtual_stages) {
  return double(stages - 1) / double(virtual_stages * chunks + stages - 1);
}

std::string timeline_picture(const std::vector<TimedOp>& ops, int stages, int columns) {
  double makespan = 0;
  for (const auto& o : ops) makespan = std::max(makespan, o.end);
  const int ticks = static_cast<int>(std::ceil(makespan));
  // Each device's row: a cell per tick ("F5,2" where an op starts, "----" while it goes on,
  // "  .  " idle) and its kind ('F', 'B' or '.'). A cell is 5 columns, or one more than the
  // longest label ("F0,12" takes 6).
  auto label_of = [&](const TimedOp& o) {
    return std::string(o.op.backward ? "B" : "F") + std::to_string(o.op.part * stages + o.stage) + "," +
           std::to_string(o.op.chunk);
  };
  std::size_t cell_width = 5;
  for (const auto& o : ops) cell_width = std::max(cell_width, label_of(o).size() + 1);
  std::string idle_cell(cell_width, ' ');
  idle_cell[2] = '.';
  std::vector<std::vector<std::string>> cells(stages, std::vector<std::string>(ticks, idle_cell));
  std::vector<std::string> kinds(stages, std::string(ticks, '.'));
  for (const auto& o : ops) {
    const std::string label = label_of(o);
    for (int t = static_cast<int>(o.start); t < static_cast<int>(std::ceil(o.end)); ++t) {
      std::string cell = t == static_cast<int>(o.start) ? label : std::string(label.size(), '-');
      cell.resize(cell_width, ' ');
      cells[o.stage][t] = cell;
      kinds[o.stage][t] = o.op.backward ? 'B' : 'F';
    }
  }
  const int digits = static_cast<int>(std::to_string(std::max(0, stages - 1)).size());
  auto prefix = [&](int s) {
    std::string id = std::to_string(s);
    return "device " + std::string(digits - id.size(), ' ') + id + " |";
  };
  const int room = std::max(40, columns) - static_cast<int>(prefix(0).size());
  auto trimmed = [](std::string line) {
    while (!line.empty() && line.back() == ' ') line.pop_back();
    return line + "\n";
  };
  std::string out;
  const int fit = room / static_cast<int>(cell_width), bands = std::max(1, (ticks + fit - 1) / fit), per_line = (ticks + bands - 1) / bands;
  if (bands <= 4) {  // whole cells, in bands of even length when they do not fit in one line
    for (int t0 = 0; t0 < std::max(ticks, 1); t0 += std::max(per_line, 1)) {
      const int t1 = std::min(ticks, t0 + per_line);
      if (bands > 1) out += "ticks " + std::to_string(t0) + "-" + std::to_string(t1 - 1) + ":\n";
      for (int s = 0; s < stages; ++s) {
        std::string line = prefix(s);
        for (int t = t0; t < t1; ++t) line += cells[s][t];
        out += trimmed(line);
      }
    }
    return out;
  }
  // One character per k ticks, in at most 4 bands: what the device did in those ticks.
  const int k = (ticks + 4 * room - 1) / (4 * room), width = (ticks + k - 1) / k;
  out += "one character per " + std::to_string(k) + (k == 1 ? " tick" : " ticks") +
         ": F forwards, B backwards, X both, . idle; lower case: partly idle\n";
  for (int c0 = 0; c0 < width; c0 += room) {
    const int c1 = std::min(width, c0 + room);
    out += "ticks " + std::to_string(c0 * k) + "-" + std::to_string(std::min(ticks, c1 * k) - 1) + ":\n";
    for (int s = 0; s < stages; ++s) {
      std::string line = prefix(s);
      for (int c = c0; c < c1; ++c) {
        int f = 0, b = 0, idle = 0;
        for (int t = c * k; t < std::min(ticks, (c + 1) * k); ++t)
          (kinds[s][t] == 'F' ? f : kinds[s][t] == 'B' ? b : idle) += 1;
        const char busy = f && b ? 'X' : f ? 'F' : 'B';
        line += !f && !b ? '.' : idle ? static_cast<char>(busy - 'A' + 'a') : busy;
      }
      out += trimmed(line);
    }
  }
  return out;
}

}  // namespace shardlab
