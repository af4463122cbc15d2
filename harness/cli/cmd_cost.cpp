#include "harness/cli/cmd_cost.hpp"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/text.hpp"
#include "harness/bench/bench.hpp"
#include "harness/cost/cost.hpp"
#include "harness/cost/machine.hpp"
#include "core/table.hpp"
#include "harness/cost/topology.hpp"

namespace shardlab {

namespace {

struct CostOptions {
  std::string ops = "all_reduce,all_gather";
  std::string sizes = "4K,256K,16M";
  int devices = 8;
  bool devices_given = false;
  std::string axes;  // the mesh axis sizes the group spans, e.g. "4,4"; default one axis of `devices`
  std::string presets = "all";
  bool sources = false, json = false, presets_only = false;
  std::string machine;  // a machine.dat for the this-machine preset
};

const std::vector<std::string> kOps = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "collective_permute"};

// The algorithm that sends the least (ring; pairwise for all_to_all) and the one with the fewest
// steps, where the model has it.
Algorithm bandwidth_algorithm(const std::string& op) {
  return op == "all_to_all" || op == "collective_permute" ? Algorithm::pairwise : Algorithm::ring;
}
bool has_doubling(const std::string& op, int p) {
  return op != "all_to_all" && op != "collective_permute" && p >= 1 && (p & (p - 1)) == 0;
}

std::vector<std::string> pick(const std::string& list, const std::vector<std::string>& known, const std::string& flag) {
  if (trim(list) == "all") return known;
  std::vector<std::string> out;
  for (const auto& raw : split(list, ',')) {
    const std::string w = trim(raw);
    bool ok = false;
    for (const auto& k : known) ok = ok || k == w;
    if (!ok) throw Error(ErrorKind::parse, flag + " names '" + w + "'; choose from " + join(known, ", ") + " or all");
    out.push_back(w);
  }
  return out;
}

// topology_text, shorter: "2D torus, wraps at 16", so that the presets table fits 100 columns.
std::string wiring(const Hardware& h) {
  if (h.topology != Topology::torus || h.wrap_from == 0) return topology_text(h);
  return std::to_string(h.torus_dims) + "D torus, wraps at " + std::to_string(h.wrap_from);
}

// The presets' figures, one row each; with `sources`, a line each saying where they come from.
std::string presets_table(const std::vector<const Hardware*>& presets, bool sources) {
  Table pt({"preset", "launch_us", "alpha_us", "link_GB/s", "reduce_GB/s", "TFLOP/s", "B/elem", "topology"});
  for (const Hardware* h : presets)
    pt.add({h->name, format_number(h->launch * 1e6, "%.2f"), format_number(h->alpha * 1e6, "%.2f"),
            format_number(h->bytes_per_s / 1e9, "%.2f"), format_number(h->reduce_bytes_per_s / 1e9, "%.1f"),
            format_number(h->flops_per_s / 1e12, "%.4g"), format_number(h->element_bytes, "%.0f"), wiring(*h)});
  std::string text = pt.text();
  if (sources)
    for (const Hardware* h : presets) text += "  " + h->name + ": " + h->description + ". " + h->source + "\n";
  return text;
}

// The sizes of the mesh axes the group spans: --axes, else one axis of --devices.
std::vector<int> group_axes(const CostOptions& o) {
  if (o.axes.empty()) return {o.devices};
  std::vector<int> axes;
  long long product = 1;
  for (const auto& w : split(o.axes, ',')) {
    const long size = parse_positive(trim(w), "--axes");
    product *= size;
    if (product > 65536) throw Error(ErrorKind::parse, "--axes " + o.axes + " spans more than 65536 devices");
    axes.push_back(int(size));
  }
  if (o.devices_given && product != o.devices)
    throw Error(ErrorKind::parse, "--axes " + o.axes + " spans " + std::to_string(product) + " devices but --devices is " +
                                      std::to_string(o.devices));
  return axes;
}

nlohmann::ordered_json presets_json(const std::vector<const Hardware*>& presets) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const Hardware* h : presets)
    out.push_back({{"name", h->name},
                   {"description", h->description},
                   {"alpha_s", h->alpha},
                   {"launch_s", h->launch},
                   {"link_bytes_per_s", h->bytes_per_s},
                   {"reduce_bytes_per_s", h->reduce_bytes_per_s},
                   {"flops_per_s", h->flops_per_s},
                   {"element_bytes", h->element_bytes},
                   {"topology", topology_name(h->topology)},
                   {"torus_dims", h->torus_dims},
                   {"wrap_from", h->wrap_from},
                   {"source", h->source}});
  return out;
}

