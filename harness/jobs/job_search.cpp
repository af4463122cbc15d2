#include "harness/jobs/job_search.hpp"

#include <algorithm>
#include <functional>
#include <sstream>

#include "core/error.hpp"
#include "core/table.hpp"
#include "core/text.hpp"

namespace shardlab {

void prefer_no_cp_on_a_tie(std::vector<JobCost>& fastest_first) {
  if (fastest_first.empty() || fastest_first.front().layout.cp <= 1) return;
  const double best = fastest_first.front().time.step();
  const auto plain = std::find_if(fastest_first.begin(), fastest_first.end(),
                                  [](const JobCost& j) { return j.layout.cp == 1; });
  if (plain == fastest_first.end() || plain->time.step() > best * (1 + kCpTie)) return;
  std::rotate(fastest_first.begin(), plain, plain + 1);
}

JobSearchResult search_layouts(const ModelSpec& m, const ClusterSpec& c, const JobSearchOptions& o) {
  const int n = o.devices, node = c.devices_per_node;
  if (n < 1 || (n >= node && n % node) || (n < node && node % n))
    throw Error(ErrorKind::parse, "--devices " + std::to_string(n) + " is not a whole number of " + c.name +
                                      " nodes of " + std::to_string(node) + " devices (or a divisor of one)");
  JobSearchResult r;
  std::vector<int> eps = {1};
  if (m.moe())
    for (int e = 2; e <= m.experts; e *= 2) eps.push_back(e);
  const std::vector<Recompute> rcs = o.only_full_recompute
                                         ? std::vector<Recompute>{Recompute::full}
                                         : std::vector<Recompute>{Recompute::none, Recompute::selective, Recompute::full};
  for (int tp = 1; tp <= std::min(n, 64); tp *= 2) {
    if (n % tp || (o.fix_tp && tp != o.fix_tp)) continue;
    for (int cp = 1; cp <= std::min(n / tp, 32); cp *= 2) {
      if ((n / tp) % cp || (o.fix_cp && cp != o.fix_cp)) continue;
      const int rest = n / (tp * cp);
      for (int pp = 1; pp <= rest && pp <= m.layers; ++pp) {
        if (rest % pp || m.layers % pp || (o.fix_pp && pp != o.fix_pp)) continue;
        for (int vp : {1, 2, 4})
          for (int b : {1, 2, 4, 8})
            for (int sp = 0; sp <= (o.allow_sp && tp > 1 ? 1 : 0); ++sp)
              for (int zero = 0; zero <= (o.allow_zero ? 3 : 0); ++zero)
                for (Recompute rc : rcs)
                  for (int ep : eps) {
                    Layout l;
                    l.tp = tp, l.cp = cp, l.pp = pp, l.dp = rest / pp, l.vp = vp, l.micro_batch = b, l.sp = sp;
                    l.zero = zero, l.recompute = rc, l.ep = ep;
                    if (!layout_problem(m, c, n, l).empty()) continue;
                    ++r.evaluated;
                    JobCost j = job_cost(m, c, l, o.plan);
                    (j.fits ? r.fitting : r.too_big).push_back(j);
                  }
      }
    }
  }
  auto faster = [](const JobCost& a, const JobCost& b) { return a.time.step() < b.time.step(); };
  std::stable_sort(r.fitting.begin(), r.fitting.end(), faster);
  std::stable_sort(r.too_big.begin(), r.too_big.end(), faster);
  prefer_no_cp_on_a_tie(r.fitting);
  if (r.evaluated == 0)
    throw Error(ErrorKind::parse, "no layout of " + m.name + " divides " + std::to_string(n) + " devices");
  return r;
}

namespace {

std::string gb(double bytes) { return format_number(bytes / 1e9, "%.1f"); }
std::string sec(double s) { return format_number(s, s < 10 ? "%.2f" : "%.1f"); }
std::string pct(double f) { return format_number(100 * f, "%.1f") + "%"; }

// The largest part by which `a` is slower than `b`.
std::string worst_part(const JobCost& a, const JobCost& b) {
  const std::pair<const char*, double> parts[] = {
      {"compute", a.time.compute - b.time.compute}, {"TP comm", a.time.tp - b.time.tp},
      {"CP comm", a.time.cp_exposed - b.time.cp_exposed},
      {"bubble", a.time.bubble - b.time.bubble},    {"p2p", a.time.p2p - b.time.p2p},
      {"DP comm", a.time.dp_exposed - b.time.dp_exposed}, {"EP comm", a.time.ep - b.time.ep},
      {"optimizer", a.time.optimizer - b.time.optimizer}};
  auto it = std::max_element(std::begin(parts), std::end(parts),
                             [](const auto& x, const auto& y) { return x.second < y.second; });
  return std::string(it->first) + " +" + sec(it->second) + " s";
}

const JobCost* first_where(const std::vector<JobCost>& v, const std::function<bool(const Layout&)>& f) {
  for (const auto& j : v)
    if (f(j.layout)) return &j;
  return nullptr;
}

std::string verdict(bool holds) { return holds ? "holds" : "fails"; }

// Each line of `text` cut at spaces to at most 100 columns, continued under its bullet's text.
std::string wrapped(const std::string& text) {
  std::string out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const std::string indent(line.rfind("  - ", 0) == 0 ? 4 : 2, ' ');
    while (line.size() > 100) {
      std::size_t cut = line.rfind(' ', 100);
      if (cut == std::string::npos || cut <= indent.size()) break;
      out += line.substr(0, cut) + "\n";
      line = indent + line.substr(cut + 1);
    }
    out += line + "\n";
  }
  return out;
}

// Article 004's context parallelism, for long sequences only: a CP layout that wins by less than
// kCpTie is a tie (job_search.hpp), and the text says so. the best layout's CP against the
// fastest fitting layout with the other choice of CP.
std::string cp_rule(const ModelSpec& m, const JobSearchResult& r, const JobCost& best) {
  std::ostringstream out;
  const Layout& b = best.layout;
  const JobCost* other = first_where(r.fitting, [&](const Layout& l) { return (l.cp > 1) != (b.cp > 1); });
  out << "  - CP only for long sequences (" << m.seq << " tokens here): ";
  if (b.cp > 1) {
    out << "CP " << b.cp << " chosen. Each device holds " << m.seq / b.cp << " tokens of a sequence; ring "
        << "attention's K/V passes take " << sec(best.time.cp) << " s a step, " << sec(best.time.cp - best.time.cp_exposed)
        << " s of it behind the attention";
    if (other) out << ". Without CP the best takes " << sec(other->time.step()) << " s (" << worst_part(*other, best) << ")";
  } else {
    out << "CP 1 chosen";
    const bool tie = other && other->time.step() < best.time.step();
    if (other)
      out << ". The best with CP, " << other->layout.text() << ", takes " << sec(other->time.step()) << " s ("
          << (tie ? "within " + format_number(100 * kCpTie, "%.0f") + "%: a tie, and CP's unmodelled costs decide it"
                  : worst_part(*other, best) + "; its K/V passes leave " + sec(other->time.cp_exposed) + " s bare")
          << ")";
  }
  out << ".\n";
  return out.str();
}

// Expert parallelism, for mixtures of experts only: the experts split over EP ranks drawn from DP.
std::string ep_rule(const ModelSpec& m, const JobSearchResult& r, const JobCost& best) {
  if (!m.moe()) return "  - EP only for experts: " + m.name + " is dense, EP 1.\n";
  const Layout& b = best.layout;
  std::ostringstream out;
  out << "  - EP only for experts (" << m.experts << " here, top " << m.top_k << "): EP " << b.ep << " chosen";
  if (b.ep > 1) out << ", its AllToAlls take " << sec(best.time.ep) << " s a step";
  if (const JobCost* o = first_where(r.fitting, [&](const Layout& l) { return (l.ep > 1) != (b.ep > 1); }))
    out << "; the best with EP " << o->layout.ep << " takes " << sec(o->time.step()) << " s (" << worst_part(*o, best) << ")";
  out << ".\n";
  return out.str();
}

}  // namespace

