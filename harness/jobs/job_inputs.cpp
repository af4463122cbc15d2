#include "harness/jobs/job_inputs.hpp"

#include <sstream>

#include <toml++/toml.h>

#include "core/error.hpp"
#include "core/text.hpp"

namespace shardlab {

double ClusterSpec::peak(const std::string& dtype) const {
  auto it = peak_flops.find(dtype);
  if (it != peak_flops.end()) return it->second;
  std::string known;
  for (const auto& [k, v] : peak_flops) known += (known.empty() ? "" : ", ") + k;
  throw Error(ErrorKind::parse, "cluster " + name + " has no peak for " + dtype + "; it has " + known);
}

namespace {

double mlp_params(const ModelSpec& m) {  // one FFN (one expert): weights and biases
  const double h = m.hidden, f = m.ffn;
  const double mats = m.gated_ffn ? 3 : 2;
  return mats * h * f + (m.biases ? f * (m.gated_ffn ? 2 : 1) + h : 0);
}

}  // namespace

double expert_params(const ModelSpec& m) { return m.moe() ? m.experts * mlp_params(m) : 0; }

double layer_params(const ModelSpec& m) {
  if (!m.attention) return mlp_params(m);
  const double h = m.hidden, hd = h / m.heads, kv = 2 * h * m.kv_heads * hd;
  const double attn = h * h + kv + h * h + (m.biases ? h + 2 * m.kv_heads * hd + h : 0);
  const double norms = m.biases ? 4 * h : 2 * h;  // two LayerNorms (weight, bias) or RMSNorms
  const double mlp = m.moe() ? expert_params(m) + h * m.experts : mlp_params(m);  // + router
  return attn + norms + mlp;
}

double layer_active_params(const ModelSpec& m) {
  if (!m.moe()) return layer_params(m);
  return layer_params(m) - expert_params(m) + m.top_k * mlp_params(m);
}

double embedding_params(const ModelSpec& m) {
  const double h = m.hidden;
  return m.vocab * h + (m.learned_positions ? double(m.seq) * h : 0) + (m.tied_embeddings ? 0 : m.vocab * h);
}

double model_params(const ModelSpec& m) { return m.layers * layer_params(m) + embedding_params(m); }

namespace {

struct Reader {
  const toml::table& t;
  std::string where;
  const toml::node* get(const std::string& key, bool required) const {
    const toml::node* n = t.get(key);
    if (!n && required) throw Error(ErrorKind::parse, where + ": missing " + key);
    return n;
  }
  int integer(const std::string& key, int fallback, bool required = false) const {
    const toml::node* n = get(key, required);
    if (!n) return fallback;
    auto v = n->value<std::int64_t>();
    if (!v || *v < 0) throw Error(ErrorKind::parse, where + ": " + key + " must be a whole number >= 0");
    return static_cast<int>(*v);
  }
  double number(const std::string& key, double fallback, bool required = false) const {
    const toml::node* n = get(key, required);
    if (!n) return fallback;
    auto v = n->value<double>();
    if (!v || *v < 0) throw Error(ErrorKind::parse, where + ": " + key + " must be a number >= 0");
    return *v;
  }
  bool flag(const std::string& key, bool fallback) const {
    const toml::node* n = get(key, false);
    if (!n) return fallback;
    auto v = n->value<bool>();
    if (!v) throw Error(ErrorKind::parse, where + ": " + key + " must be true or false");
    return *v;
  }
  std::string text(const std::string& key, const std::string& fallback, bool required = false) const {
    const toml::node* n = get(key, required);
    if (!n) return fallback;
    auto v = n->value<std::string>();
    if (!v) throw Error(ErrorKind::parse, where + ": " + key + " must be a string");
    return *v;
  }
  const toml::table& table(const std::string& key) const {
    const toml::node* n = get(key, true);
    if (!n->is_table()) throw Error(ErrorKind::parse, where + ": " + key + " must be a table");
    return *n->as_table();
  }
};

toml::table parse_toml(const std::string& text, const std::string& where) {
  try {
    return toml::parse(text, where);
  } catch (const toml::parse_error& e) {
    throw Error(ErrorKind::parse, where + ": " + std::string(e.description()) + " at line " +
                                      std::to_string(e.source().begin.line));
  }
}

Hardware link(const Reader& parent, const std::string& key, const std::string& cluster) {
  const Reader r{parent.table(key), parent.where + " [" + key + "]"};
  Hardware hw;
  hw.name = cluster + " " + key;
  hw.alpha = r.number("alpha_us", 0, true) * 1e-6;
  hw.launch = r.number("launch_us", 0) * 1e-6;
  hw.bytes_per_s = r.number("gb_per_s", 0, true) * 1e9;
  hw.reduce_bytes_per_s = hw.bytes_per_s * 10;  // on-device reduction assumed 10x the link, as cost.cpp
  hw.element_bytes = 2;
  if (hw.bytes_per_s <= 0) throw Error(ErrorKind::parse, r.where + ": gb_per_s must be above 0");
  return hw;
}

}  // namespace

ModelSpec parse_model_toml(const std::string& text, const std::string& where) {
  const toml::table t = parse_toml(text, where);
  const Reader r{t, where};
  ModelSpec m;
  m.name = r.text("name", where);
  m.source = r.text("source", "", true);
  m.layers = r.integer("layers", 0, true);
  m.hidden = r.integer("hidden", 0, true);
  m.heads = r.integer("heads", 0, true);
  m.kv_heads = r.integer("kv_heads", m.heads);
  m.ffn = r.integer("ffn", 4 * m.hidden);
  m.vocab = r.integer("vocab", 0, true);
  m.seq = r.integer("seq", 0, true);
  m.global_batch = r.integer("global_batch", 0, true);
  m.experts = r.integer("experts", 0);
  m.top_k = r.integer("top_k", m.experts > 0 ? 2 : 0);
  m.gated_ffn = r.flag("gated_ffn", false);
  m.biases = r.flag("biases", true);
  m.tied_embeddings = r.flag("tied_embeddings", true);
  m.learned_positions = r.flag("learned_positions", true);
  m.flash_attention = r.flag("flash_attention", true);
  if (m.layers < 1 || m.hidden < 1 || m.heads < 1 || m.vocab < 1 || m.seq < 1 || m.global_batch < 1 || m.ffn < 1)
    throw Error(ErrorKind::parse, where + ": layers, hidden, heads, ffn, vocab, seq and global_batch must be above 0");
  if (m.hidden % m.heads || m.kv_heads < 1 || m.heads % m.kv_heads)
    throw Error(ErrorKind::parse, where + ": heads must divide hidden, and kv_heads divide heads");
  if (m.experts > 0 && (m.top_k < 1 || m.top_k > m.experts))
    throw Error(ErrorKind::parse, where + ": top_k must be 1 to experts");
  return m;
}

ClusterSpec parse_cluster_toml(const std::string& text, const std::string& where) {
  const toml::table t = parse_toml(text, where);
  const Reader r{t, where};
  ClusterSpec c;
  c.name = r.text("name", where);
  c.description = r.text("description", "");
  c.source = r.text("source", "", true);
  c.devices_per_node = r.integer("devices_per_node", 0, true);
  c.max_nodes = r.integer("max_nodes", 0);
  c.memory_bytes = r.number("memory_gb", 0, true) * 1e9;
  c.hbm_bytes_per_s = r.number("hbm_gb_per_s", 0, true) * 1e9;
  const Reader peaks{r.table("peak_tflops"), where + " [peak_tflops]"};
  for (const auto& [k, v] : peaks.t) c.peak_flops[std::string(k.str())] = peaks.number(std::string(k.str()), 0) * 1e12;
  c.gemm_efficiency = r.number("gemm_efficiency", 0, true);
  c.efficiency_source = r.text("efficiency_source", "", true);
  c.intra = link(r, "intra", c.name);
  c.inter = link(r, "inter", c.name);
  if (c.devices_per_node < 1 || c.memory_bytes <= 0 || c.hbm_bytes_per_s <= 0 || c.gemm_efficiency <= 0 ||
      c.gemm_efficiency > 1 || c.peak_flops.empty())
    throw Error(ErrorKind::parse, where + ": devices_per_node, memory_gb, hbm_gb_per_s and peak_tflops must be "
                                          "above 0, gemm_efficiency in (0, 1]");
  return c;
}

namespace {

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) out += (ch == '"' || ch == '\\') ? std::string("\\") + ch : std::string(1, ch);
  return out + "\"";
}
const char* yes(bool b) { return b ? "true" : "false"; }

}  // namespace