// The model's formulas, above the tables; `axes_words` are the group's axis sizes.
std::string model_text(int p, const std::vector<std::string>& axes_words) {
  return "shardlab cost: modeled time of collectives on a group of " + std::to_string(p) +
         " devices (alpha-beta-gamma)\n"
         "  n = devices in the group; S = bytes of the whole tensor (the size column; all_to_all: each\n"
         "  device's buffer); a = alpha, s per message; b = s per byte on a link; g = s per byte reduced\n"
         "  L = launch, s per collective call: every time below is L + the terms (n > 1)\n"
         "  ring all_gather (n-1)a + S(n-1)/n b; reduce_scatter adds S(n-1)/n g;\n"
         "  ring all_reduce 2(n-1)a + 2S(n-1)/n b + S(n-1)/n g; pairwise all_to_all (n-1)a + S(n-1)/n b\n"
         "  recursive doubling: log2(n) a, all_gather and reduce_scatter sending the same bytes;\n"
         "  doubling all_reduce log2(n) a + S log2(n) (b + g)\n"
         "  *_sent: bytes one device sends; busbw: S/time x 2(n-1)/n (all_reduce) or (n-1)/n (nccl-tests)\n"
         "  wired_us: the bandwidth algorithm on the preset's wiring (harness/cost/topology.hpp): a torus\n"
         "  uses both directions of every axis the group spans (" + join(axes_words, "x") +
         " here; --axes 4,4 spans two)\n  and prices all_to_all by its bisection\n\nPresets";
}

// One collective's table: each preset and size, by the bandwidth algorithm, by recursive doubling
// where the model has it, and on the preset's wiring; its rows go into j["rows"] and j["wired"].
Table op_table(const std::string& op, const std::vector<int>& axes, int p, const std::vector<const Hardware*>& presets,
               const std::vector<double>& sizes, nlohmann::ordered_json& j) {
  const Algorithm bw = bandwidth_algorithm(op);
  const bool doubling = has_doubling(op, p);
  const std::string first = algorithm_name(bw);
  std::vector<std::string> cols = {"preset", "size", first + "_us", "dbl_us", "faster", first + "_sent",
                                   "dbl_sent", "busbw_GB/s", "wired_us"};
  const bool direct = op == "all_to_all" || op == "collective_permute";  // no recursive doubling
  if (direct) cols = {"preset", "size", first + "_us", first + "_sent", "busbw_GB/s", "wired_us"};
  Table t(cols);
  for (const Hardware* h : presets)
    for (double n : sizes) {
      const CollectiveTerms rt = collective_terms(op, bw, p, n);
      const double rs = collective_seconds(op, bw, p, n, *h);
      double ds = NAN;
      CollectiveTerms dt;
      if (doubling) {
        dt = collective_terms(op, Algorithm::recursive_doubling, p, n);
        ds = collective_seconds(op, Algorithm::recursive_doubling, p, n, *h);
      }
      const std::string faster = p == 1 ? "-" : !doubling || rs <= ds ? first : "doubling";
      const double busbw = rs > 0 ? n / rs * bus_factor(op, p) / 1e9 : NAN;
      const std::string bus = std::isnan(busbw) ? "-" : format_number(busbw, "%.2f");
      const std::string wired = format_number(topology_seconds(op, axes, n, *h) * 1e6, "%.2f");
      if (direct)
        t.add({h->name, human_bytes(n), format_number(rs * 1e6, "%.2f"), human_bytes(rt.link_bytes), bus, wired});
      else
        t.add({h->name, human_bytes(n), format_number(rs * 1e6, "%.2f"),
               doubling ? format_number(ds * 1e6, "%.2f") : "-", faster, human_bytes(rt.link_bytes),
               doubling ? human_bytes(dt.link_bytes) : "-", bus, wired});
      for (Algorithm a : {bw, Algorithm::recursive_doubling}) {
        if (a == Algorithm::recursive_doubling && !doubling) continue;
        const CollectiveTerms k = a == bw ? rt : dt;
        j["rows"].push_back({{"op", op},
                             {"preset", h->name},
                             {"bytes", n},
                             {"algorithm", algorithm_name(a)},
                             {"calls", k.calls},
                             {"steps", k.steps},
                             {"bytes_sent_per_device", k.link_bytes},
                             {"bytes_reduced_per_device", k.reduce_bytes},
                             {"seconds", a == bw ? rs : ds}});
      }
      const TopologyTerms w = topology_terms(op, axes, n, *h);
      j["wired"].push_back({{"op", op},
                            {"preset", h->name},
                            {"bytes", n},
                            {"topology", topology_text(*h)},
                            {"calls", w.calls},
                            {"hops", w.hops},
                            {"busiest_link_bytes", w.link_bytes},
                            {"bytes_reduced_per_device", w.reduce_bytes},
                            {"seconds", topology_seconds(op, axes, n, *h)}});
    }
  return t;
}