std::string plan_text(const ModelSpec& m, const ClusterSpec& c, const JobSearchOptions& o, const JobSearchResult& r,
                      int top) {
  std::ostringstream out;
  out << "plan-model: " << m.name << " (" << format_number(model_params(m) / 1e9, "%.1f") << "B parameters, "
      << m.layers << " layers, h " << m.hidden << ", seq " << m.seq << ", batch " << shortest(m.global_batch)
      << ")\n  on " << o.devices << " devices of " << c.name << " (" << c.devices_per_node << " a node, "
      << gb(c.memory_bytes) << " GB each, " << format_number(c.peak(o.plan.dtype) / 1e12, "%.0f") << " TFLOP/s "
      << o.plan.dtype << " at " << pct(c.gemm_efficiency) << " GEMM efficiency)\n  " << r.evaluated
      << " layouts searched, " << r.fitting.size() << " fit in memory.\n";
  if (r.fitting.empty()) return out.str();
  const int k = std::min<int>(top, r.fitting.size());
  out << "\nBest layouts:\n";
  for (int i = 0; i < k; ++i) out << "  " << i + 1 << ". " << r.fitting[i].layout.text() << "\n";
  Table mem({"memory GB", "params", "grads", "optimizer", "activations", "(no recompute)", "stash", "total"});
  for (int i = 0; i < k; ++i) {
    const auto& x = r.fitting[i].memory;
    mem.add({std::to_string(i + 1), gb(x.params), gb(x.grads), gb(x.optimizer), gb(x.activations),
             gb(x.activations_none), std::to_string(x.stash), gb(x.total())});
  }
  out << mem.text();
  Table tt({"step s", "compute", "TP", "CP", "bubble", "p2p", "DP", "EP", "optim", "step", "MFU", "tokens/s"});
  for (int i = 0; i < k; ++i) {
    const auto& j = r.fitting[i];
    const auto& t = j.time;
    tt.add({std::to_string(i + 1), sec(t.compute), sec(t.tp), sec(t.cp_exposed), sec(t.bubble), sec(t.p2p),
            sec(t.dp_exposed), sec(t.ep), sec(t.optimizer), sec(t.step()), pct(j.mfu()),
            format_number(j.tokens_per_s, "%.0f")});
  }
  out << tt.text() << "  CP shows the exposed part of ring attention's K/V passes: each overlaps the attention of "
                       "the block in hand. Nothing else overlaps"
      << (o.plan.overlap_dp ? " but DP communication, hidden behind the backward"
                            : " (DP communication runs after the backward)")
      << ".\n";

  const JobCost& best = r.fitting[0];
  const Layout& b = best.layout;
  out << "\nWhy " << b.text() << " (article 004's rules, with these numbers):\n";
  // TP inside a node.
  {
    const double across = tp_seconds(m, b, c.inter);
    const double inside = tp_seconds(m, b, c.intra);
    if (b.tp > 1)
      out << "  - TP stays inside a node: " << verdict(tp_inside_node(c, b)) << ". Over NVLink-class links it costs "
          << sec(inside) << " s a step; across nodes it would cost " << sec(across) << " s.\n";
    else
      out << "  - TP stays inside a node: holds trivially, TP 1 (TP would add communication this job "
             "does not need).\n";
  }
  // PP only when the model does not fit otherwise.
  {
    const JobCost* flat = first_where(r.fitting, [](const Layout& l) { return l.pp == 1; });
    const JobCost* flat_big = first_where(r.too_big, [](const Layout& l) { return l.pp == 1; });
    if (b.pp > 1 && !flat) {
      double need = 1e300;
      for (const auto& j : r.too_big)
        if (j.layout.pp == 1) need = std::min(need, j.memory.total());
      out << "  - PP only when the model does not fit without it: holds. No PP 1 layout fits";
      if (flat_big) out << " (the leanest needs " << gb(need) << " GB of " << gb(c.memory_bytes) << ")";
      out << "; PP " << b.pp << " adds bubble " << sec(best.time.bubble) << " s and p2p " << sec(best.time.p2p) << " s.\n";
    } else if (b.pp > 1) {
      out << "  - PP only when the model does not fit without it: fails. " << flat->layout.text() << " fits too, "
          << "but takes " << sec(flat->time.step()) << " s against " << sec(best.time.step()) << " s ("
          << worst_part(*flat, best) << ").\n";
    } else {
      out << "  - PP only when the model does not fit without it: holds, PP 1.\n";
    }
  }
  out << cp_rule(m, r, best) << ep_rule(m, r, best);
  // DP for the rest; ZeRO when the states do not fit.
  out << "  - DP over the remaining " << b.dp << " replicas: its gradient communication takes " << sec(best.time.dp)
      << " s (" << pct(best.time.dp / best.time.step()) << " of the step).\n";
  {
    const double plain = 16 * best.params_per_device;
    out << "  - ZeRO only when the states do not fit: " << verdict(b.zero == 0 || plain + best.memory.activations > c.memory_bytes)
        << ". Unsharded states would take " << gb(plain) << " GB; ZeRO-" << b.zero << " leaves "
        << gb(best.memory.params + best.memory.grads + best.memory.optimizer) << " GB.\n";
  }
  {
    const double without = best.memory.total() - best.memory.activations + best.memory.activations_none;
    out << "  - Recompute only when activations do not fit: "
        << verdict(b.recompute == Recompute::none || without > c.memory_bytes) << ". Without it this layout needs "
        << gb(without) << " GB of " << gb(c.memory_bytes) << "; "
        << (b.recompute == Recompute::none ? "" : recompute_name(b.recompute))
        << (b.recompute == Recompute::none ? "none chosen" : " recomputation costs " +
            format_number(best.hardware_flops / best.model_flops * 100 - 100, "%.1f") + "% more FLOPs")
        << ".\n";
  }
  // Runners-up that differ in one choice.
  Table lose({"rejected: the best that changes", "layout", "step s", "loses by"});
  const std::pair<const char*, std::function<bool(const Layout&)>> dims[] = {
      {"TP", [&](const Layout& l) { return l.tp != b.tp; }},
      {"PP", [&](const Layout& l) { return l.pp != b.pp; }},
      {"ZeRO stage", [&](const Layout& l) { return l.zero != b.zero; }},
      {"recomputation", [&](const Layout& l) { return l.recompute != b.recompute; }},
      {"micro-batch", [&](const Layout& l) { return l.micro_batch != b.micro_batch; }},
      {"SP", [&](const Layout& l) { return l.sp != b.sp; }},
      {"interleaving", [&](const Layout& l) { return l.vp != b.vp; }},
      {"CP", [&](const Layout& l) { return l.cp != b.cp; }},
      {"EP", [&](const Layout& l) { return l.ep != b.ep; }}};
  for (const auto& [name, differs] : dims)
    if (const JobCost* j = first_where(r.fitting, differs)) {
      const auto& l = j->layout;
      const std::string short_layout = "D" + std::to_string(l.dp) + " T" + std::to_string(l.tp) + (l.sp ? "+SP" : "") +
                                       (l.cp > 1 ? " C" + std::to_string(l.cp) : "") +
                                       (l.ep > 1 ? " E" + std::to_string(l.ep) : "") + " P" + std::to_string(l.pp) + "v" + std::to_string(l.vp) + " Z" +
                                       std::to_string(l.zero) + " b" + std::to_string(l.micro_batch) + " " +
                                       recompute_name(l.recompute);
      lose.add({name, short_layout, sec(j->time.step()), worst_part(*j, best)});
    }
  out << "\n" << lose.text();
  // Faster layouts that do not fit.
  int shown = 0;
  for (const auto& j : r.too_big) {
    if (j.time.step() >= best.time.step() || shown == 3) break;
    if (shown++ == 0) out << "\nFaster, but they do not fit in " << gb(c.memory_bytes) << " GB:\n";
    out << "  " << j.layout.text() << ": " << sec(j.time.step()) << " s, needs " << gb(j.memory.total()) << " GB\n";
  }
  return wrapped(out.str());
}

}  // namespace shardlab