std::string model_toml(const ModelSpec& m) {
  std::ostringstream o;
  o << "name = " << quoted(m.name) << "\nsource = " << quoted(m.source) << "\nlayers = " << m.layers
    << "\nhidden = " << m.hidden << "\nheads = " << m.heads << "\nkv_heads = " << m.kv_heads << "\nffn = " << m.ffn
    << "\nvocab = " << m.vocab << "\nseq = " << m.seq << "\nglobal_batch = " << shortest(m.global_batch)
    << "\nexperts = " << m.experts << "\ntop_k = " << m.top_k << "\ngated_ffn = " << yes(m.gated_ffn)
    << "\nbiases = " << yes(m.biases) << "\ntied_embeddings = " << yes(m.tied_embeddings)
    << "\nlearned_positions = " << yes(m.learned_positions) << "\nflash_attention = " << yes(m.flash_attention)
    << "\n";
  return o.str();
}

std::string cluster_toml(const ClusterSpec& c) {
  std::ostringstream o;
  o << "name = " << quoted(c.name) << "\ndescription = " << quoted(c.description) << "\nsource = " << quoted(c.source)
    << "\ndevices_per_node = " << c.devices_per_node << "\nmax_nodes = " << c.max_nodes
    << "\nmemory_gb = " << shortest(c.memory_bytes / 1e9) << "\nhbm_gb_per_s = " << shortest(c.hbm_bytes_per_s / 1e9)
    << "\ngemm_efficiency = " << shortest(c.gemm_efficiency) << "\nefficiency_source = " << quoted(c.efficiency_source)
    << "\n\n[peak_tflops]\n";
  for (const auto& [k, v] : c.peak_flops) o << k << " = " << shortest(v / 1e12) << "\n";
  for (const auto* l : {&c.intra, &c.inter})
    o << "\n[" << (l == &c.intra ? "intra" : "inter") << "]\nalpha_us = " << shortest(l->alpha * 1e6)
      << "\nlaunch_us = " << shortest(l->launch * 1e6) << "\ngb_per_s = " << shortest(l->bytes_per_s / 1e9) << "\n";
  return o.str();
}

ModelSpec load_model(const std::string& name) {
  if (name.size() > 5 && name.substr(name.size() - 5) == ".toml")
    return parse_model_toml(read_text_file(name, "model file"), name);
  std::string known;
  for (const auto& m : model_presets()) {
    if (m.name == name) return m;
    known += (known.empty() ? "" : ", ") + m.name;
  }
  throw Error(ErrorKind::parse, "unknown model " + name + "; give a .toml file or one of " + known);
}

ClusterSpec load_cluster(const std::string& name) {
  if (name.size() > 5 && name.substr(name.size() - 5) == ".toml")
    return parse_cluster_toml(read_text_file(name, "cluster file"), name);
  std::string known;
  for (const auto& c : cluster_presets()) {
    if (c.name == name) return c;
    known += (known.empty() ? "" : ", ") + c.name;
  }
  throw Error(ErrorKind::parse, "unknown cluster " + name + "; give a .toml file or one of " + known);
}

}  // namespace shardlab