// Where the ring overtakes recursive doubling on each preset, in lines of at most 100 columns;
// also into j["ring_faster_above_bytes"][op].
std::string crossover_text(const std::string& op, int p, const std::vector<const Hardware*>& presets,
                           nlohmann::ordered_json& j) {
  std::vector<std::string> where;
  auto& cross = j["ring_faster_above_bytes"][op];
  cross = nlohmann::ordered_json::object();
  for (const Hardware* h : presets) {
    const double c = ring_faster_above_bytes(op, p, *h);
    cross[h->name] = std::isinf(c) ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(c);
    where.push_back(h->name + " " + (std::isinf(c) ? "never" : human_bytes(c)));
  }
  std::string text;
  std::string line = "  ring is faster above:";
  for (std::size_t i = 0; i < where.size(); ++i) {
    const std::string item = " " + where[i] + (i + 1 < where.size() ? "," : "");
    if (line.size() + item.size() > 100) {
      text += line + "\n";
      line = "   ";
    }
    line += item;
  }
  return text + line + "\n";
}

int run(const CostOptions& o) {
  if (o.devices < 1 || o.devices > 65536)
    throw Error(ErrorKind::parse, "--devices is " + std::to_string(o.devices) + "; use 1 to 65536");
  const std::vector<std::string> ops = pick(o.ops, kOps, "--op");
  const std::vector<Hardware> known = presets_with_machine(o.machine);
  std::vector<std::string> preset_names;
  for (const auto& h : known) preset_names.push_back(h.name);
  std::vector<const Hardware*> presets;
  for (const auto& n : pick(o.presets, preset_names, "--preset")) presets.push_back(&hardware_preset(n, known));
  std::vector<double> sizes;
  for (const auto& s : split(o.sizes, ',')) sizes.push_back(double(parse_bytes(trim(s), "--bytes")));
  const std::vector<int> axes = group_axes(o);
  int p = 1;
  for (int a : axes) p *= a;
  std::vector<std::string> axes_words;
  for (int a : axes) axes_words.push_back(std::to_string(a));

  nlohmann::ordered_json j;
  j["devices"] = p;
  j["axes"] = axes;
  j["presets"] = presets_json(presets);
  j["rows"] = nlohmann::ordered_json::array();
  j["wired"] = nlohmann::ordered_json::array();
  j["ring_faster_above_bytes"] = nlohmann::ordered_json::object();

  std::string text = model_text(p, axes_words);
  text += o.sources ? ":\n" : " (--sources says where each number comes from):\n";
  const std::string preset_text = presets_table(presets, o.sources);
  if (o.presets_only) {
    std::cout << (o.json ? nlohmann::ordered_json{{"presets", j["presets"]}}.dump(2) + "\n"
                         : "shardlab cost: the hardware presets (L = launch, s per collective call; a = alpha, s per "
                           "message)\n" + preset_text);
    return 0;
  }
  text += preset_text;
  for (const auto& op : ops) {
    text += "\n" + op + " on " + std::to_string(p) + " devices:\n" + op_table(op, axes, p, presets, sizes, j).text();
    if (has_doubling(op, p))
      text += crossover_text(op, p, presets, j);
    else
      text += op == "all_to_all"           ? "  (all_to_all: pairwise exchange only)\n"
              : op == "collective_permute" ? "  (collective_permute: one block to one device, L + a + S b; S = the block)\n"
                                           : "  (recursive doubling needs a power-of-two group)\n";
  }
  std::cout << (o.json ? j.dump(2) + "\n" : text);
  return 0;
}

}  // namespace

Command add_cost_command(CLI::App& app) {
  auto o = std::make_shared<CostOptions>();
  auto* c = app.add_subcommand("cost",
                               "the cost model: hardware presets (with their sources) and the modeled time of "
                               "collectives, ring against recursive doubling, and where one overtakes the other");
  c->add_option("--op", o->ops, "collectives, comma separated: all_reduce, all_gather, reduce_scatter, all_to_all, collective_permute "
                "(a shift by one: each device's block to the next), or all")
      ->capture_default_str();
  c->add_option("--bytes", o->sizes, "message sizes S, comma separated (the whole tensor; K, M, G suffixes)")
      ->capture_default_str();
  c->add_option("--devices", o->devices, "devices in the group, n")->capture_default_str()->each([o](const std::string&) {
    o->devices_given = true;
  });
  c->add_option("--axes", o->axes,
                "the sizes of the mesh axes the group spans, comma separated (e.g. 4,4); a torus uses the links of "
                "each; default one axis of --devices");
  c->add_option("--preset", o->presets, "hardware presets, comma separated, or all")->capture_default_str();
  c->add_flag("--sources", o->sources, "print where each preset's numbers come from");
  c->add_flag("--presets", o->presets_only,
              "print only the presets (launch per call, alpha, rates, wiring); with --sources, where each comes from");
  c->add_option("--machine", o->machine,
                "the this-machine preset's figures from this machine.dat (shardlab sweep --what machine writes it)");
  c->add_flag("--json", o->json, "print one JSON object instead of the tables");
  return {c, [o] { return run(*o); }};
}

}  // namespace shardlab
